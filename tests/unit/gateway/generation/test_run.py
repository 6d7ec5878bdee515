"""GenerationRun around a fake backend: one log row with RequestLog's columns, slot released once, early exits abort."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from gateway.canonicalize import canonicalize
from gateway.db.models import REQUEST_LOG_COLUMNS
from gateway.generation.prepare import PreparedRequest
from gateway.generation.record import RunRecorder
from gateway.generation.request import GenerationRequest
from gateway.generation.run import GenerationRun
from gateway.routing.backend import BackendChunk, BackendUsage, GenerationParams, PreparedPrompt
from gateway.tenants.limits import TenantLimits


class RecordingLog:
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.reserved: list[dict] = []

    def enqueue(self, row: dict) -> None:
        self.rows.append(row)

    def reserve(self, row: dict) -> None:
        self.reserved.append(row)


class FakeBackend:
    """Yields `num_chunks` one-token chunks then a final one; records aborts and early closes."""

    name = "fake"

    def __init__(self, num_chunks: int = 3, delay_s: float = 0.0) -> None:
        self.num_chunks = num_chunks
        self.delay_s = delay_s
        self.aborted: list[str] = []

    def is_healthy(self) -> bool:
        return True

    def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    async def stream(self, prompt, params, namespace, request_id):
        is_finished = False
        try:
            for i in range(self.num_chunks):
                await asyncio.sleep(self.delay_s)
                yield BackendChunk(text=f"t{i}", token_ids=(i,))
            is_finished = True
            yield BackendChunk(finish_reason="stop", usage=BackendUsage(10, 4, self.num_chunks, 0.01, 0.02))
        finally:
            if not is_finished:
                self.abort(request_id)


async def make_run(backend: FakeBackend) -> tuple[GenerationRun, RecordingLog]:
    """An admitted run handed only its parts (tenant limits, a recorder, a task set), no GatewayState."""
    log = RecordingLog()
    tenant = SimpleNamespace(id=7, name="acme", cache_group=None, max_concurrency=None)
    request = GenerationRequest(model="default", messages=({"role": "user", "content": "hi"},))
    run = GenerationRun(
        caller=SimpleNamespace(tenant=tenant, api_key_id=3), request=request, request_id="chatcmpl-x",
        tenant_limits=TenantLimits(4), recorder=RunRecorder(log_writer=log), background_tasks=set(),
    )
    await run.admit()
    assert run.tenant_limits.num_active(7) == 1
    sections = canonicalize(request.canonical_input())
    prompt = PreparedPrompt(token_ids=tuple(range(10)), text="hi", messages=(), static_prefix_len=0, model="m")
    run.prepared = PreparedRequest(prompt, GenerationParams(), sections, prompt.token_ids, {}, "chat", None, True)
    run.namespace = "tenant:7|m"
    return run, log


async def drain(run: GenerationRun) -> str:
    return "".join([chunk.text async for chunk in run.chunks()])


async def test_finished_run_writes_one_row_with_request_log_columns_and_releases_its_slot():
    backend = FakeBackend()
    run, log = await make_run(backend)
    run.open(backend, None)
    await run.prefetch()
    assert await drain(run) == "t0t1t2"
    run.finish()
    run.finish()
    assert len(log.rows) == 1 and set(log.rows[0]) <= REQUEST_LOG_COLUMNS
    row = log.rows[0]
    assert (row["tenant_id"], row["api_key_id"], row["backend"], row["status"]) == (7, 3, "fake", "ok")
    assert (row["prompt_tokens"], row["cached_tokens"], row["completion_tokens"]) == (10, 4, 3)
    assert row["system_hash"] and row["question_hash"] and row["template"] == "chat"
    assert row["ttft_ms"] == 10.0 and run.tenant_limits.num_active(7) == 0 and backend.aborted == []


async def test_finishing_before_the_backend_is_done_aborts_it():
    backend = FakeBackend(num_chunks=50)
    run, log = await make_run(backend)
    run.open(backend, None)
    await run.prefetch()
    run.fail("client_disconnected")
    run.finish()
    await asyncio.gather(*run.background_tasks)
    assert backend.aborted == ["chatcmpl-x"]
    assert log.rows[0]["status"] == "error" and log.rows[0]["error_code"] == "client_disconnected"


async def test_disconnect_watcher_aborts_the_backend_request():
    class GoneRequest:
        async def is_disconnected(self) -> bool:
            return True

    backend = FakeBackend(num_chunks=50, delay_s=0.01)
    run, log = await make_run(backend)
    run.open(backend, GoneRequest())
    await asyncio.sleep(0.05)
    assert backend.aborted == ["chatcmpl-x"] and run.error_code == "client_disconnected"
    run.finish()


async def test_row_waits_for_the_canonical_shadow_figure_and_carries_it():
    from concurrent.futures import Future

    from gateway.insight.counterfactual import CanonicalFigures

    backend = FakeBackend()
    run, log = await make_run(backend)
    run.counterfactual = Future()
    run.open(backend, None)
    await run.prefetch()
    await drain(run)
    run.finish()
    assert log.rows == [] and run.tenant_limits.num_active(7) == 0  # the slot is not held for the figure
    (provisional,) = log.reserved  # durable meanwhile, under the id the complete row will have
    assert provisional["id"] == run.log_id and provisional["canonical_cached_tokens"] is None
    run.counterfactual.set_result(CanonicalFigures(cached_tokens=48, prompt_tokens=60, static_prefix_tokens=50,
                                                   system_prefix_tokens=20))
    (row,) = log.rows
    assert row["id"] == run.log_id
    assert (row["canonical_cached_tokens"], row["canonical_prompt_tokens"]) == (48, 60)
    assert (row["static_prefix_tokens"], row["system_prefix_tokens"]) == (50, 20)


async def test_run_without_a_canonical_rendering_logs_no_counterfactual():
    from concurrent.futures import Future

    backend = FakeBackend()
    run, log = await make_run(backend)
    run.counterfactual = Future()
    run.counterfactual.set_result(None)
    run.open(backend, None)
    await run.prefetch()
    await drain(run)
    run.finish()
    (row,) = log.rows
    assert row["canonical_cached_tokens"] is None and row["static_prefix_tokens"] is None
