"""TenantLimits: how many requests each tenant may have in flight at once.

A chat run takes one slot when it is admitted and gives it back when it
finishes (gateway/generation/run.py, GenerationRun.admit / GenerationRun.finish).

With `shared` (SharedSlots, edge replicas behind one Redis) a slot is two things: this process's
count, as without it, and a lease in Redis that every replica counts against the same limit.
A replica's own requests are a subset of the fleet's, so its count never refuses what the
shared one admits; when Redis is away the shared part is skipped (the run's Slot has no lease)
and the replica enforces the limit on its own until Redis returns. Slots taken while Redis was
away are not in Redis when it returns: until they finish, the fleet may exceed the limit by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.shared_state.slots import SharedSlots


@dataclass(frozen=True)
class Slot:
    """One admitted request's slot: the tenant's, and its Redis lease (None: counted here only)."""

    tenant_id: int
    lease: str | None = None


class TenantLimits:
    """Per-tenant concurrency limits: a non-blocking try_acquire/release pair per tenant (this process),
    and `acquire`/`release_slot` (this process and, with `shared`, every replica).

    A tenant whose `max_concurrency` is None or <= 0 gets `default_limit`.
    Runs on the event loop only (no locking needed).
    """

    def __init__(self, default_limit: int, shared: SharedSlots | None = None) -> None:
        self._default_limit = default_limit
        self._num_active: dict[int, int] = {}
        self.shared = shared

    def limit_for(self, max_concurrency: int | None) -> int:
        return max_concurrency if max_concurrency and max_concurrency > 0 else self._default_limit

    def try_acquire(self, tenant_id: int, max_concurrency: int | None) -> bool:
        limit = self.limit_for(max_concurrency)
        active = self._num_active.get(tenant_id, 0)
        if active >= limit:
            return False
        self._num_active[tenant_id] = active + 1
        return True

    def release(self, tenant_id: int) -> None:
        active = self._num_active.get(tenant_id, 0)
        if active <= 0:
            raise RuntimeError(f"release without acquire for tenant {tenant_id}")
        if active == 1:
            del self._num_active[tenant_id]
        else:
            self._num_active[tenant_id] = active - 1

    async def acquire(self, tenant_id: int, max_concurrency: int | None) -> Slot | None:
        """A slot (this process's, then the fleet's), or None when either is full (nothing kept)."""
        from gateway.shared_state.link import SharedStateUnavailable

        if not self.try_acquire(tenant_id, max_concurrency):
            return None
        if self.shared is None:
            return Slot(tenant_id)
        try:
            lease = await self.shared.try_acquire(tenant_id, self.limit_for(max_concurrency))
        except SharedStateUnavailable:
            return Slot(tenant_id)  # Redis away: this process's count alone
        except BaseException:
            self.release(tenant_id)
            raise
        if lease is None:
            self.release(tenant_id)
            return None
        return Slot(tenant_id, lease)

    def release_slot(self, slot: Slot) -> None:
        """Give back what `acquire` took (the lease in the background, never waiting on Redis)."""
        self.release(slot.tenant_id)
        if slot.lease is not None and self.shared is not None:
            self.shared.release(slot.tenant_id, slot.lease)

    def num_active(self, tenant_id: int) -> int:
        return self._num_active.get(tenant_id, 0)
