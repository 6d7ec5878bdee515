"""The app factory and its lifespan. Nothing is built at import time.

    app = create_app(Settings(...), engine=shared_engine)   # tests inject an engine
    uvicorn.run(create_app(), ...)

The lifespan builds, in order: migrations -> database engine and session factory ->
admin key -> Engine (unless injected) -> prompt model -> TemplateRegistry, Metrics,
LogWriter (started), SideWriter, Router, the shadows, the RequestPath and its Preparer,
EngineSnapshotter -> one GatewayState holding them, then starts
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
from gateway.messages.envelope import ANTHROPIC_ENVELOPE
from gateway.services import build_services, prompt_model_for, start_engine
from gateway.settings import Settings

if TYPE_CHECKING:
    from engine import Engine
    from gateway.state import GatewayState

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
    install_error_handlers(app, (ANTHROPIC_ENVELOPE,))
    include_routers(app)
    if settings.protect_docs:
        from gateway.routes import docs as docs_routes

        app.include_router(docs_routes.router)
    app.add_middleware(BodyLimit, max_body_bytes=settings.limits.max_body_bytes)
    return app


def include_routers(app: FastAPI) -> None:
    from gateway.routes import (
        admin, canonicalize, chat, fleet, messages, metrics, models, pins, responses, stats, template_studio, templates,
    )

    for module in (chat, responses, messages, models, canonicalize, stats, metrics, admin, template_studio, templates,
                   pins, fleet):
        app.include_router(module.router)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict:
        return {"status": "ok"}


async def build_state(settings: Settings, engine: Engine | None) -> GatewayState:
    """Every service, then one GatewayState from them (see the module docstring for the order)."""
    from gateway.db.migrate import upgrade
    from gateway.db.session import make_engine, make_session_factory
    from gateway.tenants import admin_keys

    await asyncio.to_thread(upgrade, settings.db_url)
    db_engine = make_engine(settings.db_url, pool_size=settings.db_pool_size, pool_timeout_s=settings.db_pool_timeout_s,
                            max_overflow=settings.db_pool_max_overflow)
    session_factory = make_session_factory(db_engine)
    admin_key_generated = admin_keys.bootstrap_admin_key(session_factory, settings)
    engine = engine if engine is not None else await start_engine(settings)
    prompt_model = await asyncio.to_thread(prompt_model_for, settings, engine)
    gw = build_services(settings, db_engine=db_engine, session_factory=session_factory, engine=engine,
                        prompt_model=prompt_model, admin_key_generated=admin_key_generated)
    start_monitor(gw)
    if settings.rewarm_pins and gw.engine is not None:
        start_rewarm(gw)
    log.info(
        "radixgate ready on http://%s:%d/v1: model %s, database %s",
        settings.host, settings.port, gw.model_id, safe_url(settings.db_url),
    )
    return gw


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
    try:
        await gw.pins.rewarm_all()
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
    if gw.shared is not None:
        await gw.shared.close()
    if owns_engine and gw.engine is not None:
        await asyncio.to_thread(gw.engine.shutdown)
        await asyncio.to_thread(gw.engine.close)  # detach from (or remove) its host KV tier
    gw.db_engine.dispose()


def safe_url(url: str) -> str:
    """The URL with any password masked, for logs."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
