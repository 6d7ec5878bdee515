"""EngineSnapshotter: a background thread that stores the engine's cache statistics every
`interval_s` as EngineStatSnapshot rows (the dashboard's engine page charts them over time).

Contract: a failing stats call or database write is logged and skipped, never raised; `stop()`
takes one last snapshot so a short run still leaves a row.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gateway.db.models import EngineStatSnapshot
from gateway.db.session import session_scope

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

logger = logging.getLogger(__name__)
CACHE_KEYS = {  # EngineStatSnapshot column -> key in the engine's stats()["cache"] (or top level)
    "cached_tokens": "cached_tokens",
    "pinned_tokens": "pinned_tokens",
    "evictable_tokens": "evictable_tokens",
    "num_evictions": "evicted_nodes",
}


def snapshot_from_stats(stats: dict, backend: str | None = None) -> EngineStatSnapshot:
    """One row from Engine.stats(): the cache gauges as columns, the whole dict as JSON."""
    cache = stats.get("cache") if isinstance(stats.get("cache"), dict) else stats
    values = {column: int(cache.get(key, 0) or 0) for column, key in CACHE_KEYS.items()}
    return EngineStatSnapshot(backend=backend, stats_json=json.dumps(stats, default=str), **values)


class EngineSnapshotter:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        read_stats: Callable[[], dict],
        interval_s: float = 60.0,
        backend: str | None = "embedded",
    ) -> None:
        self._session_factory = session_factory
        self._read_stats = read_stats
        self.interval_s = interval_s
        self.backend = backend
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.num_written = 0

    def start(self) -> EngineSnapshotter:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="radixgate-engine-snapshots", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.take_snapshot()

    def take_snapshot(self) -> bool:
        """Store one snapshot now; False (logged) if the engine or the database failed."""
        try:
            row = snapshot_from_stats(self._read_stats(), self.backend)
            with session_scope(self._session_factory) as session:
                session.add(row)
        except Exception:  # noqa: BLE001 - statistics must never take the gateway down
            logger.warning("engine stats snapshot skipped", exc_info=True)
            return False
        self.num_written += 1
        return True

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self.take_snapshot()
