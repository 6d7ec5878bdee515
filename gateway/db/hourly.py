"""The hourly roll-up of the request log: the stats sums (rollup.SUM_KEYS) per tenant, UTC hour,
template, miss cause and error code, kept by the database itself.

A row-level AFTER INSERT trigger on `request_log` adds every inserted row to its group (an
upsert), so every writer — the log writer, the spool replay, the `bench stats` seeder, a test's
session.add — keeps the roll-up exact, in the same transaction as the row: a row is counted once
if and only if it was inserted (a duplicate id skipped by ON CONFLICT DO NOTHING fires nothing).
`request_log` rows are never updated or deleted, so inserts are all the trigger needs.

Key columns hold a sentinel instead of NULL (a unique key treats NULLs as distinct, so an upsert
could not find their group): tenant_id -1, template / miss_cause / error_code '' (error_code ''
for a successful request, else its code or 'unknown', as rollup.dimension_columns names it).
`hour` is the UTC hour the row's created_at falls in, stored like created_at (SQLite: naive text
'YYYY-MM-DD HH:00:00.000000', so text order is time order; PostgreSQL: timestamptz).

The DDL is created with the table (`create_all`, for tests and throwaway databases) and by
migration 0012, which also back-fills the roll-up from the rows already logged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from sqlalchemy import DDL, Table, event

KEYS = ("tenant_id", "hour", "template", "miss_cause", "error_code")
SUMS = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens", "shadow_cached_tokens",
        "shadow_prompt_tokens", "canonical_cached_tokens", "canonical_prompt_tokens", "errors", "ttft_requests",
        "host_cached_tokens")  # rollup.SUM_KEYS: additive, so hours add up to any coarser group
TABLE = "request_log_hourly"
NO_TENANT = -1


def split_window(since: datetime | None, until: datetime | None
                 ) -> tuple[tuple[datetime | None, datetime | None] | None, list[tuple[datetime, datetime]]]:
    """[since, until) as (the whole hours a roll-up serves, or None; the partial hours rows must serve)."""
    first, last = whole_hours(since, until)
    if first is not None and last is not None and first >= last:  # no whole hour inside
        return None, [(since, until)]
    edges = []
    if since is not None and since < first:
        edges.append((since, first))
    if until is not None and last < until:
        edges.append((last, until))
    return (first, last), edges


def whole_hours(since: datetime | None, until: datetime | None) -> tuple[datetime | None, datetime | None]:
    """[first, last): the whole UTC hours inside [since, until) (None stays unbounded); what a
    query reads from a roll-up, the rest of the window coming from request-log rows."""
    def floor(moment: datetime) -> datetime:
        return moment.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)

    first = None if since is None else floor(since) + (timedelta(hours=1) if floor(since) < since else timedelta())
    return first, None if until is None else floor(until)


def hour_sql(dialect: str, row: str) -> str:
    """The UTC hour `row`.created_at falls in, stored as created_at is."""
    if dialect == "sqlite":
        return f"substr({row}.created_at, 1, 13) || ':00:00.000000'"
    return f"date_trunc('hour', {row}.created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"


def row_values(row: str, dialect: str) -> list[str]:
    """SQL expressions of one request-log row's roll-up key and sums; `row` is NEW or a table name."""
    hour = hour_sql(dialect, row)
    failed = f"{row}.status <> 'ok'"
    return [
        f"coalesce({row}.tenant_id, {NO_TENANT})", hour, f"coalesce({row}.template, '')", f"coalesce({row}.miss_cause, '')",
        f"CASE WHEN {failed} THEN coalesce({row}.error_code, 'unknown') ELSE '' END",
        "1", f"coalesce({row}.prompt_tokens, 0)", f"coalesce({row}.cached_tokens, 0)",
        f"coalesce({row}.completion_tokens, 0)", f"coalesce({row}.shadow_cached_tokens, 0)",
        f"CASE WHEN {row}.shadow_cached_tokens IS NOT NULL THEN coalesce({row}.prompt_tokens, 0) ELSE 0 END",
        f"coalesce({row}.canonical_cached_tokens, 0)", f"coalesce({row}.canonical_prompt_tokens, 0)",
        f"CASE WHEN {failed} THEN 1 ELSE 0 END", f"CASE WHEN {row}.ttft_ms IS NOT NULL THEN 1 ELSE 0 END",
        f"coalesce({row}.host_cached_tokens, 0)",
    ]


