"""Read-only queries the dashboard and the cache doctor need beyond `gateway.db.stats_queries`.

Every function takes a session, binds its parameters, and never commits.
Windows are half-open: since <= created_at < until (either bound may be None).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from gateway.db.hourly import split_window
from gateway.db.models import EngineStatSnapshot, Pin, RequestLog, RequestLogTenantHourly as TH, Tenant
from gateway.db.rollup import finish, rollup
from gateway.db.rollup import window
from gateway.db.stats_queries import aggregate

SERIES_GROUPS = {"tenant": "tenant_id", "template": "template"}
"""Series group name -> the stats dimension it groups by (gateway.db.rollup.dimension_columns)."""

@dataclass(frozen=True)
class SystemSighting:
    """Another tenant that sent a system prefix (system + tools), and when it first did."""

    tenant_id: int
    tenant_name: str
    cache_group: str | None
    first_seen: datetime


def window_filter(column, since: datetime | None, until: datetime | None) -> list:
    clauses = []
    if since is not None:
        clauses.append(column >= since)
    if until is not None:
        clauses.append(column < until)
    return clauses


def list_tenants(session: Session) -> list[Tenant]:
    """Every tenant, by name."""
    return list(session.scalars(select(Tenant).order_by(Tenant.name)))


def find_tenant(session: Session, name: str) -> Tenant | None:
    return session.scalars(select(Tenant).where(Tenant.name == name)).first()


def find_system_sightings(
    session: Session, tenant_id: int, system_keys: set[tuple], until: datetime | None = None
) -> dict[tuple, list[SystemSighting]]:
    """Other tenants that sent any of `system_keys` (system_hash, tools_hash) before `until`, in
    canonical order (raw-order requests never put the canonical prefix into the cache to share)."""
    if not system_keys:
        return {}
    keys = sorted(system_keys, key=str)
    matches = [
        and_(RequestLog.system_hash == system, RequestLog.tools_hash.is_(None) if tools is None else RequestLog.tools_hash == tools)
        for system, tools in keys
    ]
    query = (
        select(
            RequestLog.system_hash,
            RequestLog.tools_hash,
            Tenant.id,
            Tenant.name,
            Tenant.cache_group,
            func.min(RequestLog.created_at).label("first_seen"),
        )
        .join(Tenant, Tenant.id == RequestLog.tenant_id)
        .where(
            RequestLog.tenant_id != tenant_id,
            RequestLog.canonicalized.is_(True),
            or_(*matches),
            *window_filter(RequestLog.created_at, None, until),
        )
        .group_by(RequestLog.system_hash, RequestLog.tools_hash, Tenant.id, Tenant.name, Tenant.cache_group)
    )
    sightings: dict[tuple, list[SystemSighting]] = {}
    for system, tools, other_id, name, group, first_seen in session.execute(query):
        sightings.setdefault((system, tools), []).append(SystemSighting(other_id, name, group, first_seen))
    return sightings


def list_pins(session: Session, tenant_id: int | None = None, *, is_active_only: bool = False) -> list[Pin]:
    """Pins (newest first), of one tenant or all; active = not deleted and not expired."""
    query = select(Pin).order_by(Pin.created_at.desc())
    if tenant_id is not None:
        query = query.where(Pin.tenant_id == tenant_id)
    if is_active_only:
        query = query.where(Pin.deleted_at.is_(None))
    pins = list(session.scalars(query))
    if is_active_only:
        now = datetime.now(tz=pins[0].created_at.tzinfo) if pins else None
        pins = [pin for pin in pins if pin.expires_at is None or pin.expires_at > now]
    return pins


def list_engine_snapshots(
    session: Session, since: datetime | None = None, until: datetime | None = None
) -> list[EngineStatSnapshot]:
    """Engine cache snapshots in time order."""
    query = (
        select(EngineStatSnapshot)
        .where(*window_filter(EngineStatSnapshot.created_at, since, until))
        .order_by(EngineStatSnapshot.created_at)
    )
    return list(session.scalars(query))


def hit_rate_series_by(
    session: Session,
    group: str,
    tenant_id: int | None,
    since: datetime | None,
    until: datetime | None,
    bucket: str = "hour",
) -> list[dict]:
    """Like queries.hit_rate_series, one row per (bucket, group value), time order; group in SERIES_GROUPS."""
    if group not in SERIES_GROUPS:
        raise ValueError(f"group must be one of {sorted(SERIES_GROUPS)}, got {group!r}")
    dims = ("bucket", SERIES_GROUPS[group])
    grouped = rollup(aggregate(session, tenant_id, since, until, dims, bucket), dims)
    return [
        {"bucket_start": key[0], group: key[1], **finish(grouped[key])}
        for key in sorted(grouped, key=lambda key: (key[0], str(key[1])))
    ]


def prefill_ms_per_token(
    session: Session, since: datetime | None, until: datetime | None, tenant_id: int | None = None
) -> float:
    """The cost model 'prefill time ~ uncached tokens' fitted to the window: total TTFT over total
    uncached prompt tokens of completed requests that prefilled something (0.0 when none did).
    With `tenant_id`, fitted to that tenant's requests only (its own view shows no one else's numbers).
    Whole hours come from the tenant-hour roll-up's two sums, partial edge hours from rows."""
    hours, edges = split_window(since, until)
    total_ms = total_tokens = 0.0
    if hours is not None:
        query = select(func.sum(TH.prefill_ttft_ms), func.sum(TH.prefill_tokens)).where(
            *window(tenant_id, *hours, TH.tenant_id, TH.hour))
        ms, tokens = session.execute(query).one()
        total_ms, total_tokens = float(ms or 0), float(tokens or 0)
    for start, end in edges:
        ms, tokens = raw_prefill_sums(session, start, end, tenant_id)
        total_ms, total_tokens = total_ms + ms, total_tokens + tokens
    return total_ms / total_tokens if total_tokens else 0.0


def raw_prefill_sums(session: Session, since: datetime | None, until: datetime | None,
                     tenant_id: int | None = None) -> tuple[float, float]:
    """(sum of TTFT ms, sum of uncached tokens) of the cost model's requests, from rows alone
    (the reference the roll-up must equal)."""
    R = RequestLog
    uncached = R.prompt_tokens - R.cached_tokens
    query = select(func.sum(R.ttft_ms), func.sum(uncached)).where(
        *window(tenant_id, since, until), R.status == "ok", R.ttft_ms.is_not(None), uncached > 0
    )
    total_ms, total_tokens = session.execute(query).one()
    return float(total_ms or 0), float(total_tokens or 0)
