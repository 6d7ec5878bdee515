"""Stats over the request log, shared by the stats API and the dashboard.

Contract: every function takes a Session and never commits; `since` is inclusive, `until`
exclusive, both timezone-aware (None = unbounded); `tenant_id=None` means all tenants.
Rates are token-weighted, computed from stored counts: hit_rate = sum(cached) / sum(prompt) (device and host tier hits); host_hit_rate = sum(host_cached) / sum(prompt);
raw_hit_rate = sum(shadow_cached) / sum(prompt) over rows that carry a shadow figure;
canonical_hit_rate (= attainable_hit_rate) = sum(canonical_cached) / sum(canonical_prompt), the
canonical order on an unbounded cache of the domain's traffic (gateway/insight/counterfactual.py),
over rows that carry that figure; a rate is None when its denominator is 0. lost_tokens = prompt - cached.

Sums read an hourly roll-up (gateway/db/hourly.py and tenant_hourly.py, kept by triggers) for the window's whole
UTC hours and request-log rows only for a partial first and last hour, so their cost grows with
the hours in the window, not the requests. Index use: the row reads use only the covering stats
indexes (see models.RequestLog), and `tenant_stats` makes two scans in all — one GROUP BY over (bucket, template, miss cause,
error code) rolled up in Python into every view, and small ones for TTFT percentiles
(gateway/db/ttft_percentiles.py).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from gateway.db.hourly import split_window
from gateway.db.models import RequestLogHourly as H, RequestLogTenantHourly as TH, Tenant
from gateway.db.rollup import (
    BUCKETS,
    SUM_KEYS,
    bucket_start,
    dimension_columns,
    finish,
    hourly_dimension_columns,
    hourly_sum_columns,
    rollup,
    sum_columns,
    window,
)
from gateway.db.ttft_percentiles import empty_percentiles, ttft_percentiles, ttft_percentiles_by_tenant

TENANT_HOUR_DIMS = {"tenant_id", "bucket"}  # what the tenant-hour roll-up can group by


def aggregate(
    session: Session,
    tenant_id: int | None,
    since: datetime | None,
    until: datetime | None,
    dims: tuple[str, ...] = (),
    bucket: str = "hour",
) -> list[dict]:
    """Raw sums (SUM_KEYS) grouped by `dims` (tenant_id, template, miss_cause, error_code, bucket).

    The whole UTC hours of the window come from an hourly roll-up: the tenant-hour one
    (gateway/db/tenant_hourly.py) when `dims` need nothing finer than tenant and bucket, else the
    fine one (gateway/db/hourly.py); only a partial first and last hour are summed from
    request-log rows. The result may hold several rows per group (one per source): callers add
    them up with rollup()."""
    hours, edges = split_window(since, until)
    rows = [] if hours is None else hourly_aggregate(session, tenant_id, *hours, dims, bucket)
    for start, end in edges:
        rows += raw_aggregate(session, tenant_id, start, end, dims, bucket)
    return rows


def raw_aggregate(session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None,
                  dims: tuple[str, ...] = (), bucket: str = "hour") -> list[dict]:
    """aggregate() read from request-log rows alone (the reference the roll-up must equal)."""
    columns = dimension_columns(session, dims, bucket)
    query = select(*columns, *sum_columns()).where(*window(tenant_id, since, until))
    return grouped_rows(session, query, columns, dims)


def hourly_aggregate(session: Session, tenant_id: int | None, first: datetime | None, last: datetime | None,
                     dims: tuple[str, ...], bucket: str) -> list[dict]:
    """aggregate() over a roll-up's hours in [first, last): the coarsest one that has `dims`."""
    table = TH if set(dims) <= TENANT_HOUR_DIMS else H
    columns = hourly_dimension_columns(session, dims, bucket, table)
    conditions = window(tenant_id, first, last, table.tenant_id, table.hour)
    return grouped_rows(session, select(*columns, *hourly_sum_columns(table)).where(*conditions), columns, dims)


def grouped_rows(session: Session, query, columns: list, dims: tuple[str, ...]) -> list[dict]:
    if columns:
        query = query.group_by(*columns)
    rows = [dict(row._mapping) for row in session.execute(query)]
    if "bucket" in dims:
        for row in rows:
            row["bucket"] = bucket_start(row["bucket"])
    return rows


