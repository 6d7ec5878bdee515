"""Run Alembic migrations programmatically (the server upgrades on start; `radixgate db` wraps these)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine

from gateway.db.session import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def make_config(url: str) -> Config:
    """An Alembic Config for migrations/ whose env.py migrates `url` (passed as an attribute,
    so URLs containing '%' need no escaping)."""
    config = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["db_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Apply every pending migration up to `revision` (idempotent: a no-op at head)."""
    command.upgrade(make_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Revert to `revision` ("base" drops every table the migrations created)."""
    command.downgrade(make_config(url), revision)


def current(url: str) -> str | None:
    """The revision the database is at, or None for an empty (unmigrated) database."""
    engine: Engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
