"""Tenants' limits shared through a real Redis (gateway/shared_state/), by two "replicas" in one test:
two TenantLimits / RateLimiters, each on its own RedisLink, as two edge processes would be.

Shown here without a model (the two-server proof is tests/e2e/test_edge_replicas.py): slots and
buckets hold across replicas, a lease that is not refreshed comes back, a refund lands in the
shared bucket, Redis away means local limits with one WARNING and no error, and sharing resumes
when it returns; cold routing keys' owners are agreed first-come.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from gateway.shared_state import RedisLink, SharedBuckets, SharedOwners, SharedSlots, SharedStateUnavailable
from gateway.tenants.limits import TenantLimits
from gateway.tenants.rate_limits import RateLimited, RateLimiter

LEASE_S = 0.6


@pytest.fixture()
def redis_url(redis_server):
    """The module's Redis, running and empty."""
    if not redis_server.is_running:
        redis_server.start()
    client = redis_server.client()
    client.flushall()
    client.close()
    return redis_server.url


async def replica(url: str, *, lease_s: float = LEASE_S, retry_interval_s: float = 0.3):
    """One replica's limits on its own connection to Redis."""
    link = RedisLink(url, retry_interval_s=retry_interval_s, timeout_s=5.0)  # a busy machine is not Redis away
    slots = SharedSlots(link, lease_s=lease_s)
    limits = TenantLimits(64, shared=slots)
    rates = RateLimiter(window_s=600.0, shared=SharedBuckets(link, window_s=600.0))
    return link, limits, rates


async def test_concurrency_slots_hold_across_replicas_and_a_release_frees_one(redis_url):
    link_a, a, _ = await replica(redis_url)
    link_b, b, _ = await replica(redis_url)
    try:
        held = [await a.acquire(1, 3), await b.acquire(1, 3), await a.acquire(1, 3)]
        assert all(slot is not None and slot.lease for slot in held)
        assert await b.acquire(1, 3) is None and b.num_active(1) == 1  # refused: nothing more kept locally either
        assert await b.acquire(2, 3) is not None  # another tenant has its own slots
        a.release_slot(held[0])
        await a.shared.close()  # waits for the release's ZREM
        assert a.num_active(1) == 1 and await b.acquire(1, 3) is not None
    finally:
        await link_a.close()
        await link_b.close()


async def test_a_dead_replicas_leases_come_back_within_the_lease_and_the_heartbeat_keeps_live_ones(redis_url):
    link_a, a, _ = await replica(redis_url)
    link_b, b, _ = await replica(redis_url)
    try:
        assert await a.acquire(1, 2) and await b.acquire(1, 2)
        a.shared._heartbeat.cancel()  # replica A "dies": its lease is never refreshed nor released
        started = time.monotonic()
        assert await b.acquire(1, 2) is None
        while await b.acquire(1, 2) is None:
            assert time.monotonic() - started < LEASE_S + 0.5, "a dead replica's lease outlived the lease"
            await asyncio.sleep(0.05)
        # B's own two leases are refreshed by its heartbeat: well past a lease, B's slots are still taken.
        await asyncio.sleep(2.5 * LEASE_S)
        assert await b.acquire(1, 2) is None and b.shared.num_held() == 2
    finally:
        await link_a.close()
        await link_b.close()