def upsert_sql(dialect: str) -> str:
    """INSERT of NEW's group, adding to the group when it exists."""
    return upsert_statement(TABLE, KEYS, SUMS, row_values("NEW", dialect))


def upsert_statement(table: str, keys: tuple[str, ...], sums: tuple[str, ...], values: list[str]) -> str:
    """INSERT of one row's group (`values`: its keys' then its sums' SQL), adding to the group when
    it exists: the body of every roll-up's trigger. Names are quoted (`order` is reserved)."""
    updates = ", ".join(f'"{name}" = {table}."{name}" + excluded."{name}"' for name in sums)
    return (f"INSERT INTO {table} ({quoted(keys + sums)}) VALUES ({', '.join(values)}) "
            f"ON CONFLICT ({quoted(keys)}) DO UPDATE SET {updates}")


def backfill_statement(table: str, keys: tuple[str, ...], sums: tuple[str, ...], values: list[str],
                       where: str | None = None) -> str:
    """Roll up every request_log row (optionally only WHERE `where`) into the empty `table`;
    `values` are the row's keys' then its sums' SQL over request_log."""
    selected = ", ".join([*values[: len(keys)], *(f"sum({expression})" for expression in values[len(keys):])])
    group = ", ".join(str(i + 1) for i in range(len(keys)))
    condition = f" WHERE {where}" if where else ""
    return (f"INSERT INTO {table} ({quoted(keys + sums)}) "
            f"SELECT {selected} FROM request_log{condition} GROUP BY {group}")


def quoted(names: tuple[str, ...]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def trigger_sql(dialect: str, name: str, upsert: str, when: str | None = None) -> list[str]:
    """The statements of an AFTER INSERT trigger `name` on request_log that runs `upsert` per row
    (optionally only WHEN `when` holds of NEW), on sqlite or postgresql."""
    if dialect == "sqlite":
        condition = f"WHEN {when} " if when else ""
        return [f"CREATE TRIGGER trg_{name} AFTER INSERT ON request_log {condition}BEGIN {upsert}; END"]
    if dialect == "postgresql":
        condition = f"WHEN ({when}) " if when else ""
        return [
            f"CREATE OR REPLACE FUNCTION {name}_add() RETURNS trigger AS $$ "
            f"BEGIN {upsert}; RETURN NULL; END $$ LANGUAGE plpgsql",
            f"CREATE TRIGGER trg_{name} AFTER INSERT ON request_log FOR EACH ROW {condition}"
            f"EXECUTE FUNCTION {name}_add()",
        ]
    raise ValueError(f"the request log's roll-ups are implemented for sqlite and postgresql, not {dialect}")


def drop_trigger_sql(dialect: str, name: str = TABLE) -> list[str]:
    if dialect == "sqlite":
        return [f"DROP TRIGGER IF EXISTS trg_{name}"]
    return [f"DROP TRIGGER IF EXISTS trg_{name} ON request_log", f"DROP FUNCTION IF EXISTS {name}_add()"]


def create_trigger_sql(dialect: str) -> list[str]:
    """The statements that make the database keep the roll-up (sqlite or postgresql)."""
    return trigger_sql(dialect, TABLE, upsert_sql(dialect))


def backfill_sql(dialect: str) -> str:
    """Roll up every row already in request_log (the roll-up table must be empty)."""
    return backfill_statement(TABLE, KEYS, SUMS, row_values("request_log", dialect))


def attach_trigger_ddl(table: Table, create_sql: Callable[[str], list[str]] | None = None) -> None:
    """Make create_all create a roll-up's trigger (`create_sql(dialect)`, default this one's) right
    after its table (defined after request_log, so both exist by then)."""
    for dialect in ("sqlite", "postgresql"):
        for statement in (create_sql or create_trigger_sql)(dialect):
            event.listen(table, "after_create", DDL(statement).execute_if(dialect=dialect))
