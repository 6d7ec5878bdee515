"""One chat completion, top-down: admit -> prepare -> shadows -> route -> generate -> usage -> log row.

    run = await start_chat(gw, caller, body, request)    # errors here become HTTP errors
    response = await complete(run)                       # or: stream_events(run) for SSE

`start_chat` does everything that can fail with a proper status code before
any byte is sent: the tenant's concurrency slot (429, ChatRun.admit),
model resolution (404), canonicalization, rendering and tokenization (400),
backend choice, and the backend's first output (engine queue full -> 503,
prompt too long -> 400). Then the response is drained or streamed. Whatever
happens, `ChatRun.finish` runs exactly once in effect: it releases the slot
`admit` took, enqueues one request-log row, observes metrics and logs one INFO
line (gateway/chat/run.py, gateway/chat/record.py). The two shadows: the raw order is
observed at once (one radix walk); the canonical order is queued on the canonical shadow's
worker (gateway/insight/counterfactual.py), where a raw request's canonical rendering is made
while the backend prefills, and the log row waits for that figure, the response never does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, AsyncIterator

from gateway.chat.models import resolve_model
from gateway.chat.prepare import PreparedRequest, load_tenant_template, prepare_for_tenant, render_canonical
from gateway.chat.record import RunRecorder
from gateway.chat.run import ChatRun
from gateway.chat.schemas import AssistantMessage, ChatCompletion, ChatCompletionRequest, Choice
from gateway.chat.streaming import DONE_EVENT, ChunkFactory, error_event
from gateway.errors import ApiError, from_exception, service_unavailable
from gateway.routing.base import cache_namespace

if TYPE_CHECKING:
    from fastapi import Request

    from gateway.deps import Caller
    from gateway.insight.counterfactual import CanonicalFigures
    from gateway.state import GatewayState

log = logging.getLogger(__name__)


def new_run(gw: GatewayState, caller: Caller, body: ChatCompletionRequest, request_id: str | None = None) -> ChatRun:
    """A run handed only the parts of the gateway it uses. Its log row's id is the uuid in its request id
    (chatcmpl-<hex>, resp_<hex>), so a client's id names its row."""
    log_id = uuid.uuid4() if request_id is None else id_uuid(request_id)
    return ChatRun(
        caller=caller,
        body=body,
        request_id=request_id or f"chatcmpl-{log_id.hex}",
        log_id=log_id,
        tenant_limits=gw.tenant_limits,
        recorder=RunRecorder(gw.log_writer, gw.metrics, gw.miss_attributor),
        background_tasks=gw.background_tasks,
        rate_limiter=gw.rate_limiter,
    )


def id_uuid(request_id: str) -> uuid.UUID:
    """The uuid a "<prefix>-<32 hex>" / "<prefix>_<32 hex>" id carries (its log row's id), else a new one."""
    try:
        return uuid.UUID(hex=request_id.replace("_", "-").rsplit("-", 1)[-1])
    except ValueError:
        return uuid.uuid4()


async def start_chat(
    gw: GatewayState, caller: Caller, body: ChatCompletionRequest, request: Request | None, request_id: str | None = None,
    route_key: str | None = None,
) -> ChatRun:
    """Admit and prepare the request and fetch the backend's first output. Raises ApiError.

    `request_id` names the run (default a new "chatcmpl-..." id); the Responses API passes its response id,
    and its conversation as `route_key` (the routing key when the client sent no `prompt_cache_key`)."""
    run = new_run(gw, caller, body, request_id)
    run.admit()
    try:
        if gw.router is None or gw.prompt_model is None:
            raise service_unavailable("No backend is configured: the embedded engine is disabled and no remotes are set.")
        tenant = caller.tenant
        run.model_id = resolve_model(gw, body.model)
        run.prepared = await asyncio.to_thread(prepare_in_thread, gw, run)
        run.charge_rate_limits()
        run.count_load(gw.in_flight)
        run.namespace = salted_namespace(cache_namespace(tenant.id, tenant.cache_group, run.model_id), body)
        run.shadow_cached_tokens = gw.shadow.observe(run.namespace, run.prepared.raw_token_ids) if gw.shadow else None
        run.counterfactual = observe_canonical(gw, run)
        backend = gw.router.pick(run.prepared.prompt, run.namespace, body.prompt_cache_key or route_key)
        run.open(backend, request)
        await run.prefetch()
    except BaseException as exc:
        api_error = from_exception(exc) if isinstance(exc, Exception) else None
        run.fail(api_error.code if api_error else "cancelled")
        run.finish()
        if api_error is None:
            raise
        if api_error is not exc:
            raise api_error from exc
        raise
    return run


