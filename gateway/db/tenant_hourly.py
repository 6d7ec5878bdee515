"""The request log's coarse hourly roll-up: the stats sums (hourly.SUMS) per tenant and UTC hour
only, plus the two sums of the prefill cost model (insight_queries.prefill_ms_per_token), kept by
the database like the fine roll-up (gateway/db/hourly.py: same sentinels, hour and trigger).

Why a second one: the fine roll-up keys on template, miss cause and error code as well, so a busy
log still holds tens of groups per tenant-hour there; the overview (per-tenant totals, the series
by tenant, the cost model) needs none of those dimensions and reads this one, ~one row per
tenant-hour. stats_queries.aggregate picks it whenever the dimensions asked for are only the
tenant and the time bucket.
"""

from __future__ import annotations

from gateway.db.hourly import KEYS as FINE_KEYS, SUMS as STATS_SUMS
from gateway.db.hourly import backfill_statement, row_values as stats_row_values, trigger_sql, upsert_statement

TABLE = "request_log_tenant_hourly"
KEYS = ("tenant_id", "hour")
PREFILL_SUMS = ("prefill_ttft_ms", "prefill_tokens")
SUMS = STATS_SUMS + PREFILL_SUMS


def row_values(row: str, dialect: str) -> list[str]:
    """One row's key and sums: the fine roll-up's own expressions without its three extra keys,
    then TTFT and uncached tokens of a completed request that prefilled something (what the cost
    model sums; cached_tokens unknown (NULL) counts as nothing prefilled, as in its row query)."""
    stats = stats_row_values(row, dialect)
    uncached = f"({row}.prompt_tokens - {row}.cached_tokens)"
    counts = f"{row}.status = 'ok' AND {row}.ttft_ms IS NOT NULL AND {uncached} > 0"
    return [*stats[:len(KEYS)], *stats[len(FINE_KEYS):],
            f"CASE WHEN {counts} THEN {row}.ttft_ms ELSE 0 END", f"CASE WHEN {counts} THEN {uncached} ELSE 0 END"]


def create_trigger_sql(dialect: str) -> list[str]:
    return trigger_sql(dialect, TABLE, upsert_statement(TABLE, KEYS, SUMS, row_values("NEW", dialect)))


def backfill_sql(dialect: str) -> str:
    """Roll up every row already in request_log (the roll-up table must be empty)."""
    return backfill_statement(TABLE, KEYS, SUMS, row_values("request_log", dialect))
