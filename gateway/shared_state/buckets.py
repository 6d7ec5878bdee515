"""SharedBuckets: tenants' requests- and tokens-per-window token buckets, shared by every edge replica.

The same buckets as gateway/tenants/rate_limits.py (each holds one window's allowance and refills
continuously at limit / window; a request is taken only if BOTH buckets can pay; a refund never
fills past the limit; a changed limit starts full at the new size), kept in Redis hashes
`<prefix>:rate:<tenant id>:{requests,tokens}` (fields limit, level, updated ms) and changed only
by Lua scripts, so a check-and-take is atomic across replicas. Time is Redis's own clock. A hash
expires one window after its last write: by then the bucket is full, which is what a missing
hash means.

    levels = await buckets.take(tenant_id, rpm, tpm, num_tokens)   # raises SharedStateUnavailable
    levels.is_taken, levels.requests, levels.tokens                  # levels after the decision
    buckets.refund(tenant_id, tpm, num_tokens)                       # in the background

A limit of None or <= 0 is no limit: that bucket is not kept (its hash is deleted), as locally.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gateway.shared_state.link import RedisLink, SharedStateUnavailable

# Shared by both scripts: the level of bucket KEYS[i] at `now` for `limit` (nil: no limit).
LEVEL = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local window_ms = tonumber(ARGV[1])
local function level_of(key, limit)
  if limit <= 0 then
    redis.call('DEL', key)
    return nil
  end
  local v = redis.call('HMGET', key, 'limit', 'level', 'updated')
  if not v[1] or tonumber(v[1]) ~= limit then
    return limit
  end
  return math.min(limit, tonumber(v[2]) + (now - tonumber(v[3])) * limit / window_ms)
end
local function store(key, limit, level)
  redis.call('HSET', key, 'limit', limit, 'level', tostring(level), 'updated', tostring(now))
  redis.call('PEXPIRE', key, math.ceil(window_ms))
end
"""

# KEYS: requests bucket, tokens bucket; ARGV: window ms, rpm, tpm, tokens.
# Returns {taken (1/0), requests level or '', tokens level or ''} (levels after the decision).
TAKE = LEVEL + """
local rpm, tpm, amount = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local requests = level_of(KEYS[1], rpm)
local tokens = level_of(KEYS[2], tpm)
local fits = (requests == nil or requests >= 1) and (tokens == nil or tokens >= amount)
if fits then
  if requests ~= nil then requests = requests - 1 end
  if tokens ~= nil then tokens = tokens - amount end
end
if requests ~= nil then store(KEYS[1], rpm, requests) end
if tokens ~= nil then store(KEYS[2], tpm, tokens) end
return {fits and 1 or 0, requests and tostring(requests) or '', tokens and tostring(tokens) or ''}
"""

# KEYS: tokens bucket; ARGV: window ms, tpm, tokens to give back. A missing hash is full already.
REFUND = LEVEL + """
local tpm, amount = tonumber(ARGV[2]), tonumber(ARGV[3])
if tpm <= 0 or redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local level = level_of(KEYS[1], tpm)
store(KEYS[1], tpm, math.min(tpm, level + amount))
return 1
"""


@dataclass(frozen=True)
class Levels:
    """One decision: whether the request was taken, and each kept bucket's level after it (None: no limit)."""

    is_taken: bool
    requests: float | None
    tokens: float | None


def limit_arg(limit: int | None) -> int:
    return limit if limit is not None and limit > 0 else 0


class SharedBuckets:
    """Per-tenant token buckets in Redis (see the module docstring). Event loop only."""

    def __init__(self, link: RedisLink, *, window_s: float = 60.0, key_prefix: str = "radixgate") -> None:
        self.link = link
        self.window_ms = window_s * 1000
        self.key_prefix = key_prefix
        self._take = link.redis.register_script(TAKE)
        self._refund = link.redis.register_script(REFUND)
        self._refunds: set[asyncio.Task] = set()

    def keys(self, tenant_id: int) -> list[str]:
        return [f"{self.key_prefix}:rate:{tenant_id}:requests", f"{self.key_prefix}:rate:{tenant_id}:tokens"]

    async def take(self, tenant_id: int, rpm: int | None, tpm: int | None, num_tokens: int) -> Levels:
        """Take 1 request and `num_tokens` tokens if both fit (else nothing). `rpm`/`tpm` are the
        effective limits (None: none). Raises SharedStateUnavailable."""
        args = [repr(self.window_ms), limit_arg(rpm), limit_arg(tpm), num_tokens]
        taken, requests, tokens = await self.link.call(
            lambda redis: self._take(keys=self.keys(tenant_id), args=args))
        return Levels(bool(taken), level(requests), level(tokens))

    def refund(self, tenant_id: int, tpm: int | None, num_tokens: int) -> None:
        """Give `num_tokens` back to the tenant's tokens bucket, in the background (lost if Redis is away)."""
        if num_tokens <= 0 or limit_arg(tpm) == 0:
            return
        args = [repr(self.window_ms), limit_arg(tpm), num_tokens]

        async def run() -> None:
            try:
                await self.link.call(lambda redis: self._refund(keys=self.keys(tenant_id)[1:], args=args))
            except SharedStateUnavailable:
                pass

        try:
            task = asyncio.get_running_loop().create_task(run())
        except RuntimeError:
            return
        self._refunds.add(task)
        task.add_done_callback(self._refunds.discard)

    async def close(self) -> None:
        """Wait for the refunds under way."""
        if self._refunds:
            await asyncio.gather(*self._refunds, return_exceptions=True)


def level(value: bytes | str) -> float | None:
    text = value.decode() if isinstance(value, bytes) else value
    return float(text) if text else None
