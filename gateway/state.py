"""GatewayState: everything the app builds at startup, held on `app.state.gw` and injected into handlers.

Nothing here is a module global: the lifespan (gateway/main.py) builds one
GatewayState per app, tests build their own, and handlers reach it through
`StateDep` (gateway/deps.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.routing.load import LoadTracker
from gateway.tenants.limits import TenantLimits
from gateway.tenants.rate_limits import RateLimiter

if TYPE_CHECKING:
    from sqlalchemy import Engine as DbEngine
    from sqlalchemy.orm import Session, sessionmaker

    from engine import Engine
    from gateway.insight.engine_snapshots import EngineSnapshotter
    from gateway.canonicalize.encode_cache import EncodeCache
    from gateway.db.log_writer import LogWriter
    from gateway.db.side_writer import SideWriter
    from gateway.insight.counterfactual import CanonicalShadow
    from gateway.insight.metrics import Metrics
    from gateway.insight.miss_cause import MissAttributor
    from gateway.insight.shadow import ShadowIndex
    from gateway.pins.service import PinBook
    from gateway.prompt_templates import TemplateRegistry
    from gateway.routing.base import BackendRouter
    from gateway.routing.prompt_model import PromptModel
    from gateway.settings import Settings
    from gateway.tenants.auth_cache import AuthCache


@dataclass
class GatewayState:
    """The app's long-lived parts.

    `engine` is None when the embedded engine is disabled (remote-only; `prompt_model` then comes from
    the remotes' model files, routing/prompt_model.py), and so are
    `snapshotter` (it samples the embedded engine) and, with no remotes either, `router`.
    The lifespan fills `templates`, `log_writer`, `shadow`, `metrics`, `miss_attributor`
    and `auth_cache` before the app serves; they are None only in a state a test builds
    without them. `pins` is created by the pins service on first use.
    """

    settings: Settings
    db_engine: DbEngine
    session_factory: sessionmaker[Session]
    engine: Engine | None = None
    templates: TemplateRegistry | None = None
    encode_cache: EncodeCache | None = None  # the engine's tokenizer, shared by the request path and the canonical shadow
    log_writer: LogWriter | None = None
    shadow: ShadowIndex | None = None
    canonical_shadow: CanonicalShadow | None = None  # None: off (settings.canonical_shadow)
    metrics: Metrics | None = None
    miss_attributor: MissAttributor | None = None
    snapshotter: EngineSnapshotter | None = None
    router: BackendRouter | None = None
    prompt_model: PromptModel | None = None  # tokenizer and context: the engine's, or the remotes' model files
    pins: PinBook | None = None
    auth_cache: AuthCache | None = None  # None: every request reads the database
    side_writer: SideWriter | None = None  # best-effort writes off the request path; None: on it
    tenant_limits: TenantLimits = field(default_factory=lambda: TenantLimits(64))
    rate_limiter: RateLimiter = field(default_factory=RateLimiter)
    admin_key_generated: str | None = None
    in_flight: LoadTracker = field(default_factory=LoadTracker)  # admitted, unfinished chats (GET /v1/load)
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
