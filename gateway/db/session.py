"""Database engine and session factory; `session_scope` is the one place that commits or rolls back.

Nothing is built at import time: the app's lifespan (or a CLI command, or a test) calls
`make_engine(url)` and `make_session_factory(engine)` and passes them down.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

DEFAULT_DB_URL = "sqlite:///./radixgate.db"


def make_engine(url: str, *, pool_size: int | None = None, pool_timeout_s: float | None = None,
                max_overflow: int | None = None, **kwargs) -> Engine:
    """An Engine for `url` (SQLite file or memory, or PostgreSQL via psycopg 3).

    `pool_size` / `max_overflow` / `pool_timeout_s` size the connection pool (not for in-memory SQLite, which
    shares one connection): a checkout that waits past the timeout raises sqlalchemy's
    TimeoutError, which the API answers with 503 and Retry-After (gateway/errors.py).

    SQLite: foreign keys on, WAL journal for files (readers never block the log writer); an
    in-memory database is one connection shared by every thread.
    PostgreSQL: `postgresql://` is taken to mean psycopg 3; connections are pre-pinged so a
    database that went away and came back is reconnected transparently.
    """
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() == "sqlite":
        is_file = bool(parsed.database) and parsed.database != ":memory:"
        kwargs.setdefault("connect_args", {}).setdefault("check_same_thread", False)
        if not is_file:  # one shared connection, or each thread (the log writer) sees its own empty DB
            kwargs.setdefault("poolclass", StaticPool)
        else:
            kwargs.update(pool_kwargs(pool_size, pool_timeout_s, max_overflow))
        engine = create_engine(parsed, **kwargs)
        _configure_sqlite(engine, is_file=is_file)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    kwargs.update(pool_kwargs(pool_size, pool_timeout_s, max_overflow))
    return create_engine(parsed, **kwargs)


def pool_kwargs(pool_size: int | None, pool_timeout_s: float | None, max_overflow: int | None) -> dict:
    out: dict = {}
    if max_overflow is not None:
        out["max_overflow"] = max_overflow
    if pool_size is not None:
        out["pool_size"] = pool_size
    if pool_timeout_s is not None:
        out["pool_timeout"] = pool_timeout_s
    return out


def _configure_sqlite(engine: Engine, *, is_file: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        if is_file:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """Yield a session; commit if the block succeeds, roll back if it raises, always close."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
