"""RadixCache: one test per operation and per error."""

from array import array

import numpy as np
import pytest

from engine.errors import (
    EngineError,
    PinCapacityError,
    PrefixNotCachedError,
    QuotaExceededError,
    UnbalancedUnlockError,
    UnknownPinError,
)
from engine.kv_pool import KVPool
from engine.radix_cache import RadixCache


def make_cache(page_size=1, num_pages=64):
    pool = KVPool(num_pages, page_size)
    return pool, RadixCache(pool)


def cache_tokens(cache, pool, namespace, tokens):
    """Insert tokens the way a scheduler does: match, allocate the rest, insert."""
    match = cache.match_prefix(namespace, tokens)
    num_pages = len(tokens) // pool.page_size
    pages = match.pages + pool.allocate(num_pages - len(match.pages))
    cache.insert(namespace, tokens, pages)
    return pages


def test_match_on_empty_cache_returns_root_and_nothing():
    _, cache = make_cache()
    match = cache.match_prefix("a", [1, 2, 3])
    assert match.length == 0 and match.pages == [] and match.node.parent is None


def test_insert_then_match_returns_pages_and_length():
    pool, cache = make_cache()
    pages = pool.allocate(4)
    assert cache.insert("a", [5, 6, 7, 8], pages) == 4
    match = cache.match_prefix("a", [5, 6, 7, 8, 9])
    assert match.length == 4 and match.pages == pages
    pages_out, length, node = match
    assert (pages_out, length, node) == (pages, 4, match.node)


def test_match_splits_node_at_divergence():
    pool, cache = make_cache()
    pages = pool.allocate(6)
    cache.insert("a", [1, 2, 3, 4, 5, 6], pages)
    match = cache.match_prefix("a", [1, 2, 3, 9])
    assert match.length == 3 and match.pages == pages[:3]
    assert cache.num_nodes == 2 and len(match.node.key) == 12


def test_page_aligned_matching_ignores_partial_pages():
    pool, cache = make_cache(page_size=4)
    pages = pool.allocate(2)
    assert cache.insert("a", list(range(10)), pages) == 8  # 2 pages; the tail of 2 is not cached
    assert cache.match_prefix("a", list(range(7))).length == 4
    assert cache.match_prefix("a", [0, 1, 2, 3, 4, 5, 6, 99]).length == 4
    assert cache.match_prefix("a", list(range(12))).length == 8


def test_tokens_may_be_list_array_bytes_or_numpy():
    pool, cache = make_cache()
    cache.insert("a", [1, 2, 3], pool.allocate(3))
    for tokens in ([1, 2, 3], array("i", [1, 2, 3]), array("i", [1, 2, 3]).tobytes(), np.array([1, 2, 3])):
        assert cache.match_prefix("a", tokens).length == 3


def test_insert_converges_duplicate_pages():
    pool, cache = make_cache()
    first = pool.allocate(4)
    cache.insert("a", [1, 2, 3, 4], first)
    second = pool.allocate(6)  # a request that computed the same prefix itself
    assert cache.insert("a", [1, 2, 3, 4, 5, 6], second) == 2
    assert cache.match_prefix("a", [1, 2, 3, 4, 5, 6]).pages == first + second[4:]
    assert all(pool.refcount(p) == 0 for p in second[:4])
    assert pool.num_referenced_pages == 6


def test_insert_does_not_free_pages_equal_to_the_trees():
    pool, cache = make_cache()
    pages = pool.allocate(3)
    cache.insert("a", [1, 2, 3], pages)
    assert cache.insert("a", [1, 2, 3], pages) == 0
    assert all(pool.refcount(p) == 1 for p in pages)


def test_insert_requires_enough_tokens_for_pages():
    pool, cache = make_cache(page_size=2)
    with pytest.raises(ValueError, match="need 4 tokens"):
        cache.insert("a", [1, 2, 3], pool.allocate(2))


def test_namespaces_are_isolated():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "tenant-a", [1, 2, 3])
    assert cache.match_prefix("tenant-b", [1, 2, 3]).length == 0
    assert cache.match_prefix(("model", 7), [1, 2, 3]).length == 0
    assert cache.match_prefix("tenant-a", [1, 2, 3]).length == 3


def test_lock_protects_path_from_eviction():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3, 4])
    cache_tokens(cache, pool, "a", [1, 2, 7, 8])
    match = cache.match_prefix("a", [1, 2, 3, 4])
    cache.lock(match.node)
    assert cache.evict(100) == 2  # only the [7, 8] leaf can go
    assert cache.match_prefix("a", [1, 2, 3, 4]).length == 4
    cache.unlock(match.node)
    assert cache.evict(100) == 4 and pool.num_free_pages == 64


def test_unbalanced_unlock_raises():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2])
    node = cache.match_prefix("a", [1, 2]).node
    cache.lock(node)
    cache.unlock(node)
    with pytest.raises(UnbalancedUnlockError):
        cache.unlock(node)
    assert node.lock_ref == 0 and node.parent.lock_ref == 0


def test_lock_of_evicted_node_raises():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2])
    node = cache.match_prefix("a", [1, 2]).node
    cache.evict(2)
    with pytest.raises(EngineError, match="evicted"):
        cache.lock(node)


