"""A seeded request log whose cache-breaking causes are known, for the doctor and dashboard tests.

Importable from any test module: tests/ is on sys.path because tests/conftest.py
lives there (pytest's default `prepend` import mode).

Tenants (all traffic in the 6 hours before `now`). Each row carries the counterfactuals the
gateway measures (canonical order on an unbounded cache, the static and system prefix lengths),
by default: the canonical order gets what the request got, static = system prefix = 0.
- acme     agent traffic, canonicalized; clients put a date in the system prompt (shadow low);
           first request cold, every later one hits its 800-token static prefix of 1000; one error row.
- globex   raw order (canonicalization off) with an ISO date in the system prompt: repeats of
           the same canonical prefix mostly hit only the 64 tokens before the date, where the
           canonical order (date hoisted) hits the 960-token static prefix -> dynamic_content.
- initech  canonicalized, one 512-token prefix that keeps getting evicted (hits 1 in 5; the
           unbounded canonical shadow hits every repeat) -> eviction.
- umbrella same system + tools as acme (no cache group; an 800-token system prefix), three
           100-token contexts each sent twice -> isolation (800 tokens) ahead of cold_start (300).
- hooli    ten static prefixes of 600 tokens, each sent twice -> cold_start.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from sqlalchemy.orm import Session

from gateway.db.models import Base, EngineStatSnapshot, Pin, RequestLog, Tenant
from gateway.db.session import make_engine, make_session_factory, session_scope

EXPECTED_TOP_CAUSE = {
    "globex": "dynamic_content",
    "initech": "eviction",
    "umbrella": "isolation",
    "hooli": "cold_start",
    "acme": "cold_start",
}


def log(tenant: Tenant, at: datetime, prompt: int, cached: int, **columns) -> RequestLog:
    defaults = dict(
        template="agent", model="smollm2-135m", backend="embedded", sections_found="system,tools,question",
        canonicalized=True, was_canonical=True, completion_tokens=16, status="ok",
        ttft_ms=40.0 if cached else 200.0, latency_ms=400.0, shadow_cached_tokens=cached,
    )
    counterfactual = dict(canonical_cached_tokens=cached, canonical_prompt_tokens=prompt,
                          static_prefix_tokens=0, system_prefix_tokens=0)
    return RequestLog(
        id=uuid.uuid4(), created_at=at, tenant_id=tenant.id, prompt_tokens=prompt, cached_tokens=cached,
        **{**defaults, **counterfactual, **columns},
    )


def seed_acme(tenant: Tenant, start: datetime) -> list[RequestLog]:
    rows = []
    for i in range(40):
        cached = 0 if i == 0 else 800
        rows.append(log(
            tenant, start + timedelta(minutes=5 * i), 1000, cached, system_hash="sysA", tools_hash="toolsA",
            shadow_cached_tokens=min(cached, 96), was_canonical=False, dynamic_hoisted=True,
            dynamic_patterns="date_iso", template="agent" if i % 4 else "rag",
            static_prefix_tokens=800, system_prefix_tokens=800,
        ))
    rows.append(log(tenant, start + timedelta(minutes=7), 0, 0, status="error", error_code="prompt_too_long",
                    ttft_ms=None, shadow_cached_tokens=None))
    return rows


def seed_globex(tenant: Tenant, start: datetime) -> list[RequestLog]:
    rows = []
    for i in range(30):
        cached = 0 if i == 0 else (960 if i % 10 == 1 else 64)
        rows.append(log(
            tenant, start + timedelta(minutes=6 * i), 1200, cached, template="chat", system_hash="sysG",
            tools_hash=None, sections_found="system,question", canonicalized=False, was_canonical=False,
            dynamic_patterns="date_iso", dynamic_hoisted=True,
            canonical_cached_tokens=0 if i == 0 else 960, static_prefix_tokens=960, system_prefix_tokens=960,
        ))
    return rows


def seed_initech(tenant: Tenant, start: datetime) -> list[RequestLog]:
    return [
        log(tenant, start + timedelta(minutes=10 * i), 800, 512 if i % 5 == 1 else 0,
            system_hash="sysI", tools_hash="toolsI", template="rag",
            canonical_cached_tokens=0 if i == 0 else 512, static_prefix_tokens=512, system_prefix_tokens=512)
        for i in range(30)
    ]


def seed_umbrella(tenant: Tenant, start: datetime) -> list[RequestLog]:
    rows = []
    for i, context in enumerate(["c1", "c2", "c3"] * 2):
        cached = 0 if i == 0 else (800 if i < 3 else 900)
        rows.append(log(tenant, start + timedelta(hours=1, minutes=3 * i), 1000, cached, system_hash="sysA",
                        tools_hash="toolsA", context_hash=context, sections_found="system,tools,context,question",
                        static_prefix_tokens=900, system_prefix_tokens=800))
    return rows


def seed_hooli(tenant: Tenant, start: datetime) -> list[RequestLog]:
    rows = []
    for i in range(20):
        key = i % 10
        rows.append(log(tenant, start + timedelta(minutes=4 * i), 900, 0 if i < 10 else 600,
                        system_hash=f"sysH{key}", tools_hash="toolsH", static_prefix_tokens=600,
                        system_prefix_tokens=600))
    return rows


def seed_engine(start: datetime) -> list[EngineStatSnapshot]:
    return [
        EngineStatSnapshot(created_at=start + timedelta(minutes=30 * i), backend="embedded",
                           cached_tokens=4000 + 500 * i, pinned_tokens=800, evictable_tokens=3000 + 400 * i,
                           num_evictions=3 * i)
        for i in range(12)
    ]


def seed(session: Session, now: datetime) -> dict[str, Tenant]:
    """Insert the tenants, logs, a pin and engine snapshots; returns tenants by name (flushed, ids set)."""
    start = now - timedelta(hours=6)
    tenants = {name: Tenant(name=name, pin_quota_tokens=4096) for name in EXPECTED_TOP_CAUSE}
    session.add_all(tenants.values())
    session.flush()
    seeders = {"acme": seed_acme, "globex": seed_globex, "initech": seed_initech,
               "umbrella": seed_umbrella, "hooli": seed_hooli}
    for name, seeder in seeders.items():
        session.add_all(seeder(tenants[name], start))
    session.add(Pin(tenant_id=tenants["acme"].id, namespace="acme", template="agent", num_tokens=800,
                    token_hash="pinhashA", hits=39, created_at=start))
    session.add_all(seed_engine(start))
    session.flush()
    return tenants


def create_seeded_db(url: str, now: datetime | None = None, *, is_empty: bool = False) -> None:
    """Create the schema at `url` and (unless is_empty) seed it."""
    engine = make_engine(url)
    try:
        Base.metadata.create_all(engine)
        if not is_empty:
            with session_scope(make_session_factory(engine)) as session:
                seed(session, now or datetime.now(timezone.utc))
    finally:
        engine.dispose()


SEED_ADMIN_KEY = "sk-admin-dashboard-seed"


def issue_seed_keys(url: str) -> dict[str, str]:
    """Plaintext keys for the seeded database: "admin" (a stored admin key) and one per tenant name,
    issued with the gateway's own key functions (stored hashed)."""
    from sqlalchemy import select

    from gateway.tenants import admin_keys
    from gateway.tenants import service as tenant_keys

    engine = make_engine(url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            admin_keys.add_admin_key(session, SEED_ADMIN_KEY, "config")
            keys = {"admin": SEED_ADMIN_KEY}
            for tenant in session.scalars(select(Tenant)):
                keys[tenant.name] = tenant_keys.issue_key(session, tenant).key
    finally:
        engine.dispose()
    return keys
