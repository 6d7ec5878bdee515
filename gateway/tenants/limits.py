"""TenantLimits: how many requests each tenant may have in flight at once.

A chat run takes one slot when it is admitted and gives it back when it
finishes (gateway/generation/run.py, GenerationRun.admit / GenerationRun.finish).
"""

from __future__ import annotations


class TenantLimits:
    """Per-tenant concurrency limits: a non-blocking try_acquire/release pair per tenant.

    A tenant whose `max_concurrency` is None or <= 0 gets `default_limit`.
    Runs on the event loop only (no locking needed).
    """

    def __init__(self, default_limit: int) -> None:
        self._default_limit = default_limit
        self._num_active: dict[int, int] = {}

    def try_acquire(self, tenant_id: int, max_concurrency: int | None) -> bool:
        limit = max_concurrency if max_concurrency and max_concurrency > 0 else self._default_limit
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

    def num_active(self, tenant_id: int) -> int:
        return self._num_active.get(tenant_id, 0)