def test_evict_takes_least_recently_used_leaf_first():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 1])
    cache_tokens(cache, pool, "b", [2, 2])
    cache_tokens(cache, pool, "a", [3, 3])
    cache.match_prefix("a", [1, 1])  # refresh [1, 1]
    assert cache.evict(1) == 2
    assert cache.match_prefix("b", [2, 2]).length == 0
    assert cache.match_prefix("a", [1, 1]).length == 2 and cache.match_prefix("a", [3, 3]).length == 2


def test_evict_takes_whole_branches_leaves_first():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3])
    cache_tokens(cache, pool, "a", [1, 2, 4])
    cache_tokens(cache, pool, "a", [9])
    cache.match_prefix("a", [9])
    assert cache.evict(3) == 4  # leaves [3], [4], then their parent [1, 2] (older than [9])
    assert cache.match_prefix("a", [9]).length == 1 and cache.match_prefix("a", [1]).length == 0
    assert cache.stats()["evicted_nodes"] == 3


def test_evict_returns_zero_when_nothing_is_evictable():
    _, cache = make_cache()
    assert cache.evict(5) == 0


def test_pin_survives_eviction_until_unpinned():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3, 4])
    pin_id = cache.pin("a", [1, 2])
    assert cache.evict(100) == 2
    assert cache.match_prefix("a", [1, 2, 3]).length == 2
    cache.unpin(pin_id)
    assert cache.evict(100) == 2 and pool.num_free_pages == 64


def test_pin_of_uncached_path_raises():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2])
    with pytest.raises(PrefixNotCachedError, match="only 2 are cached"):
        cache.pin("a", [1, 2, 3])
    with pytest.raises(PrefixNotCachedError):
        cache.pin("b", [1, 2])


def test_pin_quota_counts_union_and_names_the_quota():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3, 4, 5])
    cache.set_pin_quota("a", 4)
    cache.pin("a", [1, 2, 3])
    cache.pin("a", [1, 2, 3, 4])  # shares 3 pinned tokens: union is 4
    with pytest.raises(QuotaExceededError, match=r"namespace 'a'.*4 tokens pinned \+ 1 new > quota 4"):
        cache.pin("a", [1, 2, 3, 4, 5])
    assert cache.stats()["namespaces"]["a"]["pinned_tokens"] == 4


def test_pins_of_all_namespaces_stay_within_the_cache_cap():
    pool = KVPool(64, 1)
    cache = RadixCache(pool, max_pinned_pages=5)
    cache_tokens(cache, pool, "a", [1, 2, 3])
    cache_tokens(cache, pool, "b", [7, 8, 9])
    cache.pin("a", [1, 2, 3])
    with pytest.raises(PinCapacityError, match=r"3 tokens pinned \+ 3 new > cap 5 tokens"):
        cache.pin("b", [7, 8, 9])
    assert cache.stats()["pinned_tokens"] == 3 and cache.stats()["namespaces"]["b"]["pinned_tokens"] == 0
    cache.pin("b", [7, 8])
    assert cache.stats()["pinned_tokens"] == 5


def test_set_pin_quota_rejects_negative():
    _, cache = make_cache()
    with pytest.raises(ValueError):
        cache.set_pin_quota("a", -1)


def test_pin_info_counts_matches_covering_the_pinned_path():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3, 4])
    pin_id = cache.pin("a", [1, 2])
    cache.match_prefix("a", [1, 2, 3])
    cache.match_prefix("a", [1, 2])
    cache.match_prefix("a", [1, 9])  # covers only half the pinned path
    assert cache.pin_info(pin_id) == {"pin_id": pin_id, "namespace": "a", "tokens": 2, "hits": 2}


def test_unknown_pin_raises():
    _, cache = make_cache()
    with pytest.raises(UnknownPinError):
        cache.unpin(42)
    with pytest.raises(UnknownPinError):
        cache.pin_info(42)


def test_stats_counts_tokens_hits_and_evictions():
    pool, cache = make_cache(page_size=2)
    cache_tokens(cache, pool, "a", [1, 2, 3, 4])
    cache.match_prefix("a", [1, 2, 3, 4, 5])
    cache.pin("a", [1, 2])
    cache.evict(10)
    stats = cache.stats()
    assert stats["nodes"] == 1 and stats["cached_tokens"] == 2 and stats["pinned_tokens"] == 2
    assert stats["evictable_tokens"] == 0 and stats["evicted_tokens"] == 2
    assert stats["namespaces"]["a"]["hit_tokens"] == 4
    assert stats["namespaces"]["a"]["miss_tokens"] == 4 + 1


def test_evictable_tokens_track_locks():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3])
    node = cache.match_prefix("a", [1, 2, 3]).node
    assert cache.num_evictable_pages == 3
    cache.lock(node)
    assert cache.num_evictable_pages == 0
    cache.unlock(node)
    assert cache.num_evictable_pages == 3


def test_uncounted_match_adds_no_hits_or_pin_hits():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2])
    pin_id = cache.pin("a", [1, 2])
    before = cache.stats()["namespaces"]["a"]
    assert cache.match_prefix("a", [1, 2, 3], is_counted=False).length == 2
    assert cache.stats()["namespaces"]["a"] == before and cache.pin_info(pin_id)["hits"] == 0


def test_repeated_lock_unlock_of_a_leaf_keeps_eviction_working():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2])
    node = cache.match_prefix("a", [1, 2]).node
    for _ in range(5):  # each unlock re-queues the same leaf with the same time
        cache.lock(node)
        cache.unlock(node)
    cache_tokens(cache, pool, "a", [3])
    assert cache.evict(3) == 3 and pool.num_free_pages == 64
