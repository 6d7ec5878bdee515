"""GET /v1/stats (the caller's tenant) and GET /admin/stats (all tenants), from gateway.db.stats_queries.

Windows default to the last 24 hours. Hit rates are token-weighted:
sum(cached_tokens) / sum(prompt_tokens) over the window.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Literal

from fastapi import APIRouter, Query

from gateway.db import stats_queries
from gateway.deps import AdminDep, SessionDep, TenantDep
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
    since: datetime | None = Query(None),
    until: datetime | None = Query(None),
) -> dict:
    """Per-tenant stats for every tenant."""
    since, until = window(since, until)
    return {"object": "list", "since": since, "until": until, "data": stats_queries.all_tenant_stats(session, since, until)}
