"""CacheManager: a request's KV pages between the pool and the radix tree.

Keeps the token-range invariant documented in engine/request.py: pages
before num_tree_tokens are tree pages (locked through tree_node, no
reference held), pages after are the request's own (one reference each).

Contract with RadixCache: match_prefix never hands out references (lock the
node before using its pages); insert takes over the caller's references for
pages that become tree pages and frees the caller's duplicates; evict may
free more pages than asked. With the radix cache disabled nothing is ever
matched or inserted and release frees every own page.

With a host tier (engine.host_tier) below the tree: admit() continues the
device match into the host index and, when the policy measures the copy
cheaper than recomputing, copies those pages into fresh device pages and
inserts them into the tree before the request's prefill; the request then
sees them as tree pages like any other (req.num_host_cached_tokens says how
many came from the host). Device eviction writes the evicted paths back to
the host (RadixCache.on_evict); write_through() copies a pinned prefix there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from engine.errors import EngineError, OutOfPagesError, PinCapacityError, QuotaExceededError

if TYPE_CHECKING:
    from engine.host_tier import HostTier
    from engine.kv_pool import KVPool
    from engine.radix_cache import RadixCache
    from engine.request import Request


logger = logging.getLogger(__name__)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class CacheManager:
    """Matches, locks, allocates, inserts and releases on behalf of requests."""

    def __init__(self, pool: KVPool, cache: RadixCache, *, is_enabled: bool, host_tier: HostTier | None = None,
                 shares_generated_kv: bool = True) -> None:
        """``shares_generated_kv`` False: generated tokens' K/V comes from other kernels than a prompt's (with
        other bits), so the tree takes only prompt tokens: a later prompt that repeats a reply recomputes it,
        and its answer stays the one it gets with the cache off."""
        self.pool = pool
        self.cache = cache
        self.is_enabled = is_enabled
        self.shares_generated_kv = shares_generated_kv
        self.page_size = pool.page_size
        self.host_tier = host_tier if is_enabled else None
        if self.host_tier is not None:
            cache.on_evict = self.host_tier.write

    # ---- matching -----------------------------------------------------
    def match_length(self, req: Request) -> int:
        """Cached tokens a request would reuse now (page-aligned); touches only LRU."""
        if not self.is_enabled:
            return 0
        return self.cache.match_prefix(req.namespace, req.tokens[: req.match_limit()], is_counted=False).length

    def admit(self, req: Request) -> None:
        """Match the request's prefix and lock it; its computation starts after the match."""
        if req.pages or req.tree_node is not None:
            raise EngineError(f"request {req.request_id} admitted while holding pages")
        length, pages, node = 0, [], None
        if self.is_enabled:
            is_first = req.num_cached_tokens is None  # hit/miss counts once per request
            match = self.cache.match_prefix(req.namespace, req.tokens[: req.match_limit()], is_counted=is_first)
            length, pages, node = match.length, list(match.pages), match.node
            if node is not None:
                self.cache.lock(node)
            if self.host_tier is not None:
                loaded, length, pages, node = self._load_from_host(req, length, pages, node)
                if is_first:  # an admission that loaded, then failed to get pages, still counts its load
                    req.num_host_cached_tokens = max(req.num_host_cached_tokens, loaded)
        req.pages, req.tree_node = pages, node
        req.num_tree_tokens = req.num_computed = length
        self.hold_prefixes(req)

    def _load_from_host(self, req: Request, length: int, pages: list[int], node):
        """Extend a locked device match with host pages; returns (tokens loaded, length, pages, node).

        The device path stays locked while fresh pages are allocated (their
        eviction may write back to the host), and the host slots stay
        referenced until their copy is in the tree, so neither tier can drop
        what is being moved.
        """
        tier = self.host_tier
        tokens = req.tokens[: req.match_limit()]
        slots = tier.hold(req.namespace, tokens)
        try:
            extra = slots[length // self.page_size :]
            if not extra or not tier.policy.should_load(len(extra)):
                return 0, length, pages, node
            fresh = self.allocate(len(extra))
            if fresh is None:
                return 0, length, pages, node
            try:
                tier.load(extra, fresh)
            except BaseException:
                self.pool.free(fresh)
                raise
        finally:
            tier.release(slots)
        end = len(slots) * self.page_size
        self.cache.insert(req.namespace, tokens[:end], pages + fresh)
        match = self.cache.match_prefix(req.namespace, tokens[:end], is_counted=False)
        if match.length != end:
            raise EngineError(f"loaded {end} tokens from the host tier but the tree matches {match.length}")
        self.cache.lock(match.node)
        if node is not None:
            self.cache.unlock(node)
        return end - length, end, list(match.pages), match.node

    def write_through(self, namespace, tokens: list[int]) -> None:
        """Copy the tree's pages of a cached prefix (a pin) to the host tier now."""
        if self.host_tier is None:
            return
        pages, length = self.cache.peek_prefix(namespace, tokens)
        if length:
            self.host_tier.write([(namespace, tokens[:length], pages)])

    # ---- pages --------------------------------------------------------
    def allocate(self, num_pages: int, *, may_evict: bool = True) -> list[int] | None:
        """num_pages fresh pages, evicting LRU tree leaves first (unless may_evict is False); None if still short."""
        if num_pages <= 0:
            return []
        if not self.pool.can_allocate(num_pages) and self.is_enabled and may_evict:
            self.cache.evict(num_pages - self.pool.num_free_pages)
        if not self.pool.can_allocate(num_pages):
            return None
        try:
            return self.pool.allocate(num_pages)
        except OutOfPagesError:
            return None

    def ensure_pages(self, req: Request, num_new_tokens: int, *, may_evict: bool = True) -> bool:
        """Grow req.pages to hold num_computed + num_new_tokens tokens; False if the pool is short (counting
        evictable tree pages only when may_evict)."""
        missing = ceil_div(req.num_computed + num_new_tokens, self.page_size) - len(req.pages)
        pages = self.allocate(missing, may_evict=may_evict)
        if pages is None:
            return False
        req.pages.extend(pages)
        return True

    def num_available_pages(self) -> int:
        evictable = self.cache.num_evictable_pages if self.is_enabled else 0
        return self.pool.num_free_pages + evictable

    # ---- tree ---------------------------------------------------------
    def commit_prefix(self, req: Request) -> None:
        """Hand the computed full pages to the tree so others can reuse them now.

        After insert the tree holds these tokens on canonical pages (our
        duplicates were freed), so the request switches to those pages and
        moves its lock to the deeper node.
        """
        shareable = req.num_computed if self.shares_generated_kv else min(req.num_computed, req.num_prompt_tokens)
        aligned = shareable // self.page_size * self.page_size
        if not self.is_enabled or aligned <= req.num_tree_tokens:
            return
        num_pages = aligned // self.page_size
        self.cache.insert(req.namespace, req.tokens[:aligned], req.pages[:num_pages])
        match = self.cache.match_prefix(req.namespace, req.tokens[:aligned], is_counted=False)
        if match.length != aligned:
            raise EngineError(f"inserted {aligned} tokens but the tree matches {match.length}")
        self.cache.lock(match.node)
        if req.tree_node is not None:
            self.cache.unlock(req.tree_node)
        req.pages[:num_pages] = list(match.pages)
        req.tree_node, req.num_tree_tokens = match.node, aligned
        self.hold_prefixes(req)

    def hold_prefixes(self, req: Request) -> None:
        """Lease each of the request's pending prefix pins that is in the tree now (engine.radix_pins.PrefixPins):
        the request's lock keeps the path there meanwhile (make_request rounded each down to a page). A lease
        the quota or the cap refuses is dropped (logged): the prefix stays ordinary cache."""
        pending = req.pending_pins
        if not pending or not self.is_enabled or pending[0][0] > req.num_tree_tokens:
            return
        pins = req.prefix_pins
        if pins.quota_namespace is not None:
            self.cache.share_pin_quota(req.namespace, pins.quota_namespace)
        if pins.quota_tokens is not None:
            self.cache.set_pin_quota(pins.quota_namespace or req.namespace, pins.quota_tokens)
        while pending and pending[0][0] <= req.num_tree_tokens:
            num_tokens, ttl_s = pending.pop(0)
            try:
                self.cache.lease(req.namespace, req.tokens[:num_tokens], ttl_s)
            except (QuotaExceededError, PinCapacityError) as refused:
                logger.info("request %s: its %d-token prefix stays ordinary cache, not pinned for %gs: %s",
                            req.request_id, num_tokens, ttl_s, refused)

    def release(self, req: Request, *, is_kv_valid: bool) -> None:
        """Give back everything the request holds; keep its computed prefix when is_kv_valid."""
        if is_kv_valid:
            self.commit_prefix(req)
        own_pages = req.pages[req.num_tree_tokens // self.page_size :]
        if own_pages:
            self.pool.free(own_pages)
        if req.tree_node is not None:
            self.cache.unlock(req.tree_node)
        req.pages, req.tree_node = [], None
        req.num_tree_tokens = req.num_computed = 0
