"""ChatRun: the state of one chat request from admission to its log row.

Lifecycle: created -> (slot held) -> prepared -> open (backend stream started,
disconnect watcher running) -> chunks drained -> finish(). `finish` is
idempotent and is the only place that releases the tenant's concurrency slot,
enqueues the request-log row, observes metrics and writes the INFO log line.

If the client disconnects while the backend is generating, the watcher aborts
the backend request (the engine frees its pages at once) and the run is
recorded with status "error", error_code "client_disconnected".
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, AsyncIterator

from gateway.errors import from_exception
from gateway.routing.base import BackendChunk, BackendUsage
from gateway.chat.schemas import Usage, make_usage

if TYPE_CHECKING:
    from fastapi import Request

    from gateway.deps import Caller
    from gateway.chat.prepare import PreparedRequest
    from gateway.routing.base import Backend
    from gateway.chat.schemas import ChatCompletionRequest
    from gateway.state import GatewayState

log = logging.getLogger("gateway.requests")

SECTION_NAMES = ("system", "tools", "context", "history", "dynamic", "question")


@dataclass
class ChatRun:
    gw: GatewayState
    caller: Caller
    body: ChatCompletionRequest
    request_id: str
    model_id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    started_s: float = field(default_factory=time.perf_counter)
    first_output_s: float | None = None
    prepared: PreparedRequest | None = None
    namespace: str | None = None
    shadow_cached_tokens: int | None = None
    backend: Backend | None = None
    usage: BackendUsage | None = None
    finish_reason: str = "stop"
    num_completion_tokens: int = 0
    status: str = "ok"
    error_code: str | None = None
    holds_slot: bool = False
    is_finished: bool = False
    _stream: AsyncIterator[BackendChunk] | None = None
    _pending: BackendChunk | None = None
    _watcher: asyncio.Task | None = None

    @property
    def wants_tool_calls(self) -> bool:
        return bool(self.body.tools) and self.body.tool_choice != "none"

    def make_tool_call_detector(self):
        from gateway.chat.tool_calls import ToolCallDetector

        names = frozenset((tool.get("function") or {}).get("name") for tool in self.body.tools or ())
        return ToolCallDetector(is_enabled=self.wants_tool_calls, tool_names=names)

    def open(self, backend: Backend, request: Request | None) -> None:
        """Start the backend stream and a watcher that aborts it if the client disconnects."""
        prepared = self.prepared
        self.backend = backend
        self._stream = backend.stream(prepared.prompt, prepared.params, self.namespace, self.request_id)
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
        usage = self.usage
        if usage is None:
            prompt = self.prepared.num_prompt_tokens if self.prepared else 0
            return make_usage(prompt, 0, self.num_completion_tokens)
        return make_usage(usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens)

    def fail(self, error_code: str | None) -> None:
        if self.status == "ok":
            self.status, self.error_code = "error", error_code

    def fail_from(self, exc: BaseException) -> None:
        self.fail(from_exception(exc).code if isinstance(exc, Exception) else "client_disconnected")

    def finish(self) -> None:
        """Release, record and log, exactly once."""
        if self.is_finished:
            return
        self.is_finished = True
        if self._watcher is not None:
            self._watcher.cancel()
        if self._stream is not None and self.usage is None:
            self._close_stream()
        if self.holds_slot:
            self.gw.tenant_limits.release(self.caller.tenant.id)
            self.holds_slot = False
        self._record()

    def _close_stream(self) -> None:
        """Close a backend stream left unfinished, which aborts its request (see routing/base.py)."""
        task = asyncio.ensure_future(close_quietly(self._stream, self.backend, self.request_id))
        self.gw.background_tasks.add(task)
        task.add_done_callback(self.gw.background_tasks.discard)

    def _record(self) -> None:
        row = self.log_row()
        try:
            if self.gw.log_writer is not None:
                self.gw.log_writer.enqueue(row)
            if self.gw.metrics is not None:
                self.gw.metrics.observe_request(
                    self.caller.tenant.name, row["prompt_tokens"], row["cached_tokens"],
                    None if row["ttft_ms"] is None else row["ttft_ms"] / 1000, row["latency_ms"] / 1000, self.status,
                )
        except Exception:  # recording must never fail a request
            log.exception("could not record request %s", self.request_id)
        log.info(
            "chat tenant=%s status=%s%s prompt=%d cached=%d shadow=%s completion=%d ttft_ms=%s latency_ms=%.0f backend=%s template=%s",
            self.caller.tenant.name, self.status, f"({self.error_code})" if self.error_code else "",
            row["prompt_tokens"], row["cached_tokens"], row["shadow_cached_tokens"], row["completion_tokens"],
            "-" if row["ttft_ms"] is None else f"{row['ttft_ms']:.0f}", row["latency_ms"], row["backend"], row["template"],
        )

    def ttft_ms(self) -> float | None:
        if self.usage is not None and self.usage.ttft_s is not None:
            return self.usage.ttft_s * 1000
        if self.first_output_s is None:
            return None
        return (self.first_output_s - self.started_s) * 1000

    def log_row(self) -> dict[str, Any]:
        """The request-log row (keys are RequestLog columns). No prompt text, only section hashes."""
        usage = self.api_usage()
        prepared = self.prepared
        row: dict[str, Any] = {
            "created_at": self.created_at,
            "tenant_id": self.caller.tenant.id,
            "api_key_id": self.caller.api_key_id,
            "template": prepared.template_name if prepared else self.body.template,
            "template_version": prepared.template_version if prepared else None,
            "model": self.model_id or self.body.model,
            "backend": self.backend.name if self.backend else None,
            "canonicalized": self.body.canonicalize,
            "prompt_tokens": usage.prompt_tokens,
            "cached_tokens": usage.prompt_tokens_details.cached_tokens,
            "completion_tokens": usage.completion_tokens,
            "shadow_cached_tokens": self.shadow_cached_tokens,
            "ttft_ms": self.ttft_ms(),
            "latency_ms": (time.perf_counter() - self.started_s) * 1000,
            "status": self.status,
            "error_code": self.error_code,
            "miss_cause": None,
        }
        if prepared is not None:
            row.update(self._section_fields(prepared))
        return row

    def _section_fields(self, prepared: PreparedRequest) -> dict[str, Any]:
        sections = prepared.sections
        signals = sections.signals
        hashes = sections.hashes()
        fields: dict[str, Any] = {f"{name}_hash": hashes.get(name) for name in SECTION_NAMES}
        fields["sections_found"] = ",".join(signals.found)
        fields["dynamic_hoisted"] = bool(signals.dynamic_hoisted)
        fields["was_canonical"] = bool(signals.was_canonical)
        fields["dynamic_patterns"] = ",".join(getattr(signals, "dynamic_patterns", []) or []) or None
        attributor = self.gw.miss_attributor
        if attributor is not None and self.status == "ok":
            fields["miss_cause"] = attributor.attribute(self.caller.tenant.id, hashes)
        return fields


async def close_quietly(stream: AsyncIterator[BackendChunk], backend: Backend | None, request_id: str) -> None:
    try:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
        elif backend is not None:
            backend.abort(request_id)
    except Exception:
        log.debug("closing backend stream %s raised", request_id, exc_info=True)
