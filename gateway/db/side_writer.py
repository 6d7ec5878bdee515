"""Best-effort database writes off the request path: `api_keys.last_used_at`, template samples.

A request hands the SideWriter a job and goes on; one background thread runs the jobs in the order
they came. So a locked or slow database (SQLite waits out its busy timeout, ~5 s) costs that thread
time, never a request's. Contracts:
  * a job submitted with a key that is already waiting is dropped: the waiting job makes the same
    write (a key's job leaves the waiting set when it starts, so a later submit queues again);
  * at most `max_pending` jobs wait; past that a job is dropped and counted, and a warning is
    logged once per backlog, never per job;
  * a job's SQLAlchemyError is logged and swallowed; anything else is logged with its traceback;
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

log = logging.getLogger("gateway.db")

MAX_PENDING = 1024


def write_aside(writer: "SideWriter | None", job: Callable[[], object], key: Hashable | None = None) -> None:
    """`job` on `writer`'s thread, or here and now when there is no writer (a state a test builds without one)."""
    if writer is None:
        job()
    else:
        writer.submit(job, key)


class SideWriter:
    """`submit(job, key=None)` from any thread; `flush()`, `close()`; `dropped` counts jobs not run."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self.max_pending = max_pending
        self.dropped = 0
        self._waiting_keys: set[Hashable] = set()
        self._num_waiting = 0
        self._warned = False
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="radixgate-side-writes")

    def submit(self, job: Callable[[], object], key: Hashable | None = None) -> bool:
        """Queue `job`; False when it is not queued (its key is waiting, the backlog is full, or closed)."""
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
            self._executor.submit(self._run, job, key)
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

    def _run(self, job: Callable[[], object], key: Hashable | None) -> None:
        with self._lock:  # a submit arriving while this job runs queues a newer one
            self._forget(key)
            if self._num_waiting == 0:
                self._warned = False
        name = getattr(getattr(job, "func", job), "__name__", type(job).__name__)  # a partial names its function
        try:
            job()
        except SQLAlchemyError as exc:
            log.warning("side write %s failed: %s", name, type(exc).__name__)
        except Exception:
            log.exception("side write %s failed", name)

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
