"""Best-effort database writes off the request path: `api_keys.last_used_at`, template samples.

A request hands the SideWriter a job — `work(session)`, which writes and never commits — and goes on;
one background thread runs the jobs in the order they came, each in its own committed session. So a locked or slow database (SQLite waits out its busy timeout, ~5 s) costs that thread
time, never a request's. Contracts:
  * a job submitted with a key that is already waiting is dropped: the waiting job makes the same
    write (a key's job leaves the waiting set when it starts, so a later submit queues again);
  * at most `max_pending` jobs wait; past that a job is dropped and counted, and a warning is
    logged once per backlog, never per job;
  * a job's SQLAlchemyError rolls its session back and is logged; anything else is logged with its traceback;
  * `flush()` returns once every job submitted before it has run (read-your-writes for a route
    that shows what the writer wrote); after `close()` submits are dropped and flush returns at once;
  * `close()` runs what is waiting, then stops the thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from gateway.db.session import session_scope

log = logging.getLogger("gateway.db")

MAX_PENDING = 1024

Work = Callable[[Session], object]


def write_aside(
    writer: "SideWriter | None", session_factory: sessionmaker[Session], work: Work, key: Hashable | None = None
) -> None:
    """`work` on `writer`'s thread, or here and now when there is no writer (a state a test builds without
    one); either way in its own committed session, a failure logged, never raised."""
    if writer is None:
        run_logged(session_factory, work)
    else:
        writer.submit(work, key)


def run_logged(session_factory: sessionmaker[Session], work: Work) -> None:
    """`work(session)` in a session committed on success; any failure is logged and swallowed."""
    name = getattr(getattr(work, "func", work), "__name__", type(work).__name__)  # a partial names its function
    try:
        with session_scope(session_factory) as session:
            work(session)
    except SQLAlchemyError as exc:
        log.warning("side write %s failed: %s", name, type(exc).__name__)
    except Exception:
        log.exception("side write %s failed", name)


class SideWriter:
    """`submit(work, key=None)` from any thread; `flush()`, `close()`; `dropped` counts jobs not run."""

    def __init__(self, session_factory: sessionmaker[Session], max_pending: int = MAX_PENDING) -> None:
        self.session_factory = session_factory
        self.max_pending = max_pending
        self.dropped = 0
        self._waiting_keys: set[Hashable] = set()
        self._num_waiting = 0
        self._warned = False
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="radixgate-side-writes")

    def submit(self, work: Work, key: Hashable | None = None) -> bool:
        """Queue `work`; False when it is not queued (its key is waiting, the backlog is full, or closed)."""
        with self._lock:
            if key is not None and key in self._waiting_keys:
                return False
            if self._num_waiting >= self.max_pending:
                self._drop("the backlog is full")
                return False
            self._num_waiting += 1
            if key is not None:
                self._waiting_keys.add(key)
        try:
            self._executor.submit(self._run, work, key)
        except RuntimeError:  # closed: the server is shutting down
            with self._lock:
                self._forget(key)
                self._drop("the writer is closed")
            return False
        return True

    def flush(self) -> None:
        """Wait until every job submitted before this call has run."""
        try:
            self._executor.submit(lambda: None).result()
        except RuntimeError:  # closed: nothing runs any more
            return

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def _run(self, work: Work, key: Hashable | None) -> None:
        with self._lock:  # a submit arriving while this job runs queues a newer one
            self._forget(key)
            if self._num_waiting == 0:
                self._warned = False
        run_logged(self.session_factory, work)

    def _forget(self, key: Hashable | None) -> None:
        """Called with the lock held: one job fewer waiting."""
        self._num_waiting -= 1
        if key is not None:
            self._waiting_keys.discard(key)

    def _drop(self, why: str) -> None:
        """Called with the lock held."""
        self.dropped += 1
        if not self._warned:
            self._warned = True
            log.warning("side write dropped: %s (%d waiting; dropped so far %d)", why, self._num_waiting, self.dropped)
