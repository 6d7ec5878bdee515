"""The request log's insert: idempotent by row id, and which of its failures are worth retrying."""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from gateway.db.models import RequestLog


def insert_ignoring_duplicates(dialect_name: str):
    """INSERT into request_log that skips rows whose id already exists (idempotent retries)."""
    table = RequestLog.__table__
    if dialect_name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=["id"])
    if dialect_name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=["id"])
    return insert(table)


def is_transient(exc: Exception) -> bool:
    """Database unavailable, locked, connection lost or no pooled connection in time: worth retrying."""
    if isinstance(exc, (OperationalError, InterfaceError, PoolTimeoutError)):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)
