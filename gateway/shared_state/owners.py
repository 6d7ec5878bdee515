"""SharedOwners: which backend owns a routing key, agreed by every edge replica through Redis.

A key that no node's KV events place yet (a cold prefix) is routed by each replica's own choice;
with several replicas two of them could send the same cold prefix to two nodes and each node
would prefill it. The first replica to route a key records its choice here; the others read it
and follow it, so a cold prefix lands on one node fleet-wide.

    owner = await owners.claim(route_key, chosen)   # the agreed owner: `chosen` if first, else the earlier one
    owner = await owners.get(route_key)             # None: no replica has routed it (or the record expired)
    await owners.forget(route_key)                  # the owner left the fleet: let the next claim decide

Both raise SharedStateUnavailable when Redis is away: the caller then routes on its own choice,
as a single replica does. Records expire `ttl_s` after they were last claimed, so an owner that a
key no longer reaches is forgotten; a claim that finds a record refreshes it (SET NX GET, then
PEXPIRE: one round trip, Redis >= 7).
"""

from __future__ import annotations

from gateway.shared_state.link import RedisLink

# KEYS[1] the record; ARGV: the proposed owner, ttl ms. Returns the owner (the earlier one, else ARGV[1]).
CLAIM = """
local current = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
if current then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return current
end
return ARGV[1]
"""


class SharedOwners:
    """Get / set-if-absent of routing keys' owners, with a TTL (see the module docstring)."""

    def __init__(self, link: RedisLink, *, ttl_s: float = 600.0, key_prefix: str = "radixgate") -> None:
        self.link = link
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.key_prefix = key_prefix
        self._claim = link.redis.register_script(CLAIM)

    def key(self, route_key: str) -> str:
        return f"{self.key_prefix}:owner:{route_key}"

    async def claim(self, route_key: str, backend_name: str) -> str:
        """The key's owner: `backend_name` if no replica recorded one, else the recorded one (its TTL renewed)."""
        owner = await self.link.call(
            lambda redis: self._claim(keys=[self.key(route_key)], args=[backend_name, self.ttl_ms]))
        return owner.decode() if isinstance(owner, bytes) else owner

    async def get(self, route_key: str) -> str | None:
        owner = await self.link.call(lambda redis: redis.get(self.key(route_key)))
        return owner.decode() if isinstance(owner, bytes) else owner

    async def forget(self, route_key: str) -> None:
        await self.link.call(lambda redis: redis.delete(self.key(route_key)))
