"""Migrations build the schema from zero, tear it down and build it again, on SQLite and
PostgreSQL, and the migrated schema matches the models (autogenerate finds no difference)."""

import subprocess
import sys

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from gateway.db import Base, make_engine, migrate

TABLES = {"tenants", "api_keys", "admin_keys", "templates", "template_versions", "pins", "request_log",
          "engine_stat_snapshots", "responses", "template_labels", "template_samples", "request_log_hourly", "doctor_hourly",
          "request_log_tenant_hourly"}


def schema_diff(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_matches_models(db_url):  # noqa: F811
    assert migrate.current(db_url) is None
    migrate.upgrade(db_url)
    assert migrate.current(db_url) == "0013"
    assert table_names(db_url) == TABLES
    assert schema_diff(db_url) == []

    migrate.downgrade(db_url, "base")
    assert migrate.current(db_url) is None
    assert table_names(db_url) == set()
    assert schema_diff(db_url) != []  # the comparison does see a missing schema

    migrate.upgrade(db_url)
    assert schema_diff(db_url) == []


def test_upgrade_at_head_is_a_no_op(db_url):  # noqa: F811
    migrate.upgrade(db_url)
    migrate.upgrade(db_url)
    assert migrate.current(db_url) == "0013"


def test_request_log_has_indexes_for_the_stats_queries(db_url):  # noqa: F811
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    try:
        indexes = {tuple(ix["column_names"]) for ix in inspect(engine).get_indexes("request_log")}
    finally:
        engine.dispose()
    assert {("tenant_id", "created_at"), ("created_at", "tenant_id")} <= {columns[:2] for columns in indexes}


def test_replicas_upgrading_together_migrate_once(db_url):  # noqa: F811
    """Separate processes (gateway replicas starting at once) all succeed; the schema is built once."""
    code = f"from gateway.db import migrate; migrate.upgrade({db_url!r})"
    processes = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) for _ in range(3)]
    errors = [process.communicate(timeout=120)[1].decode() for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], errors
    assert migrate.current(db_url) == "0013"
    assert schema_diff(db_url) == []


def test_0003_keeps_existing_rows_without_counterfactuals(db_url):  # noqa: F811
    """Rows logged before 0003 survive it (and its downgrade) with no counterfactual figures."""
    from sqlalchemy import text

    migrate.upgrade(db_url, "0002")
    engine = make_engine(db_url)
    try:
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO request_log (id, created_at, tenant_id, prompt_tokens, cached_tokens, completion_tokens,"
                " dynamic_hoisted, was_canonical, canonicalized, status)"
                " VALUES ('0123456789abcdef0123456789abcdef', '2026-11-30 10:00:00', 1, 100, 64, 1,"
                " false, true, true, 'ok')"))
        migrate.upgrade(db_url)
        with engine.connect() as connection:
            row = connection.execute(text(
                "SELECT prompt_tokens, canonical_cached_tokens, static_prefix_tokens FROM request_log")).one()
        assert tuple(row) == (100, None, None)
        migrate.downgrade(db_url, "0002")
        assert migrate.current(db_url) == "0002"
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM request_log")).scalar_one() == 1
    finally:
        engine.dispose()
