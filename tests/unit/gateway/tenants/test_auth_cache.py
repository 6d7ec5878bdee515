"""AuthCache: fresh within the TTL, stale-if-error up to TTL + max_stale, invalidated by key id, bounded."""

from __future__ import annotations

import pytest

from gateway.tenants.auth_cache import AuthCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entry_is_fresh_within_ttl_then_only_stale_then_gone():
    clock = Clock()
    cache = AuthCache(ttl_s=30, max_stale_s=600, clock=clock)
    cache.store("digest", "caller", api_key_id=7)
    clock.now = 29
    assert cache.lookup_fresh("digest") == "caller"
    clock.now = 31
    assert cache.lookup_fresh("digest") is None
    assert cache.lookup_stale("digest") == "caller"
    clock.now = 631
    assert cache.lookup_stale("digest") is None


def test_zero_ttl_is_never_fresh_but_serves_while_the_database_is_down():
    cache = AuthCache(ttl_s=0, max_stale_s=600, clock=Clock())
    cache.store("digest", "caller", api_key_id=1)
    assert cache.lookup_fresh("digest") is None
    assert cache.lookup_stale("digest") == "caller"


def test_invalidate_drops_every_entry_of_the_key_and_forget_drops_one_digest():
    cache = AuthCache(ttl_s=30, max_stale_s=600, clock=Clock())
    cache.store("a", "caller-a", api_key_id=1)
    cache.store("b", "caller-b", api_key_id=2)
    assert cache.invalidate(1) == 1
    assert cache.lookup_stale("a") is None and cache.lookup_fresh("b") == "caller-b"
    cache.forget("b")
    assert cache.num_entries == 0


def test_oldest_entry_goes_first_past_max_entries():
    cache = AuthCache(ttl_s=30, max_stale_s=0, max_entries=2, clock=Clock())
    for index in range(3):
        cache.store(f"d{index}", index, api_key_id=index)
    assert [cache.lookup_fresh(f"d{index}") for index in range(3)] == [None, 1, 2]


def test_bad_limits_are_refused():
    with pytest.raises(ValueError):
        AuthCache(ttl_s=-1, max_stale_s=0)
