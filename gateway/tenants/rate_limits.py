"""RateLimiter: per-tenant requests-per-minute and tokens-per-minute, as OpenAI enforces them.

Each limit is a token bucket that holds at most one minute's allowance and refills
continuously (limit / 60 per second). A request is admitted only if BOTH buckets can
pay for it (requests: 1; tokens: its prompt tokens plus its max_tokens, OpenAI's
estimate); otherwise nothing is taken and `RateLimited` says when it would fit. When
the request finishes, `settle` refunds what the estimate over-charged (the completion
was shorter than max_tokens), so the bucket ends up charged with the tokens used.

A limit of None or <= 0 is no limit: that bucket is not kept and its headers are not sent.
Runs on the event loop only (no locking needed). `window_s` is the "minute" (60; tests scale it).

State is per process unless `shared` (SharedBuckets, edge replicas behind one Redis) is given:
then `charge` takes from the fleet's buckets in Redis, the same buckets with the same rules, so
N replicas allow the limit between them, not N x it; when Redis is away it takes from this
process's own buckets instead (each replica then allows the limit on its own) until Redis returns.

`RateLimitState.headers()` are OpenAI's: x-ratelimit-{limit,remaining,reset}-{requests,tokens};
the reset values are durations like "1s", "6m0s", "250ms" (the time until the bucket is full).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.shared_state.buckets import Levels, SharedBuckets

WINDOW_S = 60.0


@dataclass
class Bucket:
    limit: int  # per window (a minute)
    level: float
    updated_s: float
    window_s: float = WINDOW_S

    def refill(self, now_s: float) -> None:
        self.level = min(float(self.limit), self.level + (now_s - self.updated_s) * self.limit / self.window_s)
        self.updated_s = now_s

    def wait_s(self, amount: float) -> float:
        """Seconds until `amount` fits (0 if it fits now; inf if it never can)."""
        if amount <= self.level:
            return 0.0
        if amount > self.limit:
            return math.inf
        return (amount - self.level) * self.window_s / self.limit

    def reset_s(self) -> float:
        return (self.limit - self.level) * self.window_s / self.limit


@dataclass(frozen=True)
class RateLimitState:
    """What the headers report after a decision: limits, what remains, seconds until full."""

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests_s: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens_s: float | None = None
    is_shared: bool = False  # charged to the fleet's buckets in Redis (settle refunds there)

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.limit_requests is not None:
            out["x-ratelimit-limit-requests"] = str(self.limit_requests)
            out["x-ratelimit-remaining-requests"] = str(self.remaining_requests)
            out["x-ratelimit-reset-requests"] = format_duration(self.reset_requests_s)
        if self.limit_tokens is not None:
            out["x-ratelimit-limit-tokens"] = str(self.limit_tokens)
            out["x-ratelimit-remaining-tokens"] = str(self.remaining_tokens)
            out["x-ratelimit-reset-tokens"] = format_duration(self.reset_tokens_s)
        return out


class RateLimited(Exception):
    """Refused: `retry_after_s` until it would fit (inf: the request alone exceeds a limit)."""

    def __init__(self, state: RateLimitState, retry_after_s: float, which: str) -> None:
        super().__init__(f"rate limit on {which} reached")
        self.state, self.retry_after_s, self.which = state, retry_after_s, which


def format_duration(seconds: float | None) -> str:
    """OpenAI's reset format: "250ms" under a second, "12s", "6m0s", "1h2m3s"."""
    seconds = max(0.0, seconds or 0.0)
    if seconds < 1:
        return f"{int(round(seconds * 1000))}ms"
    whole = int(math.ceil(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def effective(limit: int | None, default: int | None) -> int | None:
    """The tenant's own limit, else the default; None or <= 0 means unlimited."""
    value = limit if limit is not None else default
    return value if value is not None and value > 0 else None


class RateLimiter:
    def __init__(self, default_rpm: int | None = None, default_tpm: int | None = None,
                 clock: Callable[[], float] = time.monotonic, *, window_s: float = WINDOW_S,
                 shared: SharedBuckets | None = None) -> None:
        self.default_rpm, self.default_tpm = default_rpm, default_tpm
        self.window_s = window_s
        self.shared = shared
        self._clock = clock
        self._buckets: dict[tuple[int, str], Bucket] = {}

    async def charge(self, tenant_id: int, rpm: int | None, tpm: int | None, num_tokens: int) -> RateLimitState:
        """`acquire` on the fleet's buckets (with `shared`, while Redis answers), else on this process's."""
        from gateway.shared_state.link import SharedStateUnavailable

        limits = effective(rpm, self.default_rpm), effective(tpm, self.default_tpm)
        if self.shared is None or limits == (None, None):
            return self.acquire(tenant_id, rpm, tpm, num_tokens)
        try:
            levels = await self.shared.take(tenant_id, *limits, num_tokens)
        except SharedStateUnavailable:
            return self.acquire(tenant_id, rpm, tpm, num_tokens)
        return self._shared_decision(levels, *limits, num_tokens)

    def _shared_decision(self, levels: Levels, rpm: int | None, tpm: int | None, num_tokens: int) -> RateLimitState:
        """The state (or RateLimited) of a decision SharedBuckets made, by the same bucket rules."""
        now = self._clock()
        requests = Bucket(rpm, levels.requests, now, self.window_s) if levels.requests is not None else None
        tokens = Bucket(tpm, levels.tokens, now, self.window_s) if levels.tokens is not None else None
        state = self._state(requests, tokens, is_shared=True)
        if levels.is_taken:
            return state
        waits = [(b.wait_s(amount), which) for b, amount, which in
                 ((requests, 1, "requests"), (tokens, num_tokens, "tokens")) if b is not None]
        worst_s, which = max(waits, default=(0.0, ""))
        raise RateLimited(state, max(worst_s, 1e-3), which)

    def acquire(self, tenant_id: int, rpm: int | None, tpm: int | None, num_tokens: int) -> RateLimitState:
        """Take 1 request and `num_tokens` tokens, or raise RateLimited (taking nothing)."""
        now = self._clock()
        requests = self._bucket(tenant_id, "requests", effective(rpm, self.default_rpm), now)
        tokens = self._bucket(tenant_id, "tokens", effective(tpm, self.default_tpm), now)
        waits = [(b.wait_s(amount), which) for b, amount, which in
                 ((requests, 1, "requests"), (tokens, num_tokens, "tokens")) if b is not None]
        worst_s, which = max(waits, default=(0.0, ""))
        if worst_s > 0:
            raise RateLimited(self._state(requests, tokens), worst_s, which)
        if requests is not None:
            requests.level -= 1
        if tokens is not None:
            tokens.level -= num_tokens
        return self._state(requests, tokens)

    def settle(self, tenant_id: int, num_charged: int, num_used: int, state: RateLimitState | None = None) -> None:
        """Refund tokens charged but not used (never charges more than was charged), to the buckets
        that `state` (the charge's RateLimitState) says were charged: the fleet's or this process's."""
        if state is not None and state.is_shared:
            if self.shared is not None and num_used < num_charged:
                self.shared.refund(tenant_id, state.limit_tokens, num_charged - num_used)
            return
        bucket = self._buckets.get((tenant_id, "tokens"))
        if bucket is not None and num_used < num_charged:
            bucket.refill(self._clock())
            bucket.level = min(float(bucket.limit), bucket.level + num_charged - num_used)

    def _bucket(self, tenant_id: int, kind: str, limit: int | None, now: float) -> Bucket | None:
        key = (tenant_id, kind)
        if limit is None:
            self._buckets.pop(key, None)
            return None
        bucket = self._buckets.get(key)
        if bucket is None or bucket.limit != limit:  # a changed limit starts full at the new size
            bucket = self._buckets[key] = Bucket(limit, float(limit), now, self.window_s)
        bucket.refill(now)
        return bucket

    @staticmethod
    def _state(requests: Bucket | None, tokens: Bucket | None, is_shared: bool = False) -> RateLimitState:
        return RateLimitState(
            limit_requests=requests.limit if requests else None,
            remaining_requests=max(0, int(requests.level)) if requests else None,
            reset_requests_s=requests.reset_s() if requests else None,
            limit_tokens=tokens.limit if tokens else None,
            remaining_tokens=max(0, int(tokens.level)) if tokens else None,
            reset_tokens_s=tokens.reset_s() if tokens else None,
            is_shared=is_shared,
        )
