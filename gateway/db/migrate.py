"""Run Alembic migrations programmatically (the server upgrades on start; `radixgate db` wraps these)."""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from gateway.db.session import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
# Alembic installs its running environment in the process-global `alembic.context`: two threads
# migrating at once would trample each other, so in-process runs take turns. (Separate processes,
# e.g. replicas starting together, are serialized by a PostgreSQL advisory lock in env.py.)
ALEMBIC_LOCK = threading.Lock()


def make_config(url: str) -> Config:
    """An Alembic Config for migrations/ whose env.py migrates `url` (passed as an attribute,
    so URLs containing '%' need no escaping)."""
    config = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["db_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Apply every pending migration up to `revision` (idempotent: a no-op at head)."""
    with ALEMBIC_LOCK, sqlite_file_lock(url):
        command.upgrade(make_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Revert to `revision` ("base" drops every table the migrations created)."""
    with ALEMBIC_LOCK, sqlite_file_lock(url):
        command.downgrade(make_config(url), revision)


@contextmanager
def sqlite_file_lock(url: str) -> Iterator[None]:
    """For a SQLite file, hold an exclusive lock on a lock file in the temp dir named after the
    file's absolute path, so processes migrating the same file take turns (SQLite DDL is not
    serialized by the driver's transactions); nothing is left beside the database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        yield
        return
    digest = hashlib.sha256(str(Path(parsed.database).resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"radixgate-migrate-{digest}.lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def current(url: str) -> str | None:
    """The revision the database is at, or None for an empty (unmigrated) database."""
    engine: Engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
