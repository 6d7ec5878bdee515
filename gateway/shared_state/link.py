"""RedisLink: the edge replicas' one connection to Redis, behind a circuit breaker.

    link = RedisLink("redis://127.0.0.1:6379/0", retry_interval_s=5.0, timeout_s=0.5)
    value = await link.call(lambda redis: redis.get("key"))   # raises SharedStateUnavailable

Contracts:
- `call` runs one operation on the redis-py asyncio client; any Redis or socket error (refused,
  reset, timed out) opens the circuit and raises SharedStateUnavailable, so a caller needs one
  except clause and falls back to its local state. A failure is never a 5xx of the caller's.
- While the circuit is open, `call` raises at once, touching no socket, until `retry_interval_s`
  has passed; then exactly one call probes Redis (the others keep failing fast). A probe that
  succeeds closes the circuit: every replica resumes sharing on its own, with no restart.
- Going down and coming back are logged once each (WARNING, INFO), never once per request.
- Runs on the event loop only (the circuit's state needs no lock).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

log = logging.getLogger("gateway.shared_state")

T = TypeVar("T")


class SharedStateUnavailable(Exception):
    """Redis cannot be used right now (down, unreachable, too slow, or the circuit is open)."""


def masked_url(url: str) -> str:
    """The Redis URL with any password replaced by ***, for logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class RedisLink:
    """A redis-py asyncio client with a circuit breaker (see the module docstring)."""

    def __init__(self, url: str, *, retry_interval_s: float = 5.0, timeout_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.retry_interval_s = retry_interval_s
        # One retry on a fresh connection: after Redis restarts, the pooled sockets are dead once.
        self.redis: Redis = Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                           retry=Retry(NoBackoff(), 1), health_check_interval=0)
        self._timeout_s = timeout_s
        self._clock = clock
        self._retry_at: float | None = None  # None: closed (sharing); else when the next probe may run

    @property
    def is_up(self) -> bool:
        """False from a failure until a probe succeeds."""
        return self._retry_at is None

    async def call(self, operation: Callable[[Redis], Awaitable[T]]) -> T:
        """`operation(redis)`'s result; raises SharedStateUnavailable (see the module docstring)."""
        if self._retry_at is not None:
            now = self._clock()
            if now < self._retry_at:
                raise SharedStateUnavailable("Redis is unavailable; using local state")
            self._retry_at = now + self.retry_interval_s  # this call is the one probe until then
        try:
            # Bounded even where a socket timeout does not apply (a pool waiting on a connection).
            result = await asyncio.wait_for(operation(self.redis), timeout=4 * self._timeout_s + 1.0)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            self._trip(exc)
            raise SharedStateUnavailable(f"Redis is unavailable: {exc}") from exc
        if self._retry_at is not None:
            self._retry_at = None
            log.info("Redis at %s is back: tenants' limits are shared across replicas again", masked_url(self.url))
        return result

    def _trip(self, exc: BaseException) -> None:
        was_up = self._retry_at is None
        self._retry_at = self._clock() + self.retry_interval_s
        if was_up:
            log.warning("Redis at %s is unavailable (%s): each replica enforces tenants' limits on its own "
                        "until it returns (retrying every %g s)", masked_url(self.url),
                        type(exc).__name__, self.retry_interval_s)

    async def close(self) -> None:
        try:
            await self.redis.aclose()
        except (RedisError, OSError):
            log.debug("closing the Redis client raised", exc_info=True)
