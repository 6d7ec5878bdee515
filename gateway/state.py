"""GatewayState: everything the app builds at startup, held on `app.state.gw`, built in one constructor.

Nothing here is a module global: the lifespan (gateway/main.py, `build_state`) builds every
service first and then one GatewayState from them; tests build their own apps. Handlers reach the
one service they use through a typed dependency (gateway/deps.py: RequestPathDep, PreparerDep,
SessionDep, ...); the request path itself (gateway/generation/path.py) is handed only its own
collaborators, never this object.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine as DbEngine
    from sqlalchemy.orm import Session, sessionmaker

    from engine import Engine
    from gateway.canonicalize.encode_cache import EncodeCache
    from gateway.db.log_writer import LogWriter
    from gateway.db.side_writer import SideWriter
    from gateway.generation.path import RequestPath
    from gateway.insight.counterfactual import CanonicalShadow
    from gateway.insight.engine_snapshots import EngineSnapshotter
    from gateway.insight.metrics import Metrics
    from gateway.pins.service import Pinner
    from gateway.prompt_templates import TemplateRegistry
    from gateway.routing.backend import BackendRouter
    from gateway.routing.load import LoadTracker
    from gateway.routing.prompt_model import PromptModel
    from gateway.settings import Settings
    from gateway.shared_state import SharedState
    from gateway.tenants.auth_cache import AuthCache
    from gateway.tenants.limits import TenantLimits


@dataclass(frozen=True)
class GatewayState:
    """The app's long-lived parts.

    `engine` is None when the embedded engine is disabled (remote-only; `prompt_model` then comes
    from the remotes' model files, routing/prompt_model.py), and so is `snapshotter` (it samples the
    embedded engine); with no remotes either, `router` and `prompt_model` are None too and every
    generation gets 503. The other parts are always there.
    """

    settings: Settings
    db_engine: DbEngine
    session_factory: sessionmaker[Session]
    engine: Engine | None
    prompt_model: PromptModel | None  # tokenizer and context: the engine's, or the remotes' model files
    encode_cache: EncodeCache | None  # the prompt model's tokenizer, shared by the request path and the canonical shadow
    templates: TemplateRegistry
    metrics: Metrics
    log_writer: LogWriter
    side_writer: SideWriter  # best-effort writes off the request path
    canonical_shadow: CanonicalShadow | None  # None: off (settings.canonical_shadow)
    snapshotter: EngineSnapshotter | None  # samples the embedded engine's stats into the database
    router: BackendRouter | None
    path: RequestPath  # the one request path every wire format starts its requests on
    pins: Pinner  # pinned prefixes: the engine's pins and their rows
    auth_cache: AuthCache
    tenant_limits: TenantLimits
    in_flight: LoadTracker  # admitted, unfinished requests (GET /v1/load)
    admin_key_generated: str | None
    started_at: int
    background_tasks: set[asyncio.Task]
    shared: SharedState | None = None  # limits shared by edge replicas through Redis (None: without redis_url)

    @property
    def model_id(self) -> str:
        """The id clients see in /v1/models and responses: the first served model, else the configured one."""
        return self.path.models.ids[0] if self.path.models.ids else self.settings.engine.model
