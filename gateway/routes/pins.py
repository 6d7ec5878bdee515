"""Pins API: POST pins a tenant's static prefix (hard, or soft for ttl_seconds), GET lists them with
their tokens and hits, DELETE unpins. Over the tenant's pin quota is a 409 with the numbers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field, model_validator

from engine import QuotaExceededError
from gateway.canonicalize.surrogates import scrub_surrogates
from gateway.generation.request_limits import check_count, check_strings
from gateway.db.models import Pin
from gateway.deps import LimitsDep, PinnerDep, SessionDep, TenantDep
from gateway.errors import bad_request, conflict, from_exception, not_found
from gateway.pins import rows
from gateway.pins.book import PinQuotaError, PinSpec, PinTooShortError
from gateway.prompt_templates import TemplateError, TemplateNotFound

router = APIRouter(prefix="/v1/pins", tags=["pins"])


class PinCreate(BaseModel):
    system: str = Field(min_length=1)
    template: str | None = None
    tools: list[dict[str, Any]] | None = None
    context: list[str | dict[str, Any]] | None = None
    ttl_seconds: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _scrub_surrogates(cls, data):
        return scrub_surrogates(data)


class PinOut(BaseModel):
    id: int
    object: str = "pin"
    template: str | None
    num_tokens: int
    hits: int
    ttl_seconds: int | None
    expires_at: datetime | None
    created_at: datetime | None
    is_warm: bool


def pin_out(pinner, pin: Pin) -> PinOut:
    return PinOut(
        id=pin.id,
        template=pin.template,
        num_tokens=pin.num_tokens,
        hits=pinner.record_hits(pin),
        ttl_seconds=pin.ttl_seconds,
        expires_at=pin.expires_at,
        created_at=pin.created_at,
        is_warm=pinner.is_warm(pin),
    )


def check_pin_limits(body: PinCreate, limits) -> None:
    """ttl_seconds within limits.max_pin_ttl_s, at most max_tools/max_documents, every string within max_field_chars."""
    if body.ttl_seconds is not None and body.ttl_seconds > limits.max_pin_ttl_s:
        raise bad_request(f"ttl_seconds may be at most {limits.max_pin_ttl_s}.", "ttl_seconds", "invalid_ttl")
    check_count(("tools",), len(body.tools or ()), limits.max_tools)
    check_count(("context",), len(body.context or ()), limits.max_documents)
    check_strings(body.model_dump(mode="json"), limits.max_field_chars, ())


@router.post("", status_code=201, response_model=PinOut)
async def create_pin(body: PinCreate, tenant: TenantDep, session: SessionDep, pinner: PinnerDep,
                     limits: LimitsDep) -> PinOut:
    """Render the static prefix, prefill it in the tenant's namespace and pin it."""
    if pinner.engine is None:
        raise bad_request("Pins need the embedded engine; this gateway serves only remote backends.")
    check_pin_limits(body, limits)
    spec = PinSpec(system=body.system, tools=body.tools or [], context=body.context or [], template=body.template)
    try:
        pin = await pinner.create(session, tenant, spec, body.ttl_seconds)
    except PinQuotaError as exc:
        raise conflict(str(exc), code="pin_quota_exceeded") from exc
    except PinTooShortError as exc:
        raise bad_request(str(exc), "system") from exc
    except (TemplateNotFound, TemplateError, QuotaExceededError) as exc:
        raise from_exception(exc) from exc
    except ValueError as exc:  # malformed tools or context the schema let through (the message names it)
        raise bad_request(f"Malformed pin body: {exc}", None, "invalid_request_body") from exc
    return pin_out(pinner, pin)


@router.get("")
def list_pins(tenant: TenantDep, session: SessionDep, pinner: PinnerDep) -> dict:
    """The tenant's live pins: tokens pinned and hits served."""
    data = [pin_out(pinner, pin) for pin in rows.list_live_pins(session, tenant.id)]
    return {"object": "list", "data": data, "num_pinned_tokens": sum(p.num_tokens for p in data)}


@router.delete("/{pin_id}")
def delete_pin(pin_id: int, tenant: TenantDep, session: SessionDep, pinner: PinnerDep) -> dict:
    """Unpin: the prefix stays cached but becomes evictable."""
    pin = session.get(Pin, pin_id)
    if pin is None or pin.tenant_id != tenant.id or pin.deleted_at is not None:
        raise not_found(f"No pin with id {pin_id}.", "pin_id")
    pinner.unpin(pin)
    return {"id": pin_id, "object": "pin", "deleted": True, "hits": pin.hits}
