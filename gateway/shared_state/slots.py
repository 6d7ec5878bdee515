"""SharedSlots: tenants' concurrency slots shared by every edge replica, as leases in Redis.

Each tenant has one sorted set, `<prefix>:slots:<tenant id>`: a member per request in flight on any
replica (a lease id), scored by when its lease expires (milliseconds, Redis's own clock, so the
replicas' clocks never matter). Acquire is one Lua script, atomic across replicas: drop the
expired leases, then add this one only if fewer than the limit remain. Each replica refreshes
the leases it holds every `lease_s / 3` (the heartbeat); a replica that dies stops refreshing,
and its slots come back within `lease_s` of its last heartbeat. A release removes its lease
at once (in the background: `release` itself never waits on Redis).

    slots = SharedSlots(link, lease_s=30.0)
    lease = await slots.try_acquire(tenant_id, limit)   # "<replica>:<n>", None (full); raises SharedStateUnavailable
    slots.release(tenant_id, lease)

Invariants: a lease is refreshed only while this replica holds it (`ZADD XX`: a refresh never
brings back a lease that was released or expired); the set's own key expires 2 x lease_s after
its last write, so a tenant that stops sending leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid

from gateway.shared_state.link import RedisLink, SharedStateUnavailable

log = logging.getLogger("gateway.shared_state")

# KEYS[1] the tenant's slot set; ARGV: limit, lease id, lease ms. Returns 1 (taken) or 0 (full).
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_ms = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + lease_ms, ARGV[2])
redis.call('PEXPIRE', KEYS[1], 2 * lease_ms)
return 1
"""

# KEYS[1] a slot set; ARGV: lease ms, then the lease ids this replica holds there.
REFRESH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_ms = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + lease_ms, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], 2 * lease_ms)
return #ARGV - 1
"""


class SharedSlots:
    """Concurrency leases in Redis (see the module docstring). Event loop only."""

    def __init__(self, link: RedisLink, *, lease_s: float = 30.0, key_prefix: str = "radixgate") -> None:
        self.link = link
        self.lease_ms = max(1, int(lease_s * 1000))
        self.key_prefix = key_prefix
        self.replica_id = uuid.uuid4().hex[:12]
        self._numbers = itertools.count(1)
        self._held: dict[int, set[str]] = {}  # tenant id -> the leases this replica holds
        self._acquire = link.redis.register_script(ACQUIRE)
        self._refresh = link.redis.register_script(REFRESH)
        self._heartbeat: asyncio.Task | None = None
        self._releases: set[asyncio.Task] = set()

    def key(self, tenant_id: int) -> str:
        return f"{self.key_prefix}:slots:{tenant_id}"

    async def try_acquire(self, tenant_id: int, limit: int) -> str | None:
        """A new lease on one of the tenant's `limit` slots, or None when all are taken.
        Raises SharedStateUnavailable (the caller then counts on its own)."""
        self._start_heartbeat()
        lease = f"{self.replica_id}:{next(self._numbers)}"
        taken = await self.link.call(
            lambda redis: self._acquire(keys=[self.key(tenant_id)], args=[limit, lease, self.lease_ms]))
        if not taken:
            return None
        self._held.setdefault(tenant_id, set()).add(lease)
        return lease

    def release(self, tenant_id: int, lease: str) -> None:
        """Give the lease back: no longer refreshed from now, removed from Redis in the background
        (if Redis is away, it expires within the lease)."""
        held = self._held.get(tenant_id)
        if held is not None:
            held.discard(lease)
            if not held:
                del self._held[tenant_id]
        try:
            task = asyncio.get_running_loop().create_task(self._remove(tenant_id, lease))
        except RuntimeError:  # no loop (a test's synchronous teardown): the lease expires instead
            return
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _remove(self, tenant_id: int, lease: str) -> None:
        try:
            await self.link.call(lambda redis: redis.zrem(self.key(tenant_id), lease))
        except SharedStateUnavailable:
            pass

    def num_held(self) -> int:
        """Leases this replica holds now."""
        return sum(len(leases) for leases in self._held.values())

    async def refresh(self) -> None:
        """Extend every lease this replica holds to a full lease from now (PING when it holds none,
        so an open circuit is probed, and closed, even with no traffic). Raises SharedStateUnavailable."""
        held = {tenant_id: sorted(leases) for tenant_id, leases in self._held.items() if leases}
        if not held:
            await self.link.call(lambda redis: redis.ping())
            return

        async def run(redis):
            async with redis.pipeline(transaction=False) as pipe:
                for tenant_id, leases in held.items():
                    await self._refresh(keys=[self.key(tenant_id)], args=[self.lease_ms, *leases], client=pipe)
                return await pipe.execute()

        await self.link.call(run)

    def start(self) -> None:
        """Start the heartbeat now (it also probes Redis while this replica holds no lease, so a Redis that
        is away, or back, is noticed with no traffic); without a running loop, at the first acquire."""
        try:
            self._start_heartbeat()
        except RuntimeError:
            pass

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat(), name="redis-slot-heartbeat")

    async def _beat(self) -> None:
        interval_s = self.lease_ms / 3000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.refresh()
            except SharedStateUnavailable:
                pass  # the link logged it once; the leases expire on their own
            except Exception:  # the heartbeat must outlive any one bad beat
                log.exception("refreshing the concurrency leases failed")

    async def close(self) -> None:
        """Stop the heartbeat and wait for the releases under way."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)
