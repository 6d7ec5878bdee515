"""Database test helpers: fresh PostgreSQL databases, a TCP proxy that can be closed and reopened
to make PostgreSQL go away mid-run, and the two outages built on it (SqliteOutage: the file
locked; PostgresOutage: connections refused). The `db_url` / `migrated_url` fixtures that use
them live in tests/integration/conftest.py.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.support.ports import free_port

PG_URL = os.environ.get("RADIXGATE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]


def create_pg_database() -> str:
    """Create a uniquely named database on the test server and return its URL."""
    name = f"rg_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


def drop_pg_database(url: str) -> None:
    name = make_url(url).database
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


class TcpProxy:
    """A loopback TCP proxy on its own event-loop thread. `close()` refuses new connections and
    cuts live ones (the database 'goes away'); `open()` listens again on the same port."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread.start()

    def open(self) -> None:
        asyncio.run_coroutine_threadsafe(self._open(), self._loop).result(5)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(5)

    def shutdown(self) -> None:
        self.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _open(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _handle(self, client_reader, client_writer) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers.update({client_writer, upstream_writer})
        await asyncio.gather(
            self._pipe(client_reader, upstream_writer), self._pipe(upstream_reader, client_writer)
        )

    async def _pipe(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()
            self._writers.discard(writer)


class SqliteOutage:
    """The SQLite file is locked by another connection holding an exclusive transaction."""

    def __init__(self, url: str) -> None:
        self.path = make_url(url).database
        self.url = url
        self.connect_args = {"timeout": 0.1}
        self._holder: sqlite3.Connection | None = None

    def go_away(self) -> None:
        self._holder = sqlite3.connect(self.path, isolation_level=None)
        self._holder.execute("BEGIN EXCLUSIVE")

    def come_back(self) -> None:
        self._holder.execute("ROLLBACK")
        self._holder.close()

    def close(self) -> None:
        pass


class PostgresOutage:
    """PostgreSQL reached through a TCP proxy that refuses and cuts connections while closed."""

    def __init__(self, url: str) -> None:
        target = make_url(url)
        self.proxy = TcpProxy(target.host, target.port or 5432)
        self.proxy.open()
        self.url = target.set(host="127.0.0.1", port=self.proxy.port).render_as_string(hide_password=False)
        self.connect_args = {"connect_timeout": 2}

    def go_away(self) -> None:
        self.proxy.close()

    def come_back(self) -> None:
        self.proxy.open()

    def close(self) -> None:
        self.proxy.shutdown()


def make_outage(url: str) -> SqliteOutage | PostgresOutage:
    """The outage for a migrated database URL; use `.url` to reach it, `.close()` when done."""
    return SqliteOutage(url) if url.startswith("sqlite") else PostgresOutage(url)
