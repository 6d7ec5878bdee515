"""Pinned static prefixes: render, prefill and pin a tenant's hot prefix; expire, unpin, re-warm.

A pin is stored twice: as a `Pin` row (what to pin, for whom, until when; survives restarts) and
as a live engine pin (the radix-cache path the engine will not evict). `PinBook` maps one to the
other for this process. Invariants:
- A stored pin with `deleted_at` unset is live in the engine (or being re-warmed at start).
- The prefix is rendered exactly like a chat request's static sections (canonicalize, then the
  template's static blocks, then section-stable tokenization), so requests that share the pinned
  system/tools/context hit it token for token.
- A tenant's pinned tokens (sum of its live pins, page-aligned) never exceed `pin_quota_tokens`;
  the engine also bounds the namespace (a cache group's quota is its tenants' sum).
- Creating a pin commits its row first and pins in the engine second; if the engine pin fails the
  row is deleted again, so no engine pin ever exists without its committed row (the row alone, for
  the moment between the two, counts against the quota, which is what makes the check race-free:
  the quota check and the row's commit run under one per-tenant lock, and on PostgreSQL under a
  row lock on the tenant, so two concurrent pins at the quota cannot both pass).
- A soft pin (ttl_seconds) is unpinned when it expires; its pages then age out by LRU like any
  cached prefix.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from gateway.db.models import Pin, Tenant
from gateway.db.session import session_scope
from gateway.prompt_templates import labels
from gateway.tenants.isolation import cache_namespace

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gateway.state import GatewayState

log = logging.getLogger(__name__)


class PinQuotaError(Exception):
    """The pin would take the tenant past its pin quota; the message carries the numbers."""


class PinTooShortError(ValueError):
    """The rendered prefix is shorter than one KV page, so there is nothing to pin."""


@dataclass(frozen=True)
class PinSpec:
    """What a pin covers: the static sections of a request, and the template that renders them."""

    system: str
    tools: list[dict] = field(default_factory=list)
    context: list[Any] = field(default_factory=list)
    template: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PinSpec:
        return cls(**json.loads(text))


@dataclass
class LivePin:
    engine_pin_id: int
    num_hits_recorded: int = 0
    expiry: asyncio.Task | None = None


class PinBook:
    """This process's live pins: stored pin id -> engine pin id, hits already saved, TTL timer."""

    def __init__(self) -> None:
        self.live: dict[int, LivePin] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def tenant_lock(self, tenant_id: int) -> asyncio.Lock:
        """The lock that serializes quota check + row commit for one tenant (event loop only)."""
        return self._locks.setdefault(tenant_id, asyncio.Lock())

    def add(self, pin_id: int, engine_pin_id: int) -> LivePin:
        self.live[pin_id] = LivePin(engine_pin_id)
        return self.live[pin_id]

    def remove(self, pin_id: int) -> LivePin | None:
        """Forget a pin (cancelling its timer unless that timer is the caller)."""
        live = self.live.pop(pin_id, None)
        if live is not None and live.expiry is not None and live.expiry is not asyncio.current_task():
            live.expiry.cancel()
        return live


