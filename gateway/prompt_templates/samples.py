"""A small, bounded sample of the request bodies that named each tenant template.

The template studio prefills its editor from it and replays it in the what-if estimate
(gateway/insight/what_if.py). At most `limit` bodies are kept per (tenant, template name):
recording one more deletes the oldest. Bodies larger than MAX_BODY_CHARS are not kept.
Recording is opt-out: RADIXGATE_TEMPLATE_SAMPLE_SIZE=0 turns it off, and a tenant can drop
its samples with DELETE /v1/templates/{name}/samples.

Functions take a session and never commit (the chat path queues `record_sample` on the gateway's
SideWriter, gateway/db/side_writer.py, which commits it off the request path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import delete, select

from gateway.db.models import TemplateSample

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

MAX_BODY_CHARS = 64_000


@dataclass(frozen=True)
class Sample:
    id: int
    body: dict
    created_at: datetime


def record_sample(session: Session, tenant_id: int, template: str, body: dict, limit: int) -> bool:
    """Keep `body` as the newest sample of (tenant, template), dropping the oldest past `limit`.
    False (nothing stored) when limit <= 0 or the body is too large."""
    text = json.dumps(body, ensure_ascii=False, sort_keys=True)
    if limit <= 0 or len(text) > MAX_BODY_CHARS:
        return False
    session.add(TemplateSample(tenant_id=tenant_id, template=template, body=text))
    session.flush()
    keep = select(TemplateSample.id).where(*scope(tenant_id, template)).order_by(TemplateSample.id.desc()).limit(limit)
    session.execute(delete(TemplateSample).where(*scope(tenant_id, template), TemplateSample.id.not_in(keep)))
    return True


def list_samples(session: Session, tenant_id: int, template: str, limit: int) -> list[Sample]:
    """The newest `limit` samples of (tenant, template), oldest first (the order they were sent)."""
    rows = session.scalars(
        select(TemplateSample).where(*scope(tenant_id, template)).order_by(TemplateSample.id.desc()).limit(limit)
    ).all()
    return [Sample(row.id, json.loads(row.body), row.created_at) for row in reversed(rows)]


def delete_samples(session: Session, tenant_id: int, template: str) -> int:
    """Drop every sample of (tenant, template); returns how many there were."""
    result = session.execute(delete(TemplateSample).where(*scope(tenant_id, template)))
    return result.rowcount or 0


def scope(tenant_id: int, template: str) -> tuple:
    return TemplateSample.tenant_id == tenant_id, TemplateSample.template == template
