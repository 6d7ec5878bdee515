"""State that several edge replicas share through Redis: tenants' concurrency slots and per-window
buckets, and the owners of cold routing keys. Built only when `settings.redis_url` is set; without
it every replica keeps its own (gateway/tenants/limits.py, rate_limits.py), as a single gateway does.

    shared = build_shared_state(settings)    # None without redis_url
    TenantLimits(default, shared=shared.slots); RateLimiter(..., shared=shared.buckets)
    await shared.close()                     # the app's shutdown

Redis away is never an error of a request: every operation raises SharedStateUnavailable at once
(gateway/shared_state/link.py, a circuit breaker), the caller uses its local state, and sharing
resumes when Redis answers again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.shared_state.buckets import SharedBuckets
from gateway.shared_state.link import RedisLink, SharedStateUnavailable, masked_url
from gateway.shared_state.owners import SharedOwners
from gateway.shared_state.slots import SharedSlots

if TYPE_CHECKING:
    from gateway.settings import Settings

__all__ = ["RedisLink", "SharedBuckets", "SharedOwners", "SharedSlots", "SharedState", "SharedStateUnavailable",
           "build_shared_state", "masked_url"]


@dataclass(frozen=True)
class SharedState:
    """One Redis link and the shared stores on it."""

    link: RedisLink
    slots: SharedSlots
    buckets: SharedBuckets
    owners: SharedOwners

    async def close(self) -> None:
        await self.slots.close()
        await self.buckets.close()
        await self.link.close()


def build_shared_state(settings: Settings) -> SharedState | None:
    """The shared stores on settings.redis_url (None when unset). Connects lazily: a Redis that is
    down at start-up is the same as one that goes down later (local limits, one WARNING)."""
    if not settings.redis_url:
        return None
    shared = settings.shared_limits
    link = RedisLink(settings.redis_url, retry_interval_s=shared.retry_interval_s, timeout_s=shared.timeout_s)
    prefix = shared.key_prefix
    return SharedState(
        link=link,
        slots=SharedSlots(link, lease_s=shared.lease_s, key_prefix=prefix),
        buckets=SharedBuckets(link, window_s=settings.rate_limit_window_s, key_prefix=prefix),
        owners=SharedOwners(link, ttl_s=shared.owner_ttl_s, key_prefix=prefix),
    )
