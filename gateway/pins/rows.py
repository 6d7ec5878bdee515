"""Pin rows and quotas in the database: functions take a session and never commit (except `delete_row`, the
undo of a failed engine pin, which commits its own rollback)."""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from gateway.db.models import Pin, Tenant
from gateway.pins.book import PinQuotaError, PinSpec
from gateway.prompt_templates import labels

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

log = logging.getLogger("gateway.pins.service")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def token_hash(token_ids: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()


def tenant_template_source(session: Session, tenant: Tenant, name: str | None) -> str | None:
    saved = labels.resolve(session, tenant.id, name) if name else None  # `name`, `name@label` or `name@N`
    return saved.source if saved is not None else None


def pinned_tokens(session: Session, tenant_id: int) -> int:
    """Tokens the tenant's live pins hold (the figure its quota bounds)."""
    total = session.scalar(
        select(func.sum(Pin.num_tokens)).where(Pin.tenant_id == tenant_id, Pin.deleted_at.is_(None))
    )
    return int(total or 0)


def namespace_quota(session: Session, tenant: Tenant) -> int:
    """The engine quota of the tenant's namespace: its own quota, or its cache group's sum."""
    if not tenant.cache_group:
        return tenant.pin_quota_tokens or 0
    total = session.scalar(select(func.sum(Tenant.pin_quota_tokens)).where(Tenant.cache_group == tenant.cache_group))
    return int(total or 0)


def check_quota(session: Session, tenant: Tenant, num_tokens: int) -> None:
    """Raise PinQuotaError if pinning `num_tokens` more would pass the tenant's quota."""
    used, quota = pinned_tokens(session, tenant.id), tenant.pin_quota_tokens or 0
    if used + num_tokens > quota:
        raise PinQuotaError(
            f"Pin quota exceeded for tenant {tenant.name!r}: this pin needs {num_tokens} tokens, "
            f"{used} are already pinned, quota is {quota} tokens ({used + num_tokens - quota} over)."
        )


def new_pin_row(tenant: Tenant, namespace: str, spec: PinSpec, name: str, token_ids: list[int], num_tokens: int,
                ttl_seconds: int | None) -> Pin:
    now = utc_now()
    return Pin(
        tenant_id=tenant.id,
        namespace=namespace,
        template=name,
        num_tokens=num_tokens,
        token_hash=token_hash(token_ids[:num_tokens]),
        ttl_seconds=ttl_seconds,
        expires_at=now + timedelta(seconds=ttl_seconds) if ttl_seconds else None,
        created_at=now,
        hits=0,
        spec_json=spec.to_json(),
    )


def lock_tenant_row(session: Session, tenant_id: int) -> None:
    """SELECT ... FOR UPDATE on the tenant (PostgreSQL; SQLite serializes writers itself), so replicas
    pinning for one tenant at once take turns until the row commits."""
    session.execute(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())


def delete_row(session: Session, pin: Pin) -> None:
    """Undo a committed row whose engine pin failed (a failure here is logged; a later start re-warms it)."""
    try:
        session.rollback()
        session.delete(pin)
        session.commit()
    except Exception:
        log.exception("pins: the row of pin %d could not be deleted after its engine pin failed", pin.id)


def list_live_pins(session: Session, tenant_id: int | None = None) -> list[Pin]:
    query = select(Pin).where(Pin.deleted_at.is_(None)).order_by(Pin.id)
    if tenant_id is not None:
        query = query.where(Pin.tenant_id == tenant_id)
    return list(session.scalars(query))


def expire_overdue(session: Session, pins: list[Pin]) -> list[Pin]:
    """Mark pins whose expiry has passed as deleted; returns the others."""
    now = utc_now()
    for pin in pins:
        if pin.expires_at is not None and pin.expires_at <= now:
            pin.deleted_at = pin.expires_at
    return [p for p in pins if p.deleted_at is None]
