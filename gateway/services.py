"""The app's services, built once per app by the lifespan (gateway/main.py) and held by one GatewayState.

    gw = build_services(settings, db_engine=..., session_factory=..., engine=..., prompt_model=...,
                        admin_key_generated=...)

Each service is handed only its own parts: the request path (gateway/generation/path.py) gets its
Preparer, router, limits, shadows and recorder, never the GatewayState.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from gateway.state import GatewayState
from gateway.tenants.auth_cache import AuthCache
from gateway.tenants.limits import TenantLimits
from gateway.tenants.rate_limits import RateLimiter

if TYPE_CHECKING:
    from engine import Engine
    from gateway.routing.router import Router
    from gateway.settings import Settings

log = logging.getLogger("gateway.main")


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


def prompt_model_for(settings: Settings, engine: Engine | None):
    """The engine's tokenizer and context; with no engine but remotes, the remotes' model files."""
    from gateway.routing import prompt_model

    if engine is not None:
        return prompt_model.from_engine(engine)
    return prompt_model.load_prompt_model(settings) if settings.remotes else None


def build_services(settings: Settings, *, db_engine, session_factory, engine: Engine | None, prompt_model,
                   admin_key_generated: str | None) -> GatewayState:
    """The services of one app, each handed only its own parts, and the GatewayState that holds them."""
    from gateway.db.log_writer import LogWriter
    from gateway.db.side_writer import SideWriter
    from gateway.generation.path import RequestPath
    from gateway.generation.record import RunRecorder
    from gateway.generation.served_models import ServedModels
    from gateway.insight.metrics import Metrics
    from gateway.insight.diagnosis_store import DiagnosisStore
    from gateway.insight.miss_cause import MissAttributor
    from gateway.insight.shadow import ShadowIndex
    from gateway.pins.service import Pinner
    from gateway.prompt_templates import TemplateRegistry
    from gateway.routing.load import LoadTracker

    templates = TemplateRegistry(settings.resolved_templates_dir(), settings.limits.template_limits())
    metrics = Metrics()
    log_writer = LogWriter(session_factory, settings.log_queue_max, settings.log_batch_size,
                           settings.log_flush_interval_s, metrics, spool=make_spool(settings))
    log_writer.start()
    side_writer = SideWriter(session_factory)
    encode_cache = make_encode_cache(prompt_model)
    router = build_backends(settings, engine)
    shared = build_shared(settings)
    tenant_limits = TenantLimits(settings.default_tenant_concurrency, shared=shared.slots if shared else None)
    in_flight, background_tasks = LoadTracker(), set()
    page_size = prompt_model.page_size if prompt_model is not None else settings.engine.page_size
    canonical_shadow = make_canonical_shadow(settings, page_size, encode_cache)
    recorder = RunRecorder(log_writer, metrics, MissAttributor())
    path = RequestPath(
        models=ServedModels.of(engine.model_id if engine is not None else None,
                               [remote.model for remote in settings.remotes], settings.engine.model),
        preparer=build_preparer(settings, prompt_model, encode_cache, templates, router, session_factory, side_writer),
        router=router, recorder=recorder, tenant_limits=tenant_limits,
        rate_limiter=RateLimiter(settings.default_tenant_requests_per_minute, settings.default_tenant_tokens_per_minute,
                                 window_s=settings.rate_limit_window_s, shared=shared.buckets if shared else None),
        in_flight=in_flight,
        shadow=ShadowIndex(page_size, settings.shadow_max_tokens_per_tenant, settings.shadow_max_namespaces),
        canonical_shadow=canonical_shadow, background_tasks=background_tasks, diagnoses=DiagnosisStore(page_size),
    )
    return GatewayState(
        settings=settings, db_engine=db_engine, session_factory=session_factory, engine=engine,
        prompt_model=prompt_model, encode_cache=encode_cache, templates=templates, metrics=metrics,
        log_writer=log_writer, side_writer=side_writer, canonical_shadow=canonical_shadow,
        snapshotter=start_snapshotter(settings, engine, session_factory), router=router, path=path,
        pins=Pinner(engine, templates, session_factory, background_tasks, settings.limits.pin_rewarm_timeout_s),
        auth_cache=AuthCache(settings.auth_cache_ttl_s, settings.auth_cache_stale_s), tenant_limits=tenant_limits,
        in_flight=in_flight, admin_key_generated=admin_key_generated, started_at=int(time.time()),
        background_tasks=background_tasks, shared=shared,
    )


def build_shared(settings: Settings):
    """Limits shared by edge replicas through Redis (gateway/shared_state/), or None without redis_url."""
    from gateway.shared_state import build_shared_state, masked_url

    shared = build_shared_state(settings)
    if shared is not None:
        shared.slots.start()
        log.info("tenants' limits are shared through Redis at %s (concurrency leases of %g s)",
                 masked_url(shared.link.url), settings.shared_limits.lease_s)
    return shared


def build_preparer(settings: Settings, prompt_model, encode_cache, templates, router, session_factory, side_writer):
    """The request path's Preparer; None on a gateway with no backend (then there is no router, and no
    prompt model to tokenize for either: both come from the embedded engine or the remotes)."""
    if prompt_model is None or router is None:
        return None
    from gateway.generation.preparer import Preparer

    return Preparer(
        templates=templates, prompt_model=prompt_model, tokenizer=encode_cache, limits=settings.limits,
        default_max_tokens=settings.default_max_tokens, session_factory=session_factory,
        check_grammar=router.check_grammar,
        tenant_weights=dict(settings.engine.tenant_weights), side_writer=side_writer,
        template_sample_size=settings.template_sample_size, cache_ttl_scale=settings.cache_ttl_scale,
    )


def make_encode_cache(prompt_model):
    if prompt_model is None:
        return None
    from gateway.canonicalize.encode_cache import EncodeCache

    return EncodeCache(prompt_model.tokenizer)


def make_canonical_shadow(settings: Settings, page_size: int, encode_cache):
    if not settings.canonical_shadow:
        return None
    from gateway.insight.counterfactual import CanonicalShadow
    from gateway.insight.shadow import ShadowIndex

    index = ShadowIndex(page_size, settings.canonical_shadow_max_tokens_per_tenant, settings.shadow_max_namespaces)
    return CanonicalShadow(index, encode_cache)


def start_snapshotter(settings: Settings, engine, session_factory):
    if engine is None:
        return None
    from gateway.insight.engine_snapshots import EngineSnapshotter

    return EngineSnapshotter(session_factory, engine.stats, settings.engine_snapshot_interval_s).start()


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


def build_backends(settings: Settings, engine: Engine | None) -> Router | None:
    from gateway.routing.embedded import EmbeddedBackend
    from gateway.routing.router import build_router

    embedded = EmbeddedBackend(engine) if engine is not None else None
    if embedded is None and not settings.remotes:
        log.warning("no embedded engine and no remotes: generation requests will get 503")
        return None
    from gateway.routing.salt import CacheSalter

    salter = CacheSalter.from_settings(settings) if settings.remotes else None
    return build_router(settings, embedded, salter=salter)
