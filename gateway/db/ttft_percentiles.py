"""TTFT percentiles (p50, p95) over a window of the request log, exact on both backends.

Contract: every function takes a Session and never commits; the figures are percentile_cont's
(linear interpolation between the two nearest ranks), None where the window has no TTFT.
PostgreSQL computes them with percentile_cont; SQLite sorts a small window's TTFTs here, or for
a large one fetches only the two ranks around each percentile through the
(tenant_id, ttft_ms, created_at) index — the same exact figure either way.
"""

from __future__ import annotations

import math
from datetime import datetime

from sqlalchemy import Float, bindparam, func, select, text
from sqlalchemy.orm import Session

from gateway.db.models import RequestLog as R
from gateway.db.models import UtcDateTime
from gateway.db.percentile import percentile_cont
from gateway.db.rollup import window

PERCENTILES = {"ttft_p50_ms": 0.5, "ttft_p95_ms": 0.95}
FETCH_MAX_VALUES = 50_000


def ttft_percentiles(session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None) -> dict:
    """{"ttft_p50_ms", "ttft_p95_ms"} over requests with a TTFT (None when there are none), exact
    (percentile_cont: linear interpolation between the two nearest ranks) on both backends."""
    if session.get_bind().dialect.name == "postgresql":
        return postgres_percentiles(session, tenant_id, since, until, per_tenant=False).get(None, empty_percentiles())
    conditions = [*window(tenant_id, since, until), R.ttft_ms.is_not(None)]
    num_values = session.scalar(select(func.count()).where(*conditions))
    return ranked_percentiles(session, tenant_id, since, until, num_values)


def ttft_percentiles_by_tenant(
    session: Session, since: datetime | None, until: datetime | None, counts: dict[int, int] | None = None
) -> dict[int, dict]:
    """Percentiles per tenant; `counts` (tenant -> rows with a TTFT in the window) saves a scan."""
    if session.get_bind().dialect.name == "postgresql":
        return postgres_percentiles(session, None, since, until, per_tenant=True)
    if counts is None:
        query = select(R.tenant_id, func.count(R.ttft_ms)).where(*window(None, since, until)).group_by(R.tenant_id)
        counts = {tenant_id: count for tenant_id, count in session.execute(query)}
    return {
        tenant_id: ranked_percentiles(session, tenant_id, since, until, count)
        for tenant_id, count in counts.items()
        if count and tenant_id is not None
    }


def ranked_percentiles(
    session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None, num_values: int
) -> dict:
    """SQLite. A small window (<= FETCH_MAX_VALUES) fetches its TTFT column through the time index
    and sorts it here; a large one fetches just the two ranks around each percentile (ORDER BY
    ttft_ms LIMIT 2 OFFSET k, from whichever end is nearer: p95 walks the top 5%), walking the
    (tenant_id, ttft_ms, created_at) index in TTFT order instead of sorting the window — that walk
    costs the tenant's history up to the rank, hence the split (an unbounded window always walks:
    its history is the window)."""
    out = empty_percentiles()
    if not num_values:
        return out
    is_whole_history = since is None and until is None  # the walk reads the window, nothing else
    if tenant_id is None or (num_values <= FETCH_MAX_VALUES and not is_whole_history):
        conditions = [*window(tenant_id, since, until), R.ttft_ms.is_not(None)]
        values = sorted(session.scalars(select(R.ttft_ms).where(*conditions)))
        return {key: percentile_cont(values, fraction) for key, fraction in PERCENTILES.items()}
    for key, fraction in PERCENTILES.items():
        position = fraction * (num_values - 1)
        lower = math.floor(position)
        upper = min(lower + 1, num_values - 1)
        if lower <= num_values - 1 - upper:  # walk from the nearer end: rank k ascending is n-1-k descending
            values = list(session.scalars(rank_query(tenant_id, since, until), {"offset": lower}))
            low_value, high_value = values[0], values[-1]
        else:
            values = list(session.scalars(rank_query(tenant_id, since, until, descending=True),
                                          {"offset": num_values - 1 - upper}))
            high_value, low_value = values[0], values[-1]
        out[key] = low_value + (high_value - low_value) * (position - lower)
    return out


def rank_query(tenant_id: int, since: datetime | None, until: datetime | None, *, descending: bool = False):
    """The two ranks from :offset in TTFT order (descending: from the largest), walking the
    (tenant_id, ttft_ms, created_at) index, so a high percentile walks only the top of it.
    Textual SQL only because SQLAlchemy cannot render SQLite's INDEXED BY (the planner, left
    alone, sorts the whole window instead of walking the index)."""
    clauses, params = ["ttft_ms IS NOT NULL", "tenant_id = :tenant_id"], [bindparam("tenant_id", tenant_id)]
    if since is not None:
        clauses.append("created_at >= :since")
        params.append(bindparam("since", since, type_=UtcDateTime()))
    if until is not None:
        clauses.append("created_at < :until")
        params.append(bindparam("until", until, type_=UtcDateTime()))
    sql = (
        "SELECT ttft_ms FROM request_log INDEXED BY ix_request_log_tenant_ttft "
        f"WHERE {' AND '.join(clauses)} ORDER BY ttft_ms{' DESC' if descending else ''} LIMIT 2 OFFSET :offset"
    )
    return text(sql).bindparams(*params).columns(ttft_ms=Float())


def postgres_percentiles(
    session: Session, tenant_id: int | None, since: datetime | None, until: datetime | None, *, per_tenant: bool
) -> dict[int | None, dict]:
    group = [R.tenant_id] if per_tenant else []
    columns = [func.percentile_cont(p).within_group(R.ttft_ms).label(k) for k, p in PERCENTILES.items()]
    query = select(*group, *columns).where(*window(tenant_id, since, until), R.ttft_ms.is_not(None))
    return {
        (row.tenant_id if per_tenant else None): {k: row._mapping[k] for k in PERCENTILES}
        for row in session.execute(query.group_by(*group))
        if row._mapping["ttft_p50_ms"] is not None
    }


def empty_percentiles() -> dict:
    return dict.fromkeys(PERCENTILES)
