"""The app factory and its lifespan. Nothing is built at import time.

    app = create_app(Settings(...), engine=shared_engine)   # tests inject an engine
    uvicorn.run(create_app(), ...)

The lifespan builds, in order: database engine and session factory -> migrations
-> admin key -> Engine (unless injected) -> TemplateRegistry -> Metrics ->
LogWriter (started) -> ShadowIndex -> MissAttributor -> EngineSnapshotter -> Router, then starts
re-warming stored pins in the background (each pin's render has a timeout; serving never waits); shutdown reverses it (the LogWriter flushes what is queued; an
engine the app built is shut down, an injected one is left running).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, AsyncIterator

from fastapi import FastAPI

from gateway.body_limit import BodyLimit
from gateway.errors import install_error_handlers
from gateway.settings import Settings
from gateway.state import GatewayState
from gateway.tenants.auth_cache import AuthCache
from gateway.tenants.limits import TenantLimits
from gateway.tenants.rate_limits import RateLimiter

if TYPE_CHECKING:
    from engine import Engine
    from gateway.routing.router import Router

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, engine: Engine | None = None) -> FastAPI:
    """A FastAPI app serving the OpenAI-compatible API; `engine` (an engine.Engine) is used as-is if given.

    Bodies over settings.limits.max_body_bytes get 413 before routing (BodyLimit); with
    settings.protect_docs the OpenAPI schema and docs pages need the admin key."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gw = await build_state(settings, engine)
        app.state.gw = gw
        try:
            yield
        finally:
            await close_state(gw, owns_engine=engine is None)

    docs = {"openapi_url": None, "docs_url": None, "redoc_url": None} if settings.protect_docs else {}
    app = FastAPI(title="radixgate", version="0.1.0", lifespan=lifespan, **docs)
    install_error_handlers(app)
    include_routers(app)
    if settings.protect_docs:
        from gateway.routes import docs as docs_routes

        app.include_router(docs_routes.router)
    app.add_middleware(BodyLimit, max_body_bytes=settings.limits.max_body_bytes)
    return app


def include_routers(app: FastAPI) -> None:
    from gateway.routes import (
        admin, canonicalize, chat, fleet, metrics, models, pins, responses, stats, template_studio, templates,
    )

    for module in (chat, responses, models, canonicalize, stats, metrics, admin, template_studio, templates, pins, fleet):
        app.include_router(module.router)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict:
        return {"status": "ok"}


async def build_state(settings: Settings, engine: Engine | None) -> GatewayState:
    from gateway.db.migrate import upgrade
    from gateway.db.session import make_engine, make_session_factory
    from gateway.tenants import admin_keys

    await asyncio.to_thread(upgrade, settings.db_url)
    db_engine = make_engine(settings.db_url, pool_size=settings.db_pool_size, pool_timeout_s=settings.db_pool_timeout_s,
                            max_overflow=settings.db_pool_max_overflow)
    session_factory = make_session_factory(db_engine)
    gw = GatewayState(settings=settings, db_engine=db_engine, session_factory=session_factory)
    gw.tenant_limits = TenantLimits(settings.default_tenant_concurrency)
    gw.rate_limiter = RateLimiter(settings.default_tenant_requests_per_minute, settings.default_tenant_tokens_per_minute)
    gw.auth_cache = AuthCache(settings.auth_cache_ttl_s, settings.auth_cache_stale_s)
    gw.admin_key_generated = admin_keys.bootstrap_admin_key(session_factory, settings)
    gw.engine = engine if engine is not None else await start_engine(settings)
    gw.prompt_model = await asyncio.to_thread(prompt_model_for, gw)
    build_services(gw)
    gw.router = build_backends(gw)
    start_monitor(gw)
    if settings.rewarm_pins and gw.engine is not None:
        start_rewarm(gw)
    log.info(
        "radixgate ready on http://%s:%d/v1: model %s, database %s",
        settings.host, settings.port, gw.model_id, safe_url(settings.db_url),
    )
    return gw


async def start_engine(settings: Settings) -> Engine | None:
    """Load the embedded engine (None when disabled) and start its step loop on a background thread."""
    engine = await asyncio.to_thread(load_engine, settings)
    return engine.start() if engine is not None else None


def load_engine(settings: Settings) -> Engine | None:
    """The embedded engine, loaded but not started (None when disabled)."""
    if not settings.engine.enabled:
        return None
    from engine import Engine

    config = settings.engine.to_engine_config()
    log.info("loading model %s on %s (the first load of a GGUF dequantizes it, which is slow)", config.model, config.device)
    engine = Engine(config)
    runner = engine.runner
    log.info("model %s ready: %s on %s, KV cache of %d tokens", runner.loaded_model.model_id,
             str(runner.dtype).removeprefix("torch."), runner.device, runner.pool.num_pages * runner.pool.page_size)
    return engine


def prompt_model_for(gw: GatewayState):
    """The engine's tokenizer and context; with no engine but remotes, the remotes' model files."""
    from gateway.routing import prompt_model

    if gw.engine is not None:
        return prompt_model.from_engine(gw.engine)
    return prompt_model.load_prompt_model(gw.settings) if gw.settings.remotes else None


