"""Best-effort `api_keys.last_used_at` updates, off the request path.

A request that authenticated from the database hands its key id to the KeyToucher and goes on; one
background thread writes the updates. A key already waiting is not queued twice, so a locked or slow
database (SQLite waits out its busy timeout, ~5 s) costs that thread time, never a request's. A failed
write is logged, never raised; a touch after close() is dropped. `write_last_used` is the write
itself, for a state built without a KeyToucher (gateway/deps.py).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from gateway.db.session import session_scope
from gateway.tenants.service import touch_key

log = logging.getLogger("gateway.tenants")


def write_last_used(session_factory: sessionmaker[Session], api_key_id: int) -> None:
    """Set the key's last_used_at now, in its own session; a failure is logged, never raised."""
    try:
        with session_scope(session_factory) as session:
            touch_key(session, api_key_id)
    except SQLAlchemyError as exc:
        log.warning("could not touch last_used_at of key %d: %s", api_key_id, type(exc).__name__)


class KeyToucher:
    """Queue `touch(api_key_id)` from any thread; `close()` writes what is queued, then stops."""

    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self._session_factory = session_factory
        self._pending: set[int] = set()
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="radixgate-key-touch")

    def touch(self, api_key_id: int) -> None:
        with self._lock:
            if api_key_id in self._pending:
                return
            self._pending.add(api_key_id)
        try:
            self._executor.submit(self._write, api_key_id)
        except RuntimeError:  # closed: the server is shutting down
            with self._lock:
                self._pending.discard(api_key_id)

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def _write(self, api_key_id: int) -> None:
        with self._lock:  # a request arriving during the write queues a newer touch
            self._pending.discard(api_key_id)
        write_last_used(self._session_factory, api_key_id)
