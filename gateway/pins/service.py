"""Pinned static prefixes: render, prefill and pin a tenant's hot prefix; expire, unpin, re-warm.

A pin is stored twice: as a `Pin` row (what to pin, for whom, until when; survives restarts) and
as a live engine pin (the radix-cache path the engine will not evict). `PinBook` (book.py) maps one
to the other for this process. Invariants:
- A stored pin with `deleted_at` unset is live in the engine (or being re-warmed at start).
- The prefix is rendered exactly like a request's static sections (canonicalize, then the
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
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gateway.db.models import Pin, Tenant
from gateway.db.session import session_scope
from gateway.pins import rows
from gateway.pins.book import PinBook, PinSpec, PinTooShortError
from gateway.tenants.isolation import cache_namespace

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from engine import Engine

log = logging.getLogger(__name__)


@dataclass
class Pinner:
    """Pins for this gateway: handed the engine (None on an edge: nothing is pinned there, stored pins can
    still be listed and deleted), the templates, the database and the app's task set."""

    engine: Engine | None
    templates: Any
    session_factory: sessionmaker[Session]
    background_tasks: set[asyncio.Task]
    rewarm_timeout_s: float
    book: PinBook = field(default_factory=PinBook)

    def render_prefix(self, spec: PinSpec, tenant_source: str | None = None) -> tuple[str, list[int]]:
        """(template name, token ids) of the static prefix a request with these sections starts with."""
        from gateway.canonicalize import tokenize_segments

        tokenizer = self.engine.tokenizer
        rendered = self.templates.render_static_prefix(
            spec.template, spec.system, spec.tools or None, spec.context or None, tokenizer, tenant_source=tenant_source
        )
        return rendered.template_name, list(tokenize_segments(tokenizer, rendered.segments).token_ids)

    def namespace(self, tenant: Tenant) -> str:
        return cache_namespace(tenant.id, tenant.cache_group, self.engine.model_id)

    async def pin_tokens(self, session: Session, tenant: Tenant, token_ids: list[int]) -> int:
        """Prefill and pin `token_ids` in the tenant's namespace; returns the engine pin id."""
        namespace = self.namespace(tenant)
        self.engine.set_pin_quota(namespace, rows.namespace_quota(session, tenant))
        return await self.engine.pin(namespace, token_ids)

    async def create(self, session: Session, tenant: Tenant, spec: PinSpec, ttl_seconds: int | None) -> Pin:
        """Render, quota-check, prefill and pin a static prefix; store it. Raises PinQuotaError, engine errors."""
        source = rows.tenant_template_source(session, tenant, spec.template)
        name, token_ids = await asyncio.to_thread(self.render_prefix, spec, source)
        page_size = self.engine.config.page_size
        num_tokens = len(token_ids) // page_size * page_size
        if num_tokens == 0:
            raise PinTooShortError(f"the prefix has {len(token_ids)} tokens; a pin needs at least one page ({page_size})")
        async with self.book.tenant_lock(tenant.id):
            rows.lock_tenant_row(session, tenant.id)
            rows.check_quota(session, tenant, num_tokens)
            pin = rows.new_pin_row(tenant, self.namespace(tenant), spec, name, token_ids, num_tokens, ttl_seconds)
            session.add(pin)
            await asyncio.to_thread(session.commit)
        try:
            engine_pin_id = await self.pin_tokens(session, tenant, token_ids)
        except BaseException:
            await asyncio.to_thread(rows.delete_row, session, pin)
            raise
        live = self.book.add(pin.id, engine_pin_id)
        if ttl_seconds:
            live.expiry = self.schedule_expiry(pin.id, ttl_seconds)
        return pin

    def is_warm(self, pin: Pin) -> bool:
        return pin.id in self.book.live

    def record_hits(self, pin: Pin) -> int:
        """Save the engine's hit count for a live pin into `pin.hits`; returns the total."""
        live = self.book.live.get(pin.id)
        if live is None or self.engine is None:
            return pin.hits or 0
        try:
            num_hits = int(self.engine.pin_info(live.engine_pin_id).get("hits", 0))
        except Exception:  # the engine no longer knows the pin (e.g. restarted underneath)
            return pin.hits or 0
        pin.hits = (pin.hits or 0) + num_hits - live.num_hits_recorded
        live.num_hits_recorded = num_hits
        return pin.hits

    def unpin(self, pin: Pin, when: datetime | None = None) -> None:
        """Release a stored pin in the engine and mark it deleted (kept for history)."""
        self.record_hits(pin)
        live = self.book.remove(pin.id)
        if live is not None and self.engine is not None:
            self.engine.unpin(live.engine_pin_id)
        pin.deleted_at = when or rows.utc_now()

    def schedule_expiry(self, pin_id: int, delay_s: float) -> asyncio.Task:
        """Unpin `pin_id` after `delay_s` (a soft pin's end); the task lives in the app's task set."""

        async def expire() -> None:
            await asyncio.sleep(max(delay_s, 0.0))
            self.expire_now(pin_id)  # on the loop: PinBook is event-loop only

        task = asyncio.get_running_loop().create_task(expire(), name=f"pin-expiry-{pin_id}")
        self.background_tasks.add(task)
        task.add_done_callback(self.background_tasks.discard)
        return task

    def expire_now(self, pin_id: int) -> None:
        with session_scope(self.session_factory) as session:
            pin = session.get(Pin, pin_id)
            if pin is not None and pin.deleted_at is None:
                self.unpin(pin, pin.expires_at)
                log.info("pin %d expired after %ss; its prefix is ordinary LRU cache now", pin_id, pin.ttl_seconds)

    async def rewarm_all(self) -> int:
        """Start-up step, run beside serving: pin every stored live pin again (logging progress); returns
        how many were warmed.

        Pins whose TTL ran out while the server was down are marked deleted; a pin that fails to warm
        (template gone, prompt too long for a new model) is logged and left for a later start.
        """
        if self.engine is None:
            log.info("pins: no embedded engine, nothing to re-warm")
            return 0
        with session_scope(self.session_factory) as session:
            pins = rows.expire_overdue(session, rows.list_live_pins(session))
            if pins:
                log.info("pins: re-warming %d pins (%d tokens)", len(pins), sum(p.num_tokens for p in pins))
            num_warmed = 0
            for i, pin in enumerate(pins, 1):
                num_warmed += await self.rewarm_one(session, pin)
                log.info("pins: re-warmed %d/%d (pin %d, %d tokens)", i, len(pins), pin.id, pin.num_tokens)
        return num_warmed

    async def rewarm_one(self, session: Session, pin: Pin) -> int:
        """Pin one stored pin again; 1 on success, 0 (logged) on failure or when its render passes
        `rewarm_timeout_s` (the template sandbox's own deadline normally ends it sooner)."""
        tenant = session.get(Tenant, pin.tenant_id)
        try:
            spec = PinSpec.from_json(pin.spec_json or "{}")
            source = rows.tenant_template_source(session, tenant, spec.template)
            render = asyncio.to_thread(self.render_prefix, spec, source)
            _, token_ids = await asyncio.wait_for(render, self.rewarm_timeout_s)
            engine_pin_id = await self.pin_tokens(session, tenant, token_ids)
        except Exception as exc:
            log.warning("pins: could not re-warm pin %d of tenant %s: %s", pin.id, tenant.name if tenant else "?", exc)
            return 0
        if rows.token_hash(token_ids[: pin.num_tokens]) != pin.token_hash:
            log.warning("pins: pin %d renders differently now (template or tokenizer changed)", pin.id)
        live = self.book.add(pin.id, engine_pin_id)
        if pin.expires_at is not None:
            live.expiry = self.schedule_expiry(pin.id, (pin.expires_at - rows.utc_now()).total_seconds())
        return 1
