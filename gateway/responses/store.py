"""Stored responses, per tenant: save, get, delete, the conversation a chained turn continues, input-item pages.

Every read and delete is keyed by (tenant_id, response_id): a response of
another tenant is exactly as absent as an unknown id. Query functions take a
session and never commit (the caller's session_scope does). A row is written
only for a generation that completed (gateway/responses/service.py), so there
is never a half-stored response.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gateway.db.models import StoredResponse
from gateway.responses.items import dumps
from gateway.responses.schemas import InputItemList, ResponseObject


@dataclass(frozen=True)
class Turn:
    """What a stored response holds: its resolved input items and the response object, and the id of
    its conversation (the chain's first response; its own id for a first turn)."""

    input_items: list[dict]
    response: ResponseObject
    chain_id: str

    def conversation(self) -> list[dict]:
        """The items a turn chained to this one continues: this turn's input, then its output."""
        return [*self.input_items, *self.response.output]


def save_response(session: Session, tenant_id: int, response: ResponseObject, input_items: list[dict],
                  chain_id: str | None = None) -> None:
    """Store a response; `chain_id` is its conversation's (None: it starts one)."""
    session.add(StoredResponse(
        id=response.id, tenant_id=tenant_id, previous_response_id=response.previous_response_id, chain_id=chain_id,
        model=response.model, status=response.status, input_items_json=dumps(input_items),
        response_json=response.model_dump_json(),
    ))


def load_turn(session: Session, tenant_id: int, response_id: str) -> Turn | None:
    """The tenant's stored response `response_id`, or None (unknown, deleted, or another tenant's)."""
    row = session.scalar(select(StoredResponse).where(
        StoredResponse.id == response_id, StoredResponse.tenant_id == tenant_id))
    if row is None:
        return None
    return Turn(json.loads(row.input_items_json), ResponseObject.model_validate_json(row.response_json),
                row.chain_id or row.id)


def delete_response(session: Session, tenant_id: int, response_id: str) -> bool:
    """Delete the tenant's response; False when there was none to delete."""
    result = session.execute(delete(StoredResponse).where(
        StoredResponse.id == response_id, StoredResponse.tenant_id == tenant_id))
    return result.rowcount > 0


def page_items(items: list[dict], limit: int, order: str, after: str | None) -> InputItemList | None:
    """One page of `items` in `order` ("asc" | "desc"), starting after the item with id `after`.

    None when `after` names no item of the list."""
    ordered = items if order == "asc" else items[::-1]
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            return None
        ordered = ordered[ids.index(after) + 1:]
    page = ordered[:limit]
    return InputItemList(data=page, first_id=page[0]["id"] if page else None,
                         last_id=page[-1]["id"] if page else None, has_more=len(ordered) > limit)
