"""The store's radix index: pages chained from a namespace root, found through a hash table.

A cached prefix of n pages is a chain of slots s_1..s_n with parent[s_i] =
s_{i-1} (-1 for s_1). Each slot's key is a chained hash of the namespace and
all tokens up to its page, so the slot of page i is found in one probe without
walking the chain; the hit is then verified exactly (state, namespace, parent
slot and the page's tokens), so a hash collision is a miss, never a wrong page.
The chain is a page-granular radix tree: a page's children are the slots whose
parent it is. All functions here run under the store lock.
"""

from __future__ import annotations

import hashlib

import numpy as np

from engine.host_tier.layout import COMMITTED, Layout

_MASK = (1 << 64) - 1


def namespace_hash(namespace) -> int:
    return int.from_bytes(hashlib.blake2b(repr(namespace).encode(), digest_size=8).digest(), "little")


def chain_keys(namespace, pages: np.ndarray) -> list[int]:
    """Chained key of every page: pages is (num_pages, page_size) int32."""
    key = namespace_hash(namespace)
    keys = []
    for page in pages:
        key = int.from_bytes(hashlib.blake2b(key.to_bytes(8, "little") + page.tobytes(), digest_size=8).digest(),
                             "little")
        keys.append(key)
    return keys


def _home(key: int, mask: int) -> int:
    return (key * 0x9E3779B97F4A7C15 & _MASK) >> 20 & mask


def find(layout: Layout, key: int, ns: int, parent: int, tokens: np.ndarray) -> int:
    """Committed slot holding exactly this page after parent in namespace ns, or -1."""
    table = layout.table
    mask = len(table) - 1
    i = _home(key, mask)
    while True:
        slot = int(table[i])
        if slot < 0:
            return -1
        if (int(layout.key[slot]) == key and layout.state[slot] == COMMITTED and int(layout.parent[slot]) == parent
                and int(layout.ns_hash[slot]) == ns and np.array_equal(layout.tokens[slot], tokens)):
            return slot
        i = (i + 1) & mask


def insert(layout: Layout, slot: int) -> None:
    """Add a committed slot (its key set) to the table; the caller checked it is not there."""
    table = layout.table
    mask = len(table) - 1
    i = _home(int(layout.key[slot]), mask)
    while table[i] >= 0:
        i = (i + 1) & mask
    table[i] = slot


def remove(layout: Layout, slot: int) -> None:
    """Delete a slot from the table, shifting later entries of its probe run back (no tombstones)."""
    table = layout.table
    mask = len(table) - 1
    i = _home(int(layout.key[slot]), mask)
    while int(table[i]) != slot:
        if table[i] < 0:
            raise KeyError(f"slot {slot} is not in the host index")
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        other = int(table[j])
        if other < 0:
            break
        home = _home(int(layout.key[other]), mask)
        # other may move into the hole at i unless its home lies cyclically in (i, j]
        if (j > i and (home <= i or home > j)) or (j < i and (i >= home > j)):
            table[i] = other
            i = j
    table[i] = -1
