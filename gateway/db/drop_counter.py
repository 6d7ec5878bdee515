"""DropCounter: rows given up on, counted, and reported in a rate-limited warning.

`count(n, reason)` adds to `num_dropped` at once; the warning ("dropped N <what> (T in total; last
reason: R)") goes out at most every LOG_INTERVAL_S, covering every drop since the last one, and
`flush_log(force=True)` sends what is pending whatever the time (at stop). Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time

LOG_INTERVAL_S = 10.0


class DropCounter:
    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._logger = logger
        self._what = what
        self._lock = threading.Lock()
        self.num_dropped = 0
        self._num_unlogged = 0
        self._last_log = 0.0
        self._last_reason = ""

    def count(self, num_rows: int, reason: str) -> None:
        with self._lock:
            self.num_dropped += num_rows
            self._num_unlogged += num_rows
            self._last_reason = reason
        self.flush_log()

    def flush_log(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            num_rows = self._num_unlogged
            if not num_rows or (not force and now - self._last_log < LOG_INTERVAL_S):
                return
            self._num_unlogged = 0
            self._last_log = now
            reason = self._last_reason
        self._logger.warning("dropped %d %s (%d in total; last reason: %s)", num_rows, self._what, self.num_dropped,
                             reason)
