"""GET /v1/stats (the caller's tenant) and GET /admin/stats (all tenants), from gateway.db.stats_queries.

/admin/stats also carries `engine` (the embedded engine's live stats, None without one: pool pages
free, cache tokens cached / evictable / pinned, requests running and waiting) and `process`
(this gateway process's resident memory and request-log writer counters), for operators and
`radixgate bench load`'s leak checks.

Windows default to the last 24 hours. Hit rates are token-weighted:
sum(cached_tokens) / sum(prompt_tokens) over the window.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Literal

from fastapi import APIRouter, Query

from gateway.db import stats_queries
from gateway.deps import AdminDep, SessionDep, StateDep, TenantDep
from gateway.errors import bad_request

router = APIRouter(tags=["stats"])

DEFAULT_WINDOW = timedelta(hours=24)


def window(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """Aware UTC (since, until); 400 if since is not before until."""
    until = as_utc(until) if until else datetime.now(timezone.utc)
    since = as_utc(since) if since else until - DEFAULT_WINDOW
    if since >= until:
        raise bad_request("`since` must be before `until`.", "since")
    return since, until


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


@router.get("/v1/stats")
def tenant_stats(
    tenant: TenantDep,
    session: SessionDep,
    since: datetime | None = Query(None, description="ISO 8601 or unix seconds; default: 24 h before `until`."),
    until: datetime | None = Query(None, description="ISO 8601 or unix seconds; default: now."),
    bucket: Literal["hour", "day"] = "hour",
) -> dict:
    """The caller's requests, tokens, hit rates (actual and raw order), TTFT percentiles, errors, per template."""
    since, until = window(since, until)
    stats = stats_queries.tenant_stats(session, tenant.id, since, until, bucket)
    return {"object": "stats", "tenant": tenant.name, "since": since, "until": until, "bucket": bucket, **stats}


@router.get("/admin/stats")
def admin_stats(
    _: AdminDep,
    session: SessionDep,
    gw: StateDep,
    since: datetime | None = Query(None),
    until: datetime | None = Query(None),
) -> dict:
    """Per-tenant stats for every tenant, and the engine's and this process's live figures."""
    since, until = window(since, until)
    data = stats_queries.all_tenant_stats(session, since, until)
    engine = gw.engine.stats() if gw.engine is not None else None
    return {"object": "list", "since": since, "until": until, "data": data, "engine": engine, "process": process_stats(gw)}


def process_stats(gw) -> dict:
    writer = gw.log_writer
    return {
        "rss_bytes": resident_bytes(),
        "log_queue_depth": writer.queue_depth if writer else None,
        "log_rows_written": writer.num_written if writer else None,
        "log_rows_dropped": writer.num_dropped if writer else None,
    }


def resident_bytes() -> int | None:
    """This process's resident set size (Linux /proc; None elsewhere)."""
    import os

    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
