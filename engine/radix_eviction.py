"""Eviction for the radix cache: exact LRU over evictable leaves, kept incrementally.

An evictable leaf is a childless, unlocked, unpinned, non-root node. Its
pages go back to the pool in one release_unique() call per evict(). When an
eviction listener is set (the host tier's write-back), it is called once per
evict() with (namespace, path tokens, path pages) of every evicted leaf, while
those pages still hold their KV (before they go back to the pool). A KV-event publisher
(RadixCache.kv_events, engine/kv_events.py) is told of each evicted leaf's pages.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.radix_node import RadixNode


class RadixEviction:
    """Mixin of RadixCache: the eviction heap and evict()."""

    # Heap invariant: every evictable leaf (unlocked, unpinned, childless,
    # not a root) has at least one entry whose time is <= its last_access.
    # Entries are pushed only when a node becomes such a leaf; an access just
    # moves last_access forward, and a popped entry whose time is stale is
    # pushed back with the current time. The first popped entry whose time is
    # current is therefore the exact least-recently-used evictable leaf.
    def _push_if_evictable(self, node: RadixNode) -> None:
        if node.lock_ref or node.pin_ref or node.parent is None:
            return
        heapq.heappush(self._heap, (node.last_access, next(self._tiebreak), node))
        if len(self._heap) > 2 * self.num_nodes + 1024:
            self._compact_heap()

    def _compact_heap(self) -> None:
        latest = {}
        for entry in self._heap:
            node = entry[2]
            if node.pages is not None and not node.children and not node.lock_ref and not node.pin_ref:
                latest[id(node)] = (node.last_access, next(self._tiebreak), node)
        self._heap = list(latest.values())
        heapq.heapify(self._heap)

    def evict(self, num_pages: int) -> int:
        """Free LRU unlocked, unpinned leaves until >= num_pages freed; returns pages freed."""
        freed = []
        num_bytes = 0
        want_bytes = num_pages << 2
        heap = self._heap
        pop, push, tiebreak, unlink = heapq.heappop, heapq.heappush, self._tiebreak, self._unlink_leaf
        listener, events = self.on_evict, self.kv_events
        evicted_paths = []
        while num_bytes < want_bytes and heap:
            time, _, node = pop(heap)
            if node.pages is None or node.children or node.lock_ref or node.pin_ref:
                continue
            if node.last_access != time:
                push(heap, (node.last_access, next(tiebreak), node))
                continue
            if listener is not None or events is not None:
                path = self._path_of(node)
                if listener is not None:
                    evicted_paths.append(path)
                if events is not None:
                    events.removed(path[0], path[1], len(node.pages) >> 2)
            pages = unlink(node)
            freed.append(pages)
            num_bytes += len(pages)
            parent = node.parent
            if parent.children is None:
                self._push_if_evictable(parent)
        if not freed:
            return 0
        if evicted_paths:
            listener(evicted_paths)
        self.pool.release_unique(b"".join(freed))
        num_freed = num_bytes >> 2
        self.num_nodes -= len(freed)
        self.num_cached_pages -= num_freed
        self.num_evictable_pages -= num_freed
        self.num_evicted_pages += num_freed
        self.num_evicted_nodes += len(freed)
        return num_freed

    def _unlink_leaf(self, node: RadixNode) -> bytes:
        """Detach an evictable leaf; returns its pages (the caller updates the counters)."""
        parent = node.parent
        children = parent.children
        del children[node.key[: self._page_bytes]]
        if not children:
            parent.children = None
        pages = node.pages
        node.pages = None
        return pages

    def _path_of(self, node: RadixNode) -> tuple:
        """(namespace, tokens, pages) of the path root..node, tokens and pages as int32 bytes."""
        keys, pages = [], []
        while node.parent is not None:
            keys.append(node.key)
            pages.append(node.pages)
            node = node.parent
        return self._root_namespaces[id(node)], b"".join(reversed(keys)), b"".join(reversed(pages))
