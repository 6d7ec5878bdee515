"""`radixgate db upgrade|downgrade|current`, the Alembic env's $RADIXGATE_DB_URL fallback, and a
small `radixgate bench stats` run, on SQLite and PostgreSQL."""

import json

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from gateway.cli import app
from gateway.db import migrate
from tests.support.db import PG_URL

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_db_commands_upgrade_report_and_downgrade(db_url):  # noqa: F811
    assert invoke("db", "current", "--db", db_url).strip() == "base"
    assert "at revision 0013" in invoke("db", "upgrade", "--db", db_url)
    assert invoke("db", "current", "--db", db_url).strip() == "0013"
    assert "at revision base" in invoke("db", "downgrade", "base", "--db", db_url)
    assert migrate.current(db_url) is None


def test_db_url_comes_from_the_environment(db_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("RADIXGATE_DB_URL", db_url)
    invoke("db", "upgrade")
    assert migrate.current(db_url) == "0013"


def test_plain_alembic_reads_the_url_from_the_environment(db_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("RADIXGATE_DB_URL", db_url)
    config = Config(str(migrate.MIGRATIONS_DIR / "alembic.ini"))
    command.upgrade(config, "head")
    assert migrate.current(db_url) == "0013"


@pytest.mark.postgres
def test_bench_stats_runs_on_both_backends(tmp_path):
    out = tmp_path / "stats.json"
    server = make_url(PG_URL).render_as_string(hide_password=False)
    invoke("bench", "stats", "--rows", "3000", "--tenants", "4", "--repeats", "1", "--pg", server, "--json", str(out))
    result = json.loads(out.read_text())
    for backend in ("sqlite", "postgresql"):
        assert set(result[backend]["queries"]) >= {"tenant_stats_7d_hour", "all_tenant_stats_all",
                                                   "overview_page_all", "doctor_page_all"}
        assert all(timing["median_s"] > 0 for timing in result[backend]["queries"].values())
        assert result[backend]["doctor_cli"]["median_s"] > 0
