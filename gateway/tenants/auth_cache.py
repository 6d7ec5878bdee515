"""AuthCache: bearer-key digest -> the authenticated caller, so requests survive a database outage.

Contract:
- `lookup_fresh(digest)` returns an entry stored less than `ttl_s` ago, else None; callers then
  re-read the database and `store` the result (or `forget` the digest if the key is refused).
- `lookup_stale(digest)` is for when that database read FAILED (stale-if-error): it returns an
  entry up to `ttl_s + max_stale_s` old. Past that the entry is useless and the request fails.
- `invalidate(api_key_id)` drops every entry for a key at once (key revoked on this replica);
  other replicas see the revocation within `ttl_s`, or — during an outage — once the database
  is back and their entries are refreshed.
- At most `max_entries` entries; the oldest stored goes first. Thread-safe (auth runs in the
  threadpool). Entries hold the caller as loaded (a detached Tenant); nobody may mutate it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CachedCaller:
    caller: Any  # gateway.deps.Caller
    api_key_id: int
    stored_at: float


class AuthCache:
    def __init__(
        self,
        ttl_s: float,
        max_stale_s: float,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s < 0 or max_stale_s < 0 or max_entries <= 0:
            raise ValueError("ttl_s and max_stale_s must be >= 0 and max_entries > 0")
        self.ttl_s = ttl_s
        self.max_stale_s = max_stale_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, CachedCaller] = OrderedDict()
        self._lock = threading.Lock()

    def store(self, digest: str, caller: Any, api_key_id: int) -> None:
        with self._lock:
            self._entries.pop(digest, None)
            self._entries[digest] = CachedCaller(caller, api_key_id, self._clock())
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def lookup_fresh(self, digest: str) -> Any | None:
        return self._lookup(digest, self.ttl_s)

    def lookup_stale(self, digest: str) -> Any | None:
        return self._lookup(digest, self.ttl_s + self.max_stale_s)

    def forget(self, digest: str) -> None:
        with self._lock:
            self._entries.pop(digest, None)

    def invalidate(self, api_key_id: int) -> int:
        """Drop every entry for key `api_key_id`; returns how many were dropped."""
        with self._lock:
            digests = [digest for digest, entry in self._entries.items() if entry.api_key_id == api_key_id]
            for digest in digests:
                del self._entries[digest]
        return len(digests)

    @property
    def num_entries(self) -> int:
        return len(self._entries)

    def _lookup(self, digest: str, max_age_s: float) -> Any | None:
        with self._lock:
            entry = self._entries.get(digest)
        if entry is None or self._clock() - entry.stored_at >= max_age_s:
            return None
        return entry.caller
