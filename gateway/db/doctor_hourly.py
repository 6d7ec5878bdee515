"""The cache doctor's hourly roll-up: loss_groups' sums (SUMS) per tenant, UTC hour,
order cause and cold cause, kept by the database like the stats roll-up (gateway/db/hourly.py).

The per-row expressions are doctor_queries' own (row_sums, order_cause, cold_cause), compiled
for the dialect with NEW in place of request_log, so the trigger and the row query cannot
disagree. Only rows with prompt tokens count (loss_groups' filter: the trigger's WHEN). Key
sentinels: tenant_id -1, order_cause '' for a canonicalized row (None in a LossGroup).
"""

from __future__ import annotations

from sqlalchemy import event, text
from sqlalchemy.dialects import postgresql, sqlite

from gateway.db.doctor_queries import SUMS, cold_cause, order_cause, row_sums
from gateway.db.hourly import NO_TENANT, backfill_statement, hour_sql, trigger_sql, upsert_statement
from gateway.db.hourly import drop_trigger_sql as hourly_drop_trigger_sql
from gateway.db.models import DoctorHourly

TABLE = "doctor_hourly"
KEYS = ("tenant_id", "hour", "order_cause", "cold_cause")
DIALECTS = {"sqlite": sqlite.dialect(), "postgresql": postgresql.dialect()}


def compiled(expression, dialect: str, row: str) -> str:
    text = str(expression.compile(dialect=DIALECTS[dialect], compile_kwargs={"literal_binds": True}))
    return text.replace("request_log.", f"{row}.")


def row_values(dialect: str, row: str) -> list[str]:
    keys = [f"coalesce({row}.tenant_id, {NO_TENANT})", hour_sql(dialect, row),
            f"coalesce({compiled(order_cause(), dialect, row)}, '')",
            compiled(cold_cause(), dialect, row)]
    # a NULL term (cached_tokens unknown for a remote that reports none) adds 0, as SUM skips it
    return keys + [f"coalesce({compiled(expression, dialect, row)}, 0)"
                   for expression in row_sums().values()]


def create_trigger_sql(dialect: str) -> list[str]:
    """The statements that make the database keep the doctor's roll-up (sqlite or postgresql)."""
    upsert = upsert_statement(TABLE, KEYS, SUMS, row_values(dialect, "NEW"))
    return trigger_sql(dialect, TABLE, upsert, when="NEW.prompt_tokens > 0")


def drop_trigger_sql(dialect: str) -> list[str]:
    return hourly_drop_trigger_sql(dialect, TABLE)


def backfill_sql(dialect: str) -> str:
    """Roll up every row already in request_log (the roll-up table must be empty)."""
    return backfill_statement(TABLE, KEYS, SUMS, row_values(dialect, "request_log"), where="prompt_tokens > 0")


def create_trigger(target, connection, **kw) -> None:
    """after_create hook of the roll-up table (models.DoctorHourly): create_all makes the trigger too
    (gateway.db imports this module, so the hook is in place wherever the models are)."""
    for statement in create_trigger_sql(connection.dialect.name):
        connection.execute(text(statement))


event.listen(DoctorHourly.__table__, "after_create", create_trigger)