def pin_book(gw: GatewayState) -> PinBook:
    return gw.pins


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def token_hash(token_ids: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()


def render_prefix(gw: GatewayState, spec: PinSpec, tenant_source: str | None = None) -> tuple[str, list[int]]:
    """(template name, token ids) of the static prefix a chat request with these sections starts with."""
    from gateway.canonicalize import tokenize_segments

    tokenizer = gw.engine.tokenizer
    rendered = gw.templates.render_static_prefix(
        spec.template, spec.system, spec.tools or None, spec.context or None, tokenizer, tenant_source=tenant_source
    )
    return rendered.template_name, list(tokenize_segments(tokenizer, rendered.segments).token_ids)


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


async def pin_tokens(gw: GatewayState, session: Session, tenant: Tenant, token_ids: list[int]) -> int:
    """Prefill and pin `token_ids` in the tenant's namespace; returns the engine pin id."""
    namespace = cache_namespace(tenant.id, tenant.cache_group, gw.engine.model_id)
    gw.engine.set_pin_quota(namespace, namespace_quota(session, tenant))
    return await gw.engine.pin(namespace, token_ids)


async def create_pin(gw: GatewayState, session: Session, tenant: Tenant, spec: PinSpec, ttl_seconds: int | None) -> Pin:
    """Render, quota-check, prefill and pin a static prefix; store it. Raises PinQuotaError, engine errors."""
    source = tenant_template_source(session, tenant, spec.template)
    name, token_ids = await asyncio.to_thread(render_prefix, gw, spec, source)
    page_size = gw.engine.config.page_size
    num_tokens = len(token_ids) // page_size * page_size
    if num_tokens == 0:
        raise PinTooShortError(f"the prefix has {len(token_ids)} tokens; a pin needs at least one page ({page_size})")
    async with pin_book(gw).tenant_lock(tenant.id):
        lock_tenant_row(session, tenant.id)
        check_quota(session, tenant, num_tokens)
        pin = new_pin_row(gw, tenant, spec, name, token_ids, num_tokens, ttl_seconds)
        session.add(pin)
        await asyncio.to_thread(session.commit)
    try:
        engine_pin_id = await pin_tokens(gw, session, tenant, token_ids)
    except BaseException:
        await asyncio.to_thread(delete_row, session, pin)
        raise
    live = pin_book(gw).add(pin.id, engine_pin_id)
    if ttl_seconds:
        live.expiry = schedule_expiry(gw, pin.id, ttl_seconds)
    return pin


def new_pin_row(gw: GatewayState, tenant: Tenant, spec: PinSpec, name: str, token_ids: list[int], num_tokens: int,
                ttl_seconds: int | None) -> Pin:
    now = utc_now()
    return Pin(
        tenant_id=tenant.id,
        namespace=cache_namespace(tenant.id, tenant.cache_group, gw.engine.model_id),
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


def record_hits(gw: GatewayState, pin: Pin) -> int:
    """Save the engine's hit count for a live pin into `pin.hits`; returns the total."""
    live = pin_book(gw).live.get(pin.id)
    if live is None or gw.engine is None:
        return pin.hits or 0
    try:
        num_hits = int(gw.engine.pin_info(live.engine_pin_id).get("hits", 0))
    except Exception:  # the engine no longer knows the pin (e.g. restarted underneath)
        return pin.hits or 0
    pin.hits = (pin.hits or 0) + num_hits - live.num_hits_recorded
    live.num_hits_recorded = num_hits
    return pin.hits


def unpin(gw: GatewayState, pin: Pin, when: datetime | None = None) -> None:
    """Release a stored pin in the engine and mark it deleted (kept for history)."""
    record_hits(gw, pin)
    live = pin_book(gw).remove(pin.id)
    if live is not None and gw.engine is not None:
        gw.engine.unpin(live.engine_pin_id)
    pin.deleted_at = when or utc_now()


def list_live_pins(session: Session, tenant_id: int | None = None) -> list[Pin]:
    query = select(Pin).where(Pin.deleted_at.is_(None)).order_by(Pin.id)
    if tenant_id is not None:
        query = query.where(Pin.tenant_id == tenant_id)
    return list(session.scalars(query))


def schedule_expiry(gw: GatewayState, pin_id: int, delay_s: float) -> asyncio.Task:
    """Unpin `pin_id` after `delay_s` (a soft pin's end); the task lives in gw.background_tasks."""

    async def expire() -> None:
        await asyncio.sleep(max(delay_s, 0.0))
        expire_now(gw, pin_id)  # on the loop: PinBook is event-loop only

    task = asyncio.get_running_loop().create_task(expire(), name=f"pin-expiry-{pin_id}")
    gw.background_tasks.add(task)
    task.add_done_callback(gw.background_tasks.discard)
    return task


def expire_now(gw: GatewayState, pin_id: int) -> None:
    with session_scope(gw.session_factory) as session:
        pin = session.get(Pin, pin_id)
        if pin is not None and pin.deleted_at is None:
            unpin(gw, pin, pin.expires_at)
            log.info("pin %d expired after %ss; its prefix is ordinary LRU cache now", pin_id, pin.ttl_seconds)


async def rewarm_pins(gw: GatewayState) -> int:
    """Start-up step, run beside serving: pin every stored live pin again (logging progress); returns
    how many were warmed.

    Pins whose TTL ran out while the server was down are marked deleted; a pin that fails to warm
    (template gone, prompt too long for a new model) is logged and left for a later start.
    """
    if gw.engine is None:
        log.info("pins: no embedded engine, nothing to re-warm")
        return 0
    with session_scope(gw.session_factory) as session:
        pins = expire_overdue(session, list_live_pins(session))
        if pins:
            log.info("pins: re-warming %d pins (%d tokens)", len(pins), sum(p.num_tokens for p in pins))
        num_warmed = 0
        for i, pin in enumerate(pins, 1):
            num_warmed += await rewarm_one(gw, session, pin)
            log.info("pins: re-warmed %d/%d (pin %d, %d tokens)", i, len(pins), pin.id, pin.num_tokens)
    return num_warmed


def expire_overdue(session: Session, pins: list[Pin]) -> list[Pin]:
    """Mark pins whose expiry has passed as deleted; returns the others."""
    now = utc_now()
    for pin in pins:
        if pin.expires_at is not None and pin.expires_at <= now:
            pin.deleted_at = pin.expires_at
    return [p for p in pins if p.deleted_at is None]


async def rewarm_one(gw: GatewayState, session: Session, pin: Pin) -> int:
    """Pin one stored pin again; 1 on success, 0 (logged) on failure or when its render passes
    limits.pin_rewarm_timeout_s (the template sandbox's own deadline normally ends it sooner)."""
    tenant = session.get(Tenant, pin.tenant_id)
    try:
        spec = PinSpec.from_json(pin.spec_json or "{}")
        source = tenant_template_source(session, tenant, spec.template)
        timeout_s = gw.settings.limits.pin_rewarm_timeout_s
        _, token_ids = await asyncio.wait_for(asyncio.to_thread(render_prefix, gw, spec, source), timeout_s)
        engine_pin_id = await pin_tokens(gw, session, tenant, token_ids)
    except Exception as exc:
        log.warning("pins: could not re-warm pin %d of tenant %s: %s", pin.id, tenant.name if tenant else "?", exc)
        return 0
    if token_hash(token_ids[: pin.num_tokens]) != pin.token_hash:
        log.warning("pins: pin %d renders differently now (template or tokenizer changed)", pin.id)
    live = pin_book(gw).add(pin.id, engine_pin_id)
    if pin.expires_at is not None:
        live.expiry = schedule_expiry(gw, pin.id, (pin.expires_at - utc_now()).total_seconds())
    return 1
