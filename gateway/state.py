"""GatewayState: everything the app builds at startup, held on `app.state.gw` and injected into handlers.

Nothing here is a module global: the lifespan (gateway/main.py) builds one
GatewayState per app, tests build their own, and handlers reach it through
`StateDep` (gateway/deps.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.routing.base import BackendRouter
    from gateway.settings import Settings


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


@dataclass
class GatewayState:
    """The app's long-lived parts. `engine` is None when the embedded engine is disabled (remote-only)."""

    settings: Settings
    db_engine: Any
    session_factory: sessionmaker[Session]
    engine: Any = None
    templates: Any = None
    log_writer: Any = None
    shadow: Any = None
    metrics: Any = None
    miss_attributor: Any = None
    snapshotter: Any = None  # gateway.db.engine_snapshots.EngineSnapshotter, when the embedded engine runs
    router: BackendRouter | None = None
    pins: Any = None  # gateway.pins.service.PinBook, created by the pins service on first use
    auth_cache: Any = None  # gateway.tenants.auth_cache.AuthCache; None: every request reads the database
    tenant_limits: TenantLimits = field(default_factory=lambda: TenantLimits(64))
    admin_key_generated: str | None = None
    started_at: int = field(default_factory=lambda: int(time.time()))
    background_tasks: set[asyncio.Task] = field(default_factory=set)

    @property
    def model_id(self) -> str:
        """The id clients see in /v1/models and responses: the embedded engine's, else the first remote's."""
        if self.engine is not None:
            return self.engine.model_id
        if self.settings.remotes:
            return self.settings.remotes[0].model
        return self.settings.engine.model
