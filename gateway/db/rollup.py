"""Building blocks of the stats queries: the window's WHERE conditions, the SQL sums, the grouping
dimensions (including portable UTC hour/day buckets), and the Python roll-up of grouped sums into
coarser groups and rates."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import case, func, literal_column
from sqlalchemy.orm import Session

from gateway.db.hourly import NO_TENANT, SUMS as SUM_KEYS
from gateway.db.models import RequestLog as R
from gateway.db.models import RequestLogHourly as H

BUCKETS = ("hour", "day")


def window(tenant_id: int | None, since: datetime | None, until: datetime | None,
           tenant_column=R.tenant_id, time_column=R.created_at) -> list:
    """WHERE conditions of a tenant (None: all) and [since, until) over request-log rows, or over a
    roll-up's tenant and hour columns."""
    conditions = []
    if tenant_id is not None:
        conditions.append(tenant_column == tenant_id)
    if since is not None:
        conditions.append(time_column >= since)
    if until is not None:
        conditions.append(time_column < until)
    return conditions


def sum_columns() -> list:
    """Labelled aggregates, one per SUM_KEYS entry; additive, so groups roll up by addition."""
    has_shadow = R.shadow_cached_tokens.is_not(None)
    return [
        func.count().label("requests"),
        func.coalesce(func.sum(R.prompt_tokens), 0).label("prompt_tokens"),
        func.coalesce(func.sum(R.cached_tokens), 0).label("cached_tokens"),
        func.coalesce(func.sum(R.completion_tokens), 0).label("completion_tokens"),
        func.coalesce(func.sum(R.shadow_cached_tokens), 0).label("shadow_cached_tokens"),
        func.coalesce(func.sum(case((has_shadow, R.prompt_tokens), else_=0)), 0).label("shadow_prompt_tokens"),
        func.coalesce(func.sum(R.canonical_cached_tokens), 0).label("canonical_cached_tokens"),
        func.coalesce(func.sum(R.canonical_prompt_tokens), 0).label("canonical_prompt_tokens"),
        func.coalesce(func.sum(case((R.status != "ok", 1), else_=0)), 0).label("errors"),
        func.count(R.ttft_ms).label("ttft_requests"),
        func.coalesce(func.sum(R.host_cached_tokens), 0).label("host_cached_tokens"),
    ]


def dimension_columns(session: Session, dims: tuple[str, ...], bucket: str) -> list:
    """Labelled GROUP BY expressions for `dims`; error_code is NULL for successful requests."""
    expressions = {
        "tenant_id": lambda: R.tenant_id,
        "template": lambda: R.template,
        "miss_cause": lambda: R.miss_cause,
        "error_code": lambda: case((R.status != "ok", func.coalesce(R.error_code, "unknown")), else_=None),
        "bucket": lambda: bucket_expression(session, bucket),
    }
    unknown = set(dims) - set(expressions)
    if unknown:
        raise ValueError(f"unknown dimensions {sorted(unknown)}; choose from {sorted(expressions)}")
    return [expressions[dim]().label(dim) for dim in dims]


def hourly_sum_columns(table=H) -> list:
    """sum_columns() over an hourly roll-up (the fine one, or the tenant-hour one): the same
    labels, summed from its hours."""
    return [func.coalesce(func.sum(getattr(table, name)), 0).label(name) for name in SUM_KEYS]


def hourly_dimension_columns(session: Session, dims: tuple[str, ...], bucket: str, table=H) -> list:
    """dimension_columns() over a roll-up, its sentinels read back as NULL (the tenant-hour one
    has only tenant_id and bucket)."""
    expressions = {
        "tenant_id": lambda: func.nullif(table.tenant_id, NO_TENANT),
        "template": lambda: func.nullif(table.template, ""),
        "miss_cause": lambda: func.nullif(table.miss_cause, ""),
        "error_code": lambda: func.nullif(table.error_code, ""),
        "bucket": lambda: bucket_expression(session, bucket, table.hour),
    }
    unknown = set(dims) - set(expressions)
    if unknown:
        raise ValueError(f"unknown dimensions {sorted(unknown)}; choose from {sorted(expressions)}")
    return [expressions[dim]().label(dim) for dim in dims]


def bucket_expression(session: Session, bucket: str, column=None):
    """The UTC hour/day a row (or a roll-up hour) falls in: text prefix on SQLite, date_trunc on PostgreSQL."""
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be one of {BUCKETS}, got {bucket!r}")
    column = R.created_at if column is None else column
    name = session.get_bind().dialect.name
    if name == "sqlite":  # stored as 'YYYY-MM-DD HH:MM:SS.ffffff', naive UTC
        return func.substr(column, 1, 13 if bucket == "hour" else 10)
    if name == "postgresql":
        return func.date_trunc(bucket, column.op("AT TIME ZONE")(literal_column("'UTC'")))
    raise ValueError(f"time buckets are implemented for sqlite and postgresql, not {name}")


def bucket_start(value: str | datetime) -> datetime:
    """A bucket value as the aware UTC datetime the bucket starts at."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value + (":00" if len(value) == 13 else ""))
    return value.replace(tzinfo=timezone.utc)


def rollup(rows: list[dict], key_dims: tuple[str, ...]) -> dict[tuple, dict[str, int]]:
    """Add up SUM_KEYS of `rows` per distinct value of `key_dims` (() = one grand total, always present)."""
    grouped: dict[tuple, dict[str, int]] = {} if key_dims else {(): dict.fromkeys(SUM_KEYS, 0)}
    for row in rows:
        key = tuple(row[dim] for dim in key_dims)
        sums = grouped.setdefault(key, dict.fromkeys(SUM_KEYS, 0))
        for name in SUM_KEYS:
            sums[name] += int(row[name])
    return grouped


def finish(sums: dict[str, int]) -> dict:
    """Counts plus token-weighted rates (None when the denominator is 0)."""
    out = {name: sums[name] for name in SUM_KEYS if name not in ("shadow_prompt_tokens", "ttft_requests")}
    out["hit_rate"] = ratio(sums["cached_tokens"], sums["prompt_tokens"])  # device and host tier hits
    out["host_hit_rate"] = ratio(sums["host_cached_tokens"], sums["prompt_tokens"])
    out["raw_hit_rate"] = ratio(sums["shadow_cached_tokens"], sums["shadow_prompt_tokens"])
    out["canonical_hit_rate"] = ratio(sums["canonical_cached_tokens"], sums["canonical_prompt_tokens"])
    out["attainable_hit_rate"] = out["canonical_hit_rate"]  # the same figure, by definition
    out["lost_tokens"] = sums["prompt_tokens"] - sums["cached_tokens"]
    return out


def ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None
