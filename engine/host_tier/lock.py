"""StoreLock: one lock across processes (fcntl.flock on a lock file) and the threads of each.

flock excludes other open file descriptions, not other threads sharing this
one, so a process-local RLock is taken first; the lock is reentrant within a
thread. A process that dies holding it loses it with its descriptor, so a
crash never wedges the other processes.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading


def lock_path(name: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"radixgate-host-tier-{name}.lock")


class StoreLock:
    def __init__(self, name: str) -> None:
        self.path = lock_path(name)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self._local = threading.RLock()
        self._depth = 0

    def __enter__(self) -> "StoreLock":
        self._local.acquire()
        if self._depth == 0:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except BaseException:
                self._local.release()
                raise
        self._depth += 1
        return self

    def __exit__(self, *exc) -> None:
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._local.release()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
