"""GenerationRun: the state of one request, whatever its wire format, from admission to its log row.

    run = GenerationRun(caller, request, request_id, tenant_limits, recorder, background_tasks)
    await run.admit()             # takes the tenant's slot, or records "rate_limited" and raises 429
    ...                           # the request path sets model_id, prepared, namespace, shadow figures
    run.open(backend, request)    # starts the backend stream and the disconnect watcher
    await run.prefetch()          # the backend's first output
    async for chunk in run.chunks(): ...
    run.finish()                  # idempotent

Ownership: the run takes the tenant's concurrency slot in `admit` and gives it
back in `finish`, nowhere else; `finish` does its work once however often it is
called, so an admitted run releases its slot exactly once on every path. It also
cancels the watcher, closes a backend stream left unfinished (which aborts the
backend request) and hands its `RunRecorder` the finished run's `RunRecord` (one
request-log row, metrics, one INFO line); the recorder never calls back into the run.

If the client disconnects while the backend is generating, the watcher aborts
the backend request (the engine frees its pages at once) and the run is
recorded with status "error", error_code "client_disconnected".
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, AsyncIterator

from gateway.errors import from_exception, too_many_requests
from gateway.generation.record import RunRecord
from gateway.generation.result import Usage
from gateway.generation.stream_close import close_quietly
from gateway.pins.breakpoints import cache_write_figures
from gateway.routing.backend import BackendChunk, BackendUsage
from gateway.routing.load import LOCAL_LOAD, LoadTracker

if TYPE_CHECKING:
    from fastapi import Request

    from gateway.deps import Caller
    from gateway.generation.prepare import PreparedRequest
    from gateway.generation.record import RunRecorder
    from gateway.generation.request import GenerationRequest
    from gateway.generation.result import ToolCall
    from gateway.generation.tool_calls import ToolCallDetector
    from gateway.insight.cache_diagnosis import CacheDiagnosis
    from gateway.insight.counterfactual import CanonicalFigures
    from gateway.routing.backend import Backend
    from gateway.tenants.limits import Slot, TenantLimits
    from gateway.tenants.rate_limits import RateLimiter, RateLimitState

log = logging.getLogger("gateway.requests")


@dataclass
class GenerationRun:
    caller: Caller
    request: GenerationRequest
    request_id: str
    tenant_limits: TenantLimits
    recorder: RunRecorder
    background_tasks: set[asyncio.Task]  # holds the tasks that close unfinished streams until they are done
    model_id: str = ""
    log_id: uuid.UUID = field(default_factory=uuid.uuid4)  # the request-log row's id (a spool replay keys on it)
    created: int = field(default_factory=lambda: int(time.time()))
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    started_s: float = field(default_factory=time.perf_counter)
    first_output_s: float | None = None
    prepared: PreparedRequest | None = None
    namespace: str | None = None
    shadow_cached_tokens: int | None = None
    counterfactual: Future[CanonicalFigures | None] | None = None  # the canonical shadow's figures
    diagnosis: CacheDiagnosis | None = None  # against the caller's previous request, set at prepare time
    backend: Backend | None = None
    usage: BackendUsage | None = None
    finish_reason: str = "stop"
    stop_sequence: str | None = None  # the stop string that ended the answer (the backend's final chunk)
    num_completion_tokens: int = 0
    status: str = "ok"
    error_code: str | None = None
    is_finished: bool = False
    rate_limiter: RateLimiter | None = None
    rate_state: RateLimitState | None = None  # after charge_rate_limits: what the x-ratelimit-* headers say
    num_tokens_charged: int = 0
    _slot: Slot | None = None  # admit's slot, until finish gives it back
    _load: LoadTracker | None = None  # this gateway's queued + running tokens (GET /v1/load), while counted
    _load_tokens: int = 0
    _stream: AsyncIterator[BackendChunk] | None = None
    _pending: BackendChunk | None = None
    _watcher: asyncio.Task | None = None

    async def admit(self) -> None:
        """Take one of the tenant's concurrency slots (every edge replica's, with shared limits).
        Refused: the run is finished as "rate_limited" and 429 raised."""
        tenant = self.caller.tenant
        self._slot = await self.tenant_limits.acquire(tenant.id, tenant.max_concurrency)
        if self._slot is None:
            self.fail("rate_limited")
            self.finish()
            raise too_many_requests(f"Tenant {tenant.name!r} is at its limit of concurrent requests; retry shortly.")

    async def charge_rate_limits(self) -> None:
        """Charge the tenant's per-minute buckets with 1 request and prompt + max_tokens tokens (OpenAI's
        estimate); `finish` refunds what the answer did not use. Refused: 429 with the x-ratelimit-* headers."""
        from gateway.tenants.rate_limits import RateLimited

        if self.rate_limiter is None:
            return
        tenant, prepared = self.caller.tenant, self.prepared
        estimate = prepared.num_prompt_tokens + (prepared.params.max_tokens or 0)
        try:
            self.rate_state = await self.rate_limiter.charge(
                tenant.id, tenant.requests_per_minute, tenant.tokens_per_minute, estimate)
        except RateLimited as exc:
            retry_s = 60 if exc.retry_after_s == float("inf") else max(1, int(exc.retry_after_s + 0.999))
            error = too_many_requests(
                f"Tenant {tenant.name!r} reached its {exc.which}-per-minute limit "
                f"(this request needs {estimate} tokens); retry in {retry_s} s.", retry_s)
            error.headers.update(exc.state.headers())
            raise error from exc
        self.num_tokens_charged = estimate

    @property
    def wants_tool_calls(self) -> bool:
        choice = self.request.tool_choice
        return bool(self.request.tools) and (choice is None or choice.mode != "none")

    def answer_finish_reason(self, calls: list[ToolCall] | tuple[ToolCall, ...] | None) -> str:
        """"tool_calls" when the answer parsed as calls ("length" when max_tokens cut one inside its
        JSON); otherwise the backend's reason, never a "tool_calls" without calls (a grammar that
        allowed a JSON answer instead reports it)."""
        if calls:
            return "tool_calls" if all(call.is_complete for call in calls) else "length"
        return "stop" if self.finish_reason == "tool_calls" else self.finish_reason

    def make_tool_call_detector(self) -> ToolCallDetector:
        from gateway.generation.tool_calls import ToolCallDetector

        names = frozenset((tool.get("function") or {}).get("name") for tool in self.request.tools)
        return ToolCallDetector(is_enabled=self.wants_tool_calls, tool_names=names)

    def count_load(self, tracker: LoadTracker) -> None:
        """Count the prepared prompt in this gateway's in-flight load until `finish`."""
        self._load, self._load_tokens = tracker, self.prepared.num_prompt_tokens
        tracker.begin(LOCAL_LOAD, self._load_tokens)

    def open(self, backend: Backend, request: Request | None) -> None:
        """Start the backend stream and a watcher that aborts it if the client disconnects."""
        prepared = self.prepared
        self.backend = backend
        self._stream = backend.stream(prepared.prompt, prepared.params, self.namespace, self.request_id)
        if prepared.cache_pins and not getattr(backend, "holds_cache_pins", False):
            log.info("%s: backend %s cannot pin; its %d cache breakpoints are ordinary cache there (no cache writes "
                     "reported)", self.request_id, backend.name, len(prepared.cache_pins))
        if request is not None:
            self._watcher = asyncio.create_task(self._watch_disconnect(request))

    async def _watch_disconnect(self, request: Request) -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(0.25)
        if not self.is_finished:
            self.fail("client_disconnected")
            log.info("client disconnected; aborting %s", self.request_id)
            self.backend.abort(self.request_id)

    async def prefetch(self) -> None:
        """Wait for the backend's first output, so submission errors (queue full, too long) surface before headers."""
        self._pending = await self._next()

    async def _next(self) -> BackendChunk | None:
        try:
            chunk = await self._stream.__anext__()
        except StopAsyncIteration:
            return None
        if self.first_output_s is None:
            self.first_output_s = time.perf_counter()
        self.num_completion_tokens += len(chunk.token_ids)
        if chunk.finish_reason is not None:
            self.finish_reason = "stop" if chunk.finish_reason == "abort" else chunk.finish_reason
            self.usage = chunk.usage
            self.stop_sequence = chunk.stop_sequence
        return chunk

    async def chunks(self) -> AsyncIterator[BackendChunk]:
        """The backend's chunks, the prefetched one first."""
        chunk, self._pending = self._pending, None
        while chunk is not None:
            yield chunk
            if chunk.finish_reason is not None:
                return
            chunk = await self._next()

    def api_usage(self) -> Usage:
        """The usage the client is told: the backend's, or (no final chunk) the prompt and what streamed. The
        cache-write figures are the prompt computed up to the last (1h) breakpoint on a backend that pins
        (gateway/pins/breakpoints.py), 0 on a remote (it cannot pin; `open` logs that)."""
        usage = self.usage
        if usage is None:
            prompt = self.prepared.num_prompt_tokens if self.prepared else 0
            return Usage(prompt, 0, self.num_completion_tokens)
        cached = usage.cached_tokens or 0
        pins = self.prepared.cache_pins if self.prepared and getattr(self.backend, "holds_cache_pins", False) else ()
        write, write_1h = cache_write_figures(pins, cached)
        return Usage(usage.prompt_tokens, cached, usage.completion_tokens, write, write_1h)

    def cache_diagnosis(self) -> CacheDiagnosis | None:
        """Why this prompt missed against the caller's previous one (insight/cache_diagnosis.py), with the
        backend's cached figure once the run has it; None when the request path keeps no diagnoses."""
        if self.diagnosis is None:
            return None
        return self.diagnosis.with_cached(self.usage.cached_tokens if self.usage is not None else None)

    def delivered_cached_tokens(self) -> int | None:
        """The backend's cached tokens for the log: None when unknown (a remote that reports none)."""
        if self.usage is None:
            return 0 if self.prepared is None or self.status != "ok" else None
        return self.usage.cached_tokens

    def ttft_ms(self) -> float | None:
        if self.usage is not None and self.usage.ttft_s is not None:
            return self.usage.ttft_s * 1000
        if self.first_output_s is None:
            return None
        return (self.first_output_s - self.started_s) * 1000

    def fail(self, error_code: str | None) -> None:
        """Mark the run failed; the first failure's code is the one recorded."""
        if self.status == "ok":
            self.status, self.error_code = "error", error_code

    def fail_from(self, exc: BaseException) -> None:
        self.fail(from_exception(exc).code if isinstance(exc, Exception) else "client_disconnected")

    def finish(self) -> None:
        """Stop, release the slot, record and log, exactly once."""
        if self.is_finished:
            return
        self.is_finished = True
        if self._watcher is not None:
            self._watcher.cancel()
        if self._stream is not None and self.usage is None:
            self._close_stream()
        if self._slot is not None:
            self.tenant_limits.release_slot(self._slot)
            self._slot = None
        if self.num_tokens_charged and self.rate_limiter is not None:
            usage = self.api_usage()
            self.rate_limiter.settle(self.caller.tenant.id, self.num_tokens_charged,
                                     usage.prompt_tokens + usage.completion_tokens, self.rate_state)
        if self._load is not None:
            self._load.end(LOCAL_LOAD, self._load_tokens)
            self._load = None
        self.recorder.record(self.to_record())

    def to_record(self) -> RunRecord:
        """What the finished run leaves for the request log, metrics and its INFO line."""
        usage, prepared, backend = self.api_usage(), self.prepared, self.backend
        return RunRecord(
            log_id=self.log_id,
            request_id=self.request_id,
            created_at=self.created_at,
            tenant_id=self.caller.tenant.id,
            tenant_name=self.caller.tenant.name,
            api_key_id=self.caller.api_key_id,
            template=prepared.template_name if prepared else self.request.template,
            template_version=prepared.template_version if prepared else None,
            model=self.model_id or self.request.model,
            backend=backend.name if backend else None,
            canonicalized=self.request.canonicalize,
            usage=usage,
            cached_tokens=self.delivered_cached_tokens(),
            predicted_cached_tokens=getattr(backend, "predicted_cached_tokens", None),
            failovers=getattr(backend, "num_failovers", None),
            host_cached_tokens=self.usage.host_cached_tokens if self.usage is not None else 0,
            shadow_cached_tokens=self.shadow_cached_tokens,
            counterfactual=self.counterfactual,
            sections=prepared.sections if prepared else None,
            ttft_ms=self.ttft_ms(),
            latency_ms=(time.perf_counter() - self.started_s) * 1000,
            status=self.status,
            error_code=self.error_code,
            diagnosis=self.cache_diagnosis(),
        )

    def _close_stream(self) -> None:
        """Close a backend stream left unfinished, which aborts its request (see routing/backend.py)."""
        task = asyncio.ensure_future(close_quietly(self._stream, self.backend, self.request_id))
        self.background_tasks.add(task)
        task.add_done_callback(self.background_tasks.discard)