def build_services(gw: GatewayState) -> None:
    from gateway.db.log_writer import LogWriter
    from gateway.insight.metrics import Metrics
    from gateway.insight.miss_cause import MissAttributor
    from gateway.insight.shadow import ShadowIndex
    from gateway.prompt_templates import TemplateRegistry
    from gateway.db.side_writer import SideWriter

    settings = gw.settings
    gw.templates = TemplateRegistry(settings.resolved_templates_dir(), settings.limits.template_limits())
    gw.metrics = Metrics()
    gw.log_writer = LogWriter(
        gw.session_factory, settings.log_queue_max, settings.log_batch_size, settings.log_flush_interval_s, gw.metrics,
        spool=make_spool(settings),
    )
    gw.log_writer.start()
    gw.side_writer = SideWriter(gw.session_factory)
    page_size = gw.prompt_model.page_size if gw.prompt_model is not None else settings.engine.page_size
    gw.shadow = ShadowIndex(page_size, settings.shadow_max_tokens_per_tenant, settings.shadow_max_namespaces)
    if gw.prompt_model is not None:
        from gateway.canonicalize.encode_cache import EncodeCache

        gw.encode_cache = EncodeCache(gw.prompt_model.tokenizer)
    if settings.canonical_shadow:
        from gateway.insight.counterfactual import CanonicalShadow

        index = ShadowIndex(page_size, settings.canonical_shadow_max_tokens_per_tenant, settings.shadow_max_namespaces)
        gw.canonical_shadow = CanonicalShadow(index, gw.encode_cache)
    gw.miss_attributor = MissAttributor()
    if gw.engine is not None:
        from gateway.insight.engine_snapshots import EngineSnapshotter

        interval_s = settings.engine_snapshot_interval_s
        gw.snapshotter = EngineSnapshotter(gw.session_factory, gw.engine.stats, interval_s).start()


def make_spool(settings: Settings):
    """The request-log spool: settings.log_spool_path, else `<sqlite file>.spool/`, else
    `./radixgate-spool/<database digest>/`; None for an in-memory database (it dies with the
    process anyway). Each replica needs its own spool (it replays what it finds there)."""
    import hashlib
    from pathlib import Path

    from sqlalchemy.engine import make_url

    from gateway.db.log_spool import LogSpool

    path = settings.log_spool_path
    if path is None:
        url = make_url(settings.db_url)
        if url.get_backend_name() == "sqlite":
            if not url.database or url.database == ":memory:":
                return None
            path = Path(url.database + ".spool")
        else:
            path = Path("radixgate-spool") / hashlib.sha256(settings.db_url.encode()).hexdigest()[:16]
    return LogSpool(path, settings.log_spool_max_bytes, settings.log_spool_fsync)


def build_backends(gw: GatewayState) -> Router | None:
    from gateway.routing.embedded import EmbeddedBackend
    from gateway.routing.router import build_router

    embedded = EmbeddedBackend(gw.engine) if gw.engine is not None else None
    if embedded is None and not gw.settings.remotes:
        log.warning("no embedded engine and no remotes: chat requests will get 503")
        return None
    from gateway.routing.salt import CacheSalter

    salter = CacheSalter.from_settings(gw.settings) if gw.settings.remotes else None
    return build_router(gw.settings, embedded, salter=salter)


def start_monitor(gw: GatewayState) -> None:
    """Active health and load checks of the remotes (routing/monitor.py), cancelled by close_state."""
    interval_s = gw.settings.routing.health_interval_s
    if gw.router is None or not gw.router.remotes or interval_s <= 0:
        return
    from gateway.routing.monitor import HealthMonitor

    task = asyncio.get_running_loop().create_task(HealthMonitor(gw.router, interval_s, gw.settings.routing.health_timeout_s).run(), name="remote-health")
    gw.background_tasks.add(task)
    task.add_done_callback(gw.background_tasks.discard)


def start_rewarm(gw: GatewayState) -> None:
    """Re-warm stored pins in a background task: serving never waits for it (close_state cancels it)."""
    task = asyncio.get_running_loop().create_task(rewarm_pins(gw), name="pins-rewarm")
    gw.background_tasks.add(task)
    task.add_done_callback(gw.background_tasks.discard)


async def rewarm_pins(gw: GatewayState) -> None:
    """Prefill and pin every stored, live pin again (the engine's cache starts empty)."""
    from gateway.pins.service import rewarm_pins as rewarm

    try:
        await rewarm(gw)
    except Exception:  # a pin that cannot be re-warmed must not keep the server down
        log.exception("re-warming stored pins failed; serving without them")


async def close_state(gw: GatewayState, *, owns_engine: bool) -> None:
    for task in list(gw.background_tasks):
        task.cancel()
    if gw.snapshotter is not None:
        await asyncio.to_thread(gw.snapshotter.stop)
    if gw.canonical_shadow is not None:  # its last figures still become log rows
        await asyncio.to_thread(gw.canonical_shadow.close)
    if gw.log_writer is not None:
        await asyncio.to_thread(gw.log_writer.stop, True)
    if gw.side_writer is not None:
        await asyncio.to_thread(gw.side_writer.close)
    if owns_engine and gw.engine is not None:
        await asyncio.to_thread(gw.engine.shutdown)
        await asyncio.to_thread(gw.engine.close)  # detach from (or remove) its host KV tier
    gw.db_engine.dispose()


def safe_url(url: str) -> str:
    """The URL with any password masked, for logs."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
