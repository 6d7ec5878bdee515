"""A host-tier slot's transitions on the shared layout: FREE -> RESERVED -> COMMITTED -> FREE.

Every function here expects the caller (HostPageStore) to hold the store's cross-process lock; none
takes it. A RESERVED slot is owned by one holder and not in the index; a COMMITTED slot is in its
namespace's index exactly once; a FREE slot has no owner and no parent.
"""

from __future__ import annotations

import heapq

import numpy as np

import engine.host_tier.index as index
from engine.host_tier.layout import COMMITTED, FREE, RESERVED

# A planned new page (HostPageStore.allocate_batch) is a list:
#   [order, namespace hash, token ids, chained key, parent (a slot, or the parent's entry), slot once reserved]
SLOT = 5


def entry_parent(plan: list, slots: list[int]):
    """Parent of the next new page: the previous new page's entry, else the last matched slot (or -1)."""
    if plan:
        return plan[-1][1]
    return slots[-1] if slots else -1


def reserve(layout, holder: int, entries: list[list]) -> None:
    """Mark each entry's slot RESERVED by `holder` with its page's key, tokens and parent slot
    (entries in order, so a parent entry's slot is known before its child's)."""
    for entry in entries:
        slot, parent = entry[SLOT], entry[4]
        layout.state[slot] = RESERVED
        layout.owner[slot] = holder
        layout.key[slot] = entry[3]
        layout.ns_hash[slot] = entry[1]
        layout.tokens[slot] = entry[2]
        layout.parent[slot] = parent if isinstance(parent, int) else parent[SLOT]


def commit(layout, slots: list[int], now: int) -> int:
    """Publish reserved slots (parents before children) in the index; a page another process committed
    first keeps its slot, the duplicate is freed and its children re-parented. Returns pages committed."""
    remap, num_new = {}, 0
    for slot in slots:
        parent = remap.get(int(layout.parent[slot]), int(layout.parent[slot]))
        layout.parent[slot] = parent
        existing = index.find(layout, int(layout.key[slot]), int(layout.ns_hash[slot]), parent, layout.tokens[slot])
        if existing >= 0:
            remap[slot] = existing
            free(layout, slot)
            continue
        layout.state[slot] = COMMITTED
        layout.owner[slot] = -1
        layout.last_access[slot] = now
        if parent >= 0:
            layout.children[parent] += 1
        index.insert(layout, slot)
        num_new += 1
    return num_new


def free(layout, slot: int) -> None:
    layout.state[slot] = FREE
    layout.owner[slot] = -1
    layout.parent[slot] = -1


def num_evictable(layout) -> int:
    """Committed pages nobody references (evict() can free them all, leaves first)."""
    return int(np.count_nonzero((layout.state == COMMITTED) & (layout.refcount == 0)))


def evict(layout, num_pages: int) -> int:
    """Free up to num_pages LRU unreferenced childless committed pages (a parent left childless joins
    the candidates); returns pages freed."""
    leaves = np.flatnonzero((layout.state == COMMITTED) & (layout.refcount == 0) & (layout.children == 0))
    heap = list(zip(layout.last_access[leaves].tolist(), leaves.tolist()))
    heapq.heapify(heap)
    freed = 0
    while freed < num_pages and heap:
        _, slot = heapq.heappop(heap)
        index.remove(layout, slot)
        parent = int(layout.parent[slot])
        free(layout, slot)
        freed += 1
        if parent >= 0:
            layout.children[parent] -= 1
            if not layout.children[parent] and not layout.refcount[parent]:
                heapq.heappush(heap, (int(layout.last_access[parent]), parent))
    return freed
