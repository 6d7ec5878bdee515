"""Persistence: the schema, sessions, migrations, the request-log writer, and the queries over the log.

    models, session, migrate      the SQLAlchemy models, engines and sessions, Alembic upgrades
    log_row, log_writer           request-log rows normalized, then written off the hot path in batches
    log_insert, drop_counter      the writer's idempotent insert and retry test; dropped rows counted
    stats_queries                 hit rates, tokens, causes, errors and TTFT percentiles per tenant,
                                  template and time bucket: the stats API's and the dashboard's figures
    insight_queries               what the dashboard and the cache doctor read beyond those: tenants,
                                  system-prefix sightings, pins, snapshots, series, prefill ms per token
    rollup, percentile            building blocks of the two query modules
    doctor_queries, doctor_hourly the cache doctor's SQL: the measured counterfactuals summed per
                                  tenant window, and their hourly roll-up (the diagnosis, its
                                  ranking and fix texts are gateway.doctor's)

Every query function takes a session, binds its parameters and never commits. The dashboard
imports only this package (its models, queries and sessions) and gateway.doctor, never the rest of
the gateway.
"""

from gateway.db.models import (
    AdminKey,
    ApiKey,
    Base,
    EngineStatSnapshot,
    Pin,
    RequestLog,
    StoredResponse,
    Template,
    TemplateVersion,
    Tenant,
    UtcDateTime,
    utc_now,
)
from gateway.db.session import DEFAULT_DB_URL, make_engine, make_session_factory, session_scope
from gateway.db import doctor_hourly  # noqa: F401  (hooks the doctor roll-up's trigger to create_all)

__all__ = [
    "AdminKey",
    "ApiKey",
    "Base",
    "DEFAULT_DB_URL",
    "EngineStatSnapshot",
    "Pin",
    "RequestLog",
    "StoredResponse",
    "Template",
    "TemplateVersion",
    "Tenant",
    "UtcDateTime",
    "make_engine",
    "make_session_factory",
    "session_scope",
    "utc_now",
]