def totals(session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None) -> dict:
    """requests, prompt/cached/completion/shadow tokens, errors, hit_rate, raw_hit_rate."""
    return finish(rollup(aggregate(session, tenant_id, since, until), ())[()])


def by_template(session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None) -> list[dict]:
    """Totals per template name (None = no template), busiest first."""
    return template_rows(aggregate(session, tenant_id, since, until, ("template",)))


def hit_rate_series(
    session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None, bucket: str = "hour"
) -> list[dict]:
    """One row per non-empty UTC hour/day, in time order: bucket_start (aware datetime) + totals."""
    return series_rows(aggregate(session, tenant_id, since, until, ("bucket",), bucket))


def lost_tokens_by_cause(
    session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None
) -> list[dict]:
    """Per miss cause (attributed misses only): requests, lost_tokens, share of attributed lost tokens."""
    return cause_rows(aggregate(session, tenant_id, since, until, ("miss_cause",)))


def errors_by_code(session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None) -> dict:
    """{error code: requests} over failed requests ("unknown" where no code was logged)."""
    return error_counts(aggregate(session, tenant_id, since, until, ("error_code",)))


def template_rows(rows: list[dict]) -> list[dict]:
    out = [{"template": key[0], **finish(sums)} for key, sums in rollup(rows, ("template",)).items()]
    return sorted(out, key=lambda row: (-row["requests"], row["template"] or ""))


def series_rows(rows: list[dict]) -> list[dict]:
    grouped = rollup(rows, ("bucket",))
    return [{"bucket_start": key[0], **finish(grouped[key])} for key in sorted(grouped)]


def cause_rows(rows: list[dict]) -> list[dict]:
    grouped = rollup([row for row in rows if row["miss_cause"] is not None], ("miss_cause",))
    out = [
        {"cause": key[0], "requests": sums["requests"], "lost_tokens": sums["prompt_tokens"] - sums["cached_tokens"]}
        for key, sums in grouped.items()
    ]
    total = sum(row["lost_tokens"] for row in out)
    for row in out:
        row["share"] = row["lost_tokens"] / total if total else None
    return sorted(out, key=lambda row: (-row["lost_tokens"], row["cause"]))


def error_counts(rows: list[dict]) -> dict:
    grouped = rollup([row for row in rows if row["error_code"] is not None], ("error_code",))
    return {key[0]: sums["requests"] for key, sums in sorted(grouped.items())}


def tenant_stats(
    session: Session, tenant_id: int, since: datetime | None, until: datetime | None, bucket: str = "hour"
) -> dict:
    """Everything GET /v1/stats returns for one tenant over [since, until) (JSON-ready but datetimes)."""
    rows = aggregate(session, tenant_id, since, until, ("bucket", "template", "miss_cause", "error_code"), bucket)
    return {
        "tenant_id": tenant_id,
        "since": since,
        "until": until,
        "bucket": bucket,
        **finish(rollup(rows, ())[()]),
        **ttft_percentiles(session, tenant_id, since, until),
        "errors_by_code": error_counts(rows),
        "by_template": template_rows(rows),
        "series": series_rows(rows),
        "lost_tokens_by_cause": cause_rows(rows),
    }


def all_tenant_stats(session: Session, since: datetime | None, until: datetime | None) -> list[dict]:
    """Per tenant with traffic in the window (GET /admin/stats): tenant name, totals, TTFT p50/p95."""
    grouped = rollup(aggregate(session, None, since, until, ("tenant_id",)), ("tenant_id",))
    counts = {key[0]: sums["ttft_requests"] for key, sums in grouped.items()}
    tenant_ids = [key[0] for key in grouped if key[0] is not None]
    names = {tid: name for tid, name in session.execute(select(Tenant.id, Tenant.name).where(Tenant.id.in_(tenant_ids)))}
    percentiles = ttft_percentiles_by_tenant(session, since, until, counts)
    empty = empty_percentiles()
    out = [
        {"tenant_id": key[0], "tenant": names.get(key[0]), **finish(sums), **percentiles.get(key[0], empty)}
        for key, sums in grouped.items()
    ]
    return sorted(out, key=lambda row: (row["tenant"] or "", row["tenant_id"] or 0))


__all__ = [
    "BUCKETS",
    "SUM_KEYS",
    "aggregate",
    "all_tenant_stats",
    "raw_aggregate",
    "by_template",
    "errors_by_code",
    "hit_rate_series",
    "lost_tokens_by_cause",
    "tenant_stats",
    "totals",
    "window",
]