async def test_rate_buckets_are_shared_and_a_refund_lands_in_the_shared_bucket(redis_url):
    link_a, _, a = await replica(redis_url)
    link_b, _, b = await replica(redis_url)
    try:
        states = [await (a if i % 2 else b).charge(1, 5, 1000, 100) for i in range(5)]
        assert all(state.is_shared for state in states) and states[-1].remaining_requests == 0
        with pytest.raises(RateLimited) as refused:
            await a.charge(1, 5, 1000, 100)
        assert refused.value.which == "requests" and 0 < refused.value.retry_after_s <= 120
        assert refused.value.state.headers()["x-ratelimit-remaining-requests"] == "0"
        assert (await a.charge(2, 5, 1000, 100)).remaining_requests == 4  # another tenant's buckets

        state = await b.charge(3, None, 1000, 600)
        assert state.remaining_tokens == 400
        b.settle(3, 600, 150, state)  # 450 unused tokens go back to the fleet's bucket
        await b.shared.close()
        assert (await a.charge(3, None, 1000, 0)).remaining_tokens == 850
        with pytest.raises(RateLimited) as too_big:
            await a.charge(3, None, 1000, 1001)  # more than the limit: never fits
        assert too_big.value.retry_after_s == float("inf")
    finally:
        await link_a.close()
        await link_b.close()


async def test_redis_away_means_local_limits_one_warning_and_sharing_again_when_it_returns(
        redis_server, redis_url, caplog):
    link_a, slots_a, a = await replica(redis_url)
    link_b, _, b = await replica(redis_url)
    caplog.set_level(logging.INFO, logger="gateway.shared_state")
    try:
        assert (await a.charge(1, 4, None, 1)).is_shared and (await b.charge(1, 4, None, 1)).is_shared
        redis_server.stop()
        local = [await a.charge(1, 4, None, 1) for _ in range(4)]  # A's own bucket: a fresh 4
        assert not any(state.is_shared for state in local)
        with pytest.raises(RateLimited):
            await a.charge(1, 4, None, 1)
        slot = await slots_a.acquire(1, 2)
        assert slot is not None and slot.lease is None  # counted locally only
        downs = [r for r in caplog.records if r.levelno == logging.WARNING and "unavailable" in r.getMessage()]
        assert len(downs) == 1, [r.getMessage() for r in caplog.records]

        redis_server.start()
        deadline = time.monotonic() + 5
        while not (await a.charge(9, 1000, None, 1)).is_shared:  # the circuit retries every 0.3 s
            assert time.monotonic() < deadline, "the replica never shared again after Redis returned"
            await asyncio.sleep(0.1)
        assert len([r for r in caplog.records if "is back" in r.getMessage()]) == 1
        shared = [await (a if i % 2 else b).charge(1, 4, None, 1) for i in range(4)]  # the fresh Redis's 4
        assert all(state.is_shared for state in shared) and shared[-1].remaining_requests == 0
        with pytest.raises(RateLimited):
            await b.charge(1, 4, None, 1)
    finally:
        await link_a.close()
        await link_b.close()


async def test_the_circuit_fails_fast_while_open(redis_server, redis_url):
    link = RedisLink(redis_url, retry_interval_s=30.0, timeout_s=0.5)
    try:
        redis_server.stop()
        with pytest.raises(SharedStateUnavailable):
            await link.call(lambda redis: redis.ping())
        started = time.monotonic()
        for _ in range(100):
            with pytest.raises(SharedStateUnavailable):
                await link.call(lambda redis: redis.ping())
        assert time.monotonic() - started < 0.5 and not link.is_up  # no socket touched
    finally:
        await link.close()


async def test_cold_routing_keys_get_one_owner_for_every_replica(redis_url):
    link_a, link_b = RedisLink(redis_url), RedisLink(redis_url)
    a, b = SharedOwners(link_a, ttl_s=0.5), SharedOwners(link_b, ttl_s=0.5)
    try:
        assert await a.get("tenant:1|abc") is None
        assert await a.claim("tenant:1|abc", "node0") == "node0"
        assert await b.claim("tenant:1|abc", "node1") == "node0"  # the first claim wins
        assert await b.get("tenant:1|abc") == "node0"
        await b.forget("tenant:1|abc")
        assert await b.claim("tenant:1|abc", "node1") == "node1"
        await asyncio.sleep(0.7)
        assert await a.get("tenant:1|abc") is None  # expired: the next claim decides again
    finally:
        await link_a.close()
        await link_b.close()
