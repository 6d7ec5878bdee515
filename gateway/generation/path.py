"""RequestPath: one request, any wire format, top-down: admit -> prepare -> shadows -> route -> first output.

    run = await path.start(lambda: parse(body), model=body.model, caller=caller, http_request=http_request)
    answer = await complete(run)                    # or: async for event in answer_events(run) (answer.py)

`start` does everything that can fail with a proper status code before any byte
is sent: the tenant's concurrency slot (429, GenerationRun.admit), the wire format's
parse into the internal request (400; after admission, so a refused request is still one
logged, failed run of its caller), model resolution
(404), canonicalization, rendering and tokenization (400), backend choice, and the
backend's first output (engine queue full -> 503, prompt too long -> 400). An error
about a field of the request is named in the caller's wire format (request.names)
before it leaves. Then the answer is drained or streamed (answer.py). Whatever
happens, `GenerationRun.finish` runs exactly once in effect: it releases the slot
`admit` took and hands the recorder the run's record (one request-log row, metrics,
one INFO line). The two shadows: the raw order is observed at once (one radix walk);
the canonical order is queued on the canonical shadow's worker
(gateway/insight/counterfactual.py), where a raw request's canonical rendering is made
while the backend prefills, and the log row waits for that figure, the response never does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from gateway.errors import from_exception, service_unavailable
from gateway.generation.canonical_render import render_canonical
from gateway.generation.request import GenerationRequest
from gateway.generation.run import GenerationRun
from gateway.tenants.isolation import cache_namespace, salted_namespace

if TYPE_CHECKING:
    from fastapi import Request

    from gateway.deps import Caller
    from gateway.generation.preparer import Preparer
    from gateway.generation.record import RunRecorder
    from gateway.generation.served_models import ServedModels
    from gateway.insight.counterfactual import CanonicalFigures, CanonicalShadow
    from gateway.insight.diagnosis_store import DiagnosisStore
    from gateway.insight.prompt_fingerprint import PromptFingerprint
    from gateway.insight.shadow import ShadowIndex
    from gateway.routing.backend import BackendRouter
    from gateway.routing.load import LoadTracker
    from gateway.tenants.limits import TenantLimits
    from gateway.tenants.rate_limits import RateLimiter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestPath:
    """The collaborators a request meets, built once per app (gateway/state.py). `preparer` and `router`
    are None on a gateway with no backend (every request then gets 503)."""

    models: ServedModels
    preparer: Preparer | None
    router: BackendRouter | None
    recorder: RunRecorder
    tenant_limits: TenantLimits
    rate_limiter: RateLimiter | None
    in_flight: LoadTracker
    shadow: ShadowIndex | None
    canonical_shadow: CanonicalShadow | None
    background_tasks: set[asyncio.Task]
    diagnoses: DiagnosisStore | None = None  # each caller's previous request, for the run's cache diagnosis

    def new_run(self, request: GenerationRequest, caller: Caller, request_id: str | None = None) -> GenerationRun:
        """A run handed only the parts it uses. Its log row's id is the uuid in its request id
        (chatcmpl-<hex>, resp_<hex>, msg_<hex>), so a client's id names its row."""
        log_id = uuid.uuid4() if request_id is None else id_uuid(request_id)
        return GenerationRun(
            caller=caller, request=request, request_id=request_id or f"chatcmpl-{log_id.hex}", log_id=log_id,
            tenant_limits=self.tenant_limits, recorder=self.recorder, background_tasks=self.background_tasks,
            rate_limiter=self.rate_limiter,
        )

    async def start(self, parse: Callable[[], GenerationRequest], *, model: str, caller: Caller,
                    http_request: Request | None, request_id: str | None = None) -> GenerationRun:
        """Admit, parse (`parse`: the wire format's body -> GenerationRequest) and prepare the request, and
        fetch the backend's first output. Raises ApiError. `model` is the model the body names (the run's
        model until the request is parsed).

        `request_id` names the run (default a new "chatcmpl-..." id); a wire format with ids of its own
        passes one."""
        request = GenerationRequest(model=model, messages=())  # what the run records if parsing fails
        run = self.new_run(request, caller, request_id)
        await run.admit()
        try:
            run.request = request = parse()
            if self.router is None or self.preparer is None:
                raise service_unavailable("No backend is configured: the embedded engine is disabled and no remotes are set.")
            tenant = caller.tenant
            run.model_id = self.models.resolve(request.model)
            run.prepared = await asyncio.to_thread(self.preparer.prepare_for, request, tenant=tenant, model_id=run.model_id)
            await run.charge_rate_limits()
            run.count_load(self.in_flight)
            namespace = cache_namespace(tenant.id, tenant.cache_group, run.model_id)
            run.namespace = salted_namespace(namespace, request.cache_salt)
            run.shadow_cached_tokens = self.shadow.observe(run.namespace, run.prepared.raw_token_ids) if self.shadow else None
            run.counterfactual = self.observe_canonical(run)
            fingerprint = self.diagnose(run)
            backend = self.router.pick(run.prepared.prompt, run.namespace, request.route_key)
            run.open(backend, http_request)
            await run.prefetch()
            if fingerprint is not None:  # the engine has the prompt now: the caller's next request compares with it
                self.diagnoses.remember(fingerprint)
        except BaseException as exc:
            api_error = from_exception(exc) if isinstance(exc, Exception) else None
            run.fail(api_error.code if api_error else "cancelled")
            run.finish()
            if api_error is None:
                raise
            api_error.name_field(request.names)
            if api_error is not exc:
                raise api_error from exc
            raise
        return run

    def diagnose(self, run: GenerationRun) -> PromptFingerprint | None:
        """Set the run's cache diagnosis against the caller's previous request and return the run's
        fingerprint (None when the path keeps no diagnoses)."""
        if self.diagnoses is None:
            return None
        from gateway.insight.prompt_fingerprint import fingerprint
        from gateway.tenants.dynamic_rules import rules_for

        tenant = run.caller.tenant
        try:
            current = fingerprint(response_id=run.request_id, tenant_id=tenant.id, domain=run.namespace,
                                  model=run.model_id, prepared=run.prepared, request=run.request,
                                  rules=rules_for(tenant), page_size=self.diagnoses.page_size)
            run.diagnosis = self.diagnoses.diagnose(current, run.request.compare_to)
        except Exception:  # a diagnosis describes the request: it must never fail it
            log.warning("no cache diagnosis for %s", run.request_id, exc_info=True)
            return None
        return current

    def observe_canonical(self, run: GenerationRun) -> Future[CanonicalFigures | None] | None:
        """Queue the run's canonical order on the canonical shadow (None when that shadow is off).
        A raw run's canonical rendering is the one canonicalize=true would serve, made on the worker."""
        shadow, prepared, preparer = self.canonical_shadow, run.prepared, self.preparer
        if shadow is None:
            return None
        if prepared.canonical is not None:
            return shadow.observe_later(run.namespace, lambda: prepared.canonical)
        name, tenant_id = run.request.template, run.caller.tenant.id

        def render():
            own = preparer.load_template(tenant_id, name) if name else None
            tokenizer = shadow.tokenizer or preparer.prompt_model.tokenizer
            return render_canonical(preparer.templates, prepared.sections, tokenizer, name, own)

        return shadow.observe_later(run.namespace, render)


def id_uuid(request_id: str) -> uuid.UUID:
    """The uuid a "<prefix>-<32 hex>" / "<prefix>_<32 hex>" id carries (its log row's id), else a new one."""
    try:
        return uuid.UUID(hex=request_id.replace("_", "-").rsplit("-", 1)[-1])
    except ValueError:
        return uuid.uuid4()
