"""Timed pins of the radix cache (RadixPins.lease): held until their time is up, refreshed by every match
through their whole path, released by expire_pins; and quotas shared between namespaces."""

import pytest

from engine.errors import PinCapacityError, QuotaExceededError
from engine.kv_pool import KVPool
from engine.radix_cache import RadixCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_cache(num_pages=64, max_pinned_pages=None):
    pool = KVPool(num_pages, 1)
    cache = RadixCache(pool, max_pinned_pages)
    cache.clock = Clock()
    return pool, cache


def cache_tokens(cache, pool, namespace, tokens):
    match = cache.match_prefix(namespace, tokens, is_counted=False)
    cache.insert(namespace, tokens, match.pages + pool.allocate(len(tokens) - match.length))


def test_a_lease_holds_its_prefix_until_its_time_is_up_then_it_is_ordinary_cache():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3, 4])
    pin_id = cache.lease("a", [1, 2], ttl_s=300)
    assert cache.pin_info(pin_id)["expires_at"] == 1300.0
    assert cache.evict(100) == 2  # the unpinned tail goes, the leased prefix stays
    cache.clock.now = 1299.0
    assert cache.expire_pins() == 0 and cache.evict(100) == 0
    cache.clock.now = 1300.0
    assert cache.expire_pins() == 1
    assert cache.stats()["pinned_tokens"] == 0 and cache.stats()["num_pins"] == 0
    assert cache.evict(100) == 2 and pool.num_free_pages == pool.num_pages


def test_a_match_through_the_whole_path_refreshes_a_lease_and_a_partial_one_does_not():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3, 4])
    pin_id = cache.lease("a", [1, 2, 3], ttl_s=10)
    cache.clock.now += 8
    cache.match_prefix("a", [1, 2, 9])  # two of the three pinned tokens: no refresh
    assert cache.pin_info(pin_id)["expires_at"] == 1010.0
    cache.match_prefix("a", [1, 2, 3, 4])
    assert cache.pin_info(pin_id)["expires_at"] == 1018.0 and cache.pin_info(pin_id)["hits"] == 1
    cache.clock.now = 1010.0
    assert cache.expire_pins() == 0  # its first expiry passed, but it was refreshed
    cache.clock.now = 1018.0
    assert cache.expire_pins() == 1


def test_leasing_a_leased_prefix_again_extends_the_one_pin_to_the_longer_ttl():
    pool, cache = make_cache()
    cache_tokens(cache, pool, "a", [1, 2, 3, 4])
    first = cache.lease("a", [1, 2], ttl_s=3600)
    cache.clock.now += 100
    assert cache.lease("a", [1, 2], ttl_s=300) == first
    assert cache.pin_info(first)["ttl_s"] == 3600 and cache.pin_info(first)["expires_at"] == 4600.0
    assert cache.stats()["num_pins"] == 1
    longer = cache.lease("a", [1, 2, 3], ttl_s=300)  # another end: another pin, sharing the first's 2 tokens
    assert longer != first and cache.stats()["namespaces"]["a"]["pinned_tokens"] == 3
    cache.unpin(first)
    cache.clock.now = 5000.0
    assert cache.expire_pins() == 1  # the unpinned one's stale entry is skipped
    assert cache.evict(100) == 4


def test_salted_namespaces_share_their_owners_quota_and_the_error_names_it():
    pool, cache = make_cache()
    for namespace in ("t", "t|salt:x"):
        cache_tokens(cache, pool, namespace, [1, 2, 3, 4, 5])
    cache.set_pin_quota("t", 6)
    cache.share_pin_quota("t|salt:x", "t")
    cache.lease("t", [1, 2, 3, 4], ttl_s=60)
    cache.lease("t|salt:x", [1, 2], ttl_s=60)
    with pytest.raises(QuotaExceededError, match=r"'t\|salt:x' \(shared with 't'\).*6 tokens pinned \+ 1 new > quota 6"):
        cache.lease("t|salt:x", [1, 2, 3], ttl_s=60)
    stats = cache.stats()["namespaces"]
    assert stats["t"]["pinned_tokens"] == 4 and stats["t|salt:x"]["pinned_tokens"] == 2
    with pytest.raises(ValueError, match="cannot own one"):
        cache.share_pin_quota("u", "t|salt:x")


def test_a_lease_past_the_caches_cap_changes_nothing_and_bad_ttls_are_refused():
    pool, cache = make_cache(max_pinned_pages=2)
    cache_tokens(cache, pool, "a", [1, 2, 3])
    with pytest.raises(PinCapacityError):
        cache.lease("a", [1, 2, 3], ttl_s=60)
    assert cache.stats()["num_pins"] == 0 and cache.stats()["pinned_tokens"] == 0
    with pytest.raises(ValueError, match="ttl_s > 0"):
        cache.lease("a", [1, 2], ttl_s=0)
