"""RadixCache: a page-aligned compressed radix tree over token ids, one per namespace.

What a request's tokens look like against the cache (page_size 4 here):

    tokens   |=======match=======|--------new--------|tail|
    pages    | tree's pages      | caller's pages    |    |   tail < 1 page: never cached
             ^ match_prefix      ^ lock(node) protects everything left of here

Contracts:
  * match_prefix returns the longest cached page-aligned prefix and refreshes
    its LRU time; if the match ends inside a node, that node is split so the
    returned node ends exactly at the match (no data is copied twice).
  * insert(tokens, pages) caches tokens[: len(pages) * page_size]. Where the
    tree already holds a range, the tree's pages win and each caller page that
    differs from the tree's page at the same position is freed to the pool
    (equal ids are left alone); pages that become tree pages keep the caller's
    reference, now owned by the tree.
  * lock(node) protects the path root..node from eviction until unlock(node);
    an unlock without a lock raises UnbalancedUnlockError and changes nothing.
  * evict(num_pages) frees least-recently-used unlocked, unpinned leaves until
    at least num_pages are freed (it may free more: whole leaves go); a parent
    that becomes such a leaf joins the queue with its own LRU time.
  * pin(namespace, tokens) protects a cached path until unpin(pin_id); the
    namespace's pinned tokens (union of pinned nodes) stay within its quota.

Eviction order is kept incrementally in a heap of (time, seq, node) entries
with lazy invalidation (see _push_if_evictable); evict never rescans the tree.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Hashable

from engine.errors import EngineError, UnbalancedUnlockError
from engine.kv_pool import KVPool
from engine.radix_node import (
    MatchResult,
    NamespaceState,
    RadixNode,
    common_prefix_bytes,
    page_ids_to_bytes,
    token_bytes,
)
from engine.radix_eviction import RadixEviction
from engine.radix_pins import RadixPins


class RadixCache(RadixEviction, RadixPins):
    """Prefix cache over a KVPool's pages; see the module docstring for the contracts."""

    def __init__(self, pool: KVPool, max_pinned_pages: int | None = None) -> None:
        self.pool = pool
        self.page_size = pool.page_size
        self._page_bytes = 4 * pool.page_size  # key bytes per page
        self._namespaces: dict[Hashable, NamespaceState] = {}
        self._heap: list[tuple[int, int, RadixNode]] = []
        self._tiebreak = itertools.count()  # heap entries never compare nodes
        self._clock = 0
        self.num_nodes = 0
        self.num_cached_pages = 0
        self.num_evictable_pages = 0
        self.num_evicted_pages = 0
        self.num_evicted_nodes = 0
        # Called with [(namespace, path tokens, path pages), ...] before evicted pages are freed (host tier).
        self.on_evict = None
        # engine.kv_events.KVEventPublisher (or None): told of every stored and evicted page (KV events).
        self.kv_events = None
        self._root_namespaces: dict[int, Hashable] = {}
        RadixPins.__init__(self, max_pinned_pages)

    # ----- match / insert -----
    def match_prefix(self, namespace: Hashable, tokens, *, is_counted: bool = True) -> MatchResult:
        """Longest cached page-aligned prefix of tokens in namespace (see module contracts).

        is_counted=False (a scheduler's look-ahead) skips hit/miss and pin-hit accounting.
        """
        data = tokens if type(tokens) is bytes and not len(tokens) & 3 else token_bytes(tokens)
        state = self._namespaces.get(namespace) or self._namespace(namespace)
        result = self._walk_match(state, data, is_counted)
        state.last_tokens = data
        state.last_match = result
        if is_counted:
            state.hit_tokens += result.length
            state.miss_tokens += (len(data) >> 2) - result.length
        return result

    def _walk_match(self, state: NamespaceState, data: bytes, count_pins: bool = True) -> MatchResult:
        pb = self._page_bytes
        end = len(data) - len(data) % pb
        self._clock += 1
        now = self._clock
        node = state.root
        pos = 0
        parts = []
        while pos < end:
            children = node.children
            child = children.get(data[pos : pos + pb]) if children else None
            if child is None:
                break
            key = child.key
            child.last_access = now  # a partly matched node is touched whole, then split
            if not data.startswith(key, pos):
                child = self._split(child, common_prefix_bytes(data, pos, key, pb))
                key = child.key
            elif count_pins and child.pin_ref:
                self._count_pin_hits(child)
            parts.append(child.pages)
            pos += len(key)
            node = child
        return MatchResult(b"".join(parts), pos >> 2, node)

    def peek_prefix(self, namespace: Hashable, tokens) -> tuple[list[int], int]:
        """(pages, length) of the longest cached page-aligned prefix, read-only.

        Unlike match_prefix it never splits, refreshes LRU times or counts hits.
        """
        data = token_bytes(tokens)
        state = self._namespaces.get(namespace)
        pb = self._page_bytes
        end = len(data) - len(data) % pb
        node = state.root if state else None
        pos = 0
        parts = []
        while node is not None and node.children and pos < end:
            child = node.children.get(data[pos : pos + pb])
            if child is None:
                break
            key = child.key
            size = len(key) if data.startswith(key, pos) else common_prefix_bytes(data, pos, key, pb)
            parts.append(child.pages[: size // self.page_size])
            pos += size
            node = child if size == len(key) else None
        return memoryview(b"".join(parts)).cast("i").tolist(), pos >> 2

    def insert(self, namespace: Hashable, tokens, pages) -> int:
        """Cache tokens[: len(pages) * page_size]; returns the number of new tokens.

        Called with the very token bytes object of the namespace's latest
        match_prefix (a scheduler's match-then-insert), it starts at the
        matched node instead of walking down again (see _can_resume).
        """
        page_ids = pages if type(pages) is bytes else page_ids_to_bytes(pages)
        pb = self._page_bytes
        end = (len(page_ids) >> 2) * pb
        data = tokens if type(tokens) is bytes and not len(tokens) & 3 else token_bytes(tokens)
        if len(data) < end:
            raise ValueError(f"{len(page_ids) >> 2} pages need {end >> 2} tokens, got {len(data) >> 2}")
        state = self._namespaces.get(namespace) or self._namespace(namespace)
        self._clock += 1
        now = self._clock
        node = state.root
        pos = ppos = num_new = 0
        last = state.last_match
        if last is not None:
            if state.last_tokens is data and self._can_resume(last, page_ids, end):
                node, pos, ppos = last.node, last.length << 2, len(last.page_bytes)
                self._touch_path(node, now)
            state.last_tokens = state.last_match = None
        duplicates = []
        while pos < end:
            children = node.children
            child = children.get(data[pos : pos + pb]) if children else None
            if child is None:
                node = self._add_leaf(node, data[pos:end], page_ids[ppos:], now)
                num_new = (end - pos) >> 2
                break
            key = child.key
            child.last_access = now
            if not data.startswith(key, pos, end):
                child = self._split(child, common_prefix_bytes(data, pos, key, pb))
                key = child.key
            tree_pages = child.pages
            if not page_ids.startswith(tree_pages, ppos):
                duplicates.append(self._differing(page_ids[ppos : ppos + len(tree_pages)], tree_pages))
            pos += len(key)
            ppos += len(tree_pages)
            node = child
        if duplicates:
            self.pool.free(b"".join(duplicates))
        return num_new

    @staticmethod
    def _can_resume(last: MatchResult, page_ids: bytes, end: int) -> bool:
        """An insert may start at the node its match ended at (skipping the walk
        and the comparisons above it) if that node is still cached — its path
        and pages then are as matched, splits notwithstanding — and the caller
        passes exactly those pages first, so there is nothing to converge."""
        return last.node.pages is not None and last.length << 2 <= end and page_ids.startswith(last.page_bytes)

    @staticmethod
    def _touch_path(node: RadixNode, now: int) -> None:
        while node is not None:
            node.last_access = now
            node = node.parent

    @staticmethod
    def _differing(caller: bytes, tree: bytes) -> bytes:
        """Caller's page ids (int32 bytes) that differ from the tree's at the same position."""
        mine = memoryview(caller).cast("i")
        theirs = memoryview(tree).cast("i")
        return page_ids_to_bytes([p for p, q in zip(mine, theirs) if p != q])

    # ----- tree surgery -----
    def _namespace(self, namespace: Hashable) -> NamespaceState:
        state = self._namespaces.get(namespace)
        if state is None:
            state = self._namespaces[namespace] = NamespaceState()
            self._root_namespaces[id(state.root)] = namespace
        return state

    def _add_leaf(self, parent: RadixNode, key: bytes, pages: bytes, now: int) -> RadixNode:
        leaf = RadixNode(key, pages, parent, now)
        if parent.children is None:
            parent.children = {}
        parent.children[key[: self._page_bytes]] = leaf
        num_pages = len(pages) >> 2
        self.num_nodes += 1
        self.num_cached_pages += num_pages
        self.num_evictable_pages += num_pages
        heapq.heappush(self._heap, (now, next(self._tiebreak), leaf))  # a new leaf is evictable
        if len(self._heap) > 2 * self.num_nodes + 1024:
            self._compact_heap()
        if self.kv_events is not None:
            namespace, path_tokens, _ = self._path_of(leaf)
            self.kv_events.stored(namespace, path_tokens, num_pages)
        return leaf

    def _split(self, node: RadixNode, num_bytes: int) -> RadixNode:
        """Cut node after num_bytes of key; returns the new upper node (node keeps the rest)."""
        pb = self._page_bytes
        page_cut = num_bytes // self.page_size
        key = node.key
        upper = RadixNode(key[:num_bytes], node.pages[:page_cut], node.parent, node.last_access)
        upper.lock_ref = node.lock_ref
        upper.pin_ref = node.pin_ref
        upper.children = {key[num_bytes : num_bytes + pb]: node}
        node.parent.children[key[:pb]] = upper
        node.key = key[num_bytes:]
        node.pages = node.pages[page_cut:]
        node.parent = upper
        self.num_nodes += 1
        return upper

    # ----- lock / unlock -----
    def lock(self, node: RadixNode) -> None:
        """Protect the path root..node from eviction (reference counted)."""
        if node.pages is None:
            raise EngineError("lock() of an evicted node: lock the node right after match_prefix")
        num_bytes = 0  # page bytes that stop being evictable
        while node is not None:
            if not node.lock_ref and not node.pin_ref:
                num_bytes += len(node.pages)
            node.lock_ref += 1
            node = node.parent
        self.num_evictable_pages -= num_bytes >> 2

    def unlock(self, node: RadixNode) -> None:
        """Release one lock(node); raises UnbalancedUnlockError if node holds none."""
        if node.lock_ref <= 0:
            raise UnbalancedUnlockError(f"unlock() of {node!r} without a matching lock()")
        num_bytes = 0  # page bytes that become evictable
        while node is not None:
            node.lock_ref -= 1
            if not node.lock_ref and not node.pin_ref:
                num_bytes += len(node.pages)
                if not node.children:
                    self._push_if_evictable(node)
            node = node.parent
        self.num_evictable_pages += num_bytes >> 2

    # ----- stats -----
    def stats(self) -> dict:
        """Nodes, cached / pinned / evictable tokens, per-namespace hits and misses, evictions."""
        ps = self.page_size
        return {
            "nodes": self.num_nodes,
            "cached_tokens": self.num_cached_pages * ps,
            "pinned_tokens": self.num_pinned_tokens,
            "max_pinned_tokens": None if self.max_pinned_pages is None else self.max_pinned_pages * ps,
            "evictable_tokens": self.num_evictable_pages * ps,
            "evicted_tokens": self.num_evicted_pages * ps,
            "evicted_nodes": self.num_evicted_nodes,
            "num_pins": len(self._pins),
            "namespaces": {ns: s.as_dict() for ns, s in self._namespaces.items()},
        }
