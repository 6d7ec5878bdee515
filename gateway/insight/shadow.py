"""ShadowIndex: what the client's raw (un-canonicalized) prompt order would have hit.

One token-only RadixCache per tenant namespace, over a tensor-less KVPool of
`max_tokens_per_tenant // page_size` pages, so each namespace's index is bounded and evicts its
least-recently-used branches when full. `observe` is match-then-insert: the return value is the
cached-token count the raw order would have earned (page-aligned, like the engine's), and the full
sequence is then remembered for later requests. Namespaces themselves are LRU-bounded too.

Thread-safe (one lock); cost is one radix walk per request, no model work.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence

from engine import KVPool, RadixCache


class ShadowIndex:
    def __init__(self, page_size: int = 16, max_tokens_per_tenant: int = 1_000_000, max_namespaces: int = 1024) -> None:
        if max_tokens_per_tenant < page_size:
            raise ValueError(f"max_tokens_per_tenant ({max_tokens_per_tenant}) must hold one page ({page_size})")
        if max_namespaces < 1:
            raise ValueError("max_namespaces must be >= 1")
        self.page_size = page_size
        self.max_tokens_per_tenant = max_tokens_per_tenant
        self.max_namespaces = max_namespaces
        self._caches: OrderedDict[Hashable, RadixCache] = OrderedDict()
        self._lock = threading.Lock()

    def observe(self, namespace: Hashable, token_ids: Sequence[int]) -> int:
        """Tokens of `token_ids` already indexed in `namespace` (page-aligned prefix); then index them."""
        tokens = list(token_ids)
        with self._lock:
            cache = self._cache_for(namespace)
            match = cache.match_prefix(namespace, tokens)
            self._insert(cache, namespace, tokens, match)
            return match.length

    def _insert(self, cache: RadixCache, namespace: Hashable, tokens: list[int], match) -> None:
        """Index tokens past the match, evicting LRU branches (never the matched path) for room."""
        pool = cache.pool
        num_matched_pages = match.length // self.page_size
        num_wanted = min(len(tokens) // self.page_size, pool.num_pages) - num_matched_pages
        if num_wanted <= 0:
            return
        if pool.num_free_pages < num_wanted:
            is_locked = match.length > 0
            if is_locked:
                cache.lock(match.node)
            cache.evict(num_wanted - pool.num_free_pages)
            if is_locked:
                cache.unlock(match.node)
        num_new = min(num_wanted, pool.num_free_pages)
        if num_new <= 0:
            return
        pages = list(match.pages) + pool.allocate(num_new)
        cache.insert(namespace, tokens[: len(pages) * self.page_size], pages)

    def _cache_for(self, namespace: Hashable) -> RadixCache:
        cache = self._caches.get(namespace)
        if cache is not None:
            self._caches.move_to_end(namespace)
            return cache
        if len(self._caches) >= self.max_namespaces:
            self._caches.popitem(last=False)
        pool = KVPool(self.max_tokens_per_tenant // self.page_size, self.page_size)  # num_layers=0: no tensors
        cache = self._caches[namespace] = RadixCache(pool)
        return cache

    def num_cached_tokens(self, namespace: Hashable) -> int:
        """Tokens currently indexed for `namespace` (0 if unknown)."""
        with self._lock:
            cache = self._caches.get(namespace)
            return 0 if cache is None else cache.stats()["cached_tokens"]

    def forget(self, namespace: Hashable) -> None:
        """Drop a namespace's index (e.g. a tenant deleted)."""
        with self._lock:
            self._caches.pop(namespace, None)

    @property
    def num_namespaces(self) -> int:
        return len(self._caches)