def salted_namespace(namespace: str, body: ChatCompletionRequest) -> str:
    """The caller's namespace, split further by the body's `cache_salt` (vLLM's field; an edge gateway
    sends its tenants' salts). A salt only partitions the caller's own cache, never joins another's."""
    salt = (body.model_extra or {}).get("cache_salt")
    return f"{namespace}|salt:{salt}" if isinstance(salt, str) and salt else namespace


def prepare_in_thread(gw: GatewayState, run: ChatRun) -> PreparedRequest:
    """Load the tenant's template (if the body names one and is canonicalized) and prepare the run's request."""
    body, tenant = run.body, run.caller.tenant
    use_own = body.template and body.canonicalize
    tenant_template = load_tenant_template(gw.session_factory, tenant.id, body.template) if use_own else None
    prepared = prepare_for_tenant(gw, tenant, body, run.model_id, tenant_template)
    if tenant_template is not None:
        keep_sample(gw, tenant.id, tenant_template.name, body)
    return prepared


def keep_sample(gw: GatewayState, tenant_id: int, template: str, body: ChatCompletionRequest) -> None:
    """Best effort: queue the body for the template's bounded sample (prompt_templates/samples.py) on the
    gateway's SideWriter, off the request path; a failed write is logged, never raised."""
    from functools import partial

    from gateway.db.side_writer import write_aside
    from gateway.prompt_templates import samples

    limit = gw.settings.template_sample_size
    if limit <= 0:
        return
    body_json = body.model_dump(mode="json", exclude_unset=True)
    write_aside(gw.side_writer, gw.session_factory, partial(samples.record_sample, tenant_id=tenant_id, template=template, body=body_json, limit=limit))


def observe_canonical(gw: GatewayState, run: ChatRun) -> Future[CanonicalFigures | None] | None:
    """Queue the run's canonical order on the canonical shadow (None when that shadow is off).
    A raw run's canonical rendering is the one canonicalize=true would serve, made on the worker."""
    shadow, prepared = gw.canonical_shadow, run.prepared
    if shadow is None:
        return None
    if prepared.canonical is not None:
        return shadow.observe_later(run.namespace, lambda: prepared.canonical)
    name, tenant_id = run.body.template, run.caller.tenant.id

    def render():
        own = load_tenant_template(gw.session_factory, tenant_id, name) if name else None
        return render_canonical(gw.templates, prepared.sections, shadow.tokenizer or gw.prompt_model.tokenizer, name, own)

    return shadow.observe_later(run.namespace, render)


async def collect_answer(run: ChatRun) -> tuple[str, list[dict] | None]:
    """The whole answer: its text, and tool calls (parsed from the text, or sent as such by a remote backend)."""
    detector = run.make_tool_call_detector()
    parts, backend_calls = [], []
    async for chunk in run.chunks():
        parts.append(detector.feed(chunk.text))
        backend_calls.extend(chunk.tool_calls)
    rest, calls = detector.finish()
    return "".join(parts) + rest, calls or backend_calls or None


async def complete(run: ChatRun) -> ChatCompletion:
    """Drain the backend and build the non-streaming response."""
    try:
        text, calls = await collect_answer(run)
        finish_reason = run.answer_finish_reason(calls)
        message = AssistantMessage(content=None if calls else text, tool_calls=calls)
        return ChatCompletion(
            id=run.request_id,
            created=run.created,
            model=run.model_id,
            choices=[Choice(message=message, finish_reason=finish_reason)],
            usage=run.api_usage(),
        )
    except BaseException as exc:
        run.fail_from(exc)
        if isinstance(exc, Exception) and not isinstance(exc, ApiError):
            raise from_exception(exc) from exc
        raise
    finally:
        run.finish()


async def stream_events(run: ChatRun) -> AsyncIterator[bytes]:
    """The SSE byte stream for a started run; always ends with [DONE] unless the client left."""
    include_usage = bool(run.body.stream_options and run.body.stream_options.include_usage)
    factory = ChunkFactory(run.request_id, run.created, run.model_id, include_usage)
    detector = run.make_tool_call_detector()
    backend_calls: list[dict] = []
    try:
        yield factory.role()
        async for chunk in run.chunks():
            text = detector.feed(chunk.text)
            backend_calls.extend(chunk.tool_calls)
            if text:
                yield factory.content(text)
        rest, calls = detector.finish()
        calls = calls or backend_calls or None
        if rest:
            yield factory.content(rest)
        for event in factory.tool_calls(calls or []):
            yield event
        yield factory.finish(run.answer_finish_reason(calls))
        if include_usage:
            yield factory.usage(run.api_usage())
        run.finish()  # the row is spooled before the client can see [DONE]
        yield DONE_EVENT
    except Exception as exc:
        run.fail_from(exc)
        log.warning("stream %s failed after it started: %r", run.request_id, exc)
        yield error_event(from_exception(exc).body())
        yield DONE_EVENT
    except BaseException as exc:
        run.fail_from(exc)
        raise
    finally:
        run.finish()
