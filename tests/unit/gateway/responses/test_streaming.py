"""The Responses event stream around a fake backend: the documented order, numbered events, failure stores nothing."""

from __future__ import annotations

import json
from types import SimpleNamespace

from gateway.canonicalize import canonicalize
from gateway.generation.prepare import PreparedRequest
from gateway.generation.record import RunRecorder
from gateway.generation.request import GenerationRequest
from gateway.generation.run import GenerationRun
from gateway.responses.items import normalize_input
from gateway.responses.render import ResponseTurn
from gateway.responses.schemas import ResponsesRequest
from gateway.responses.service import StartedResponse
from gateway.responses.streaming import stream_response
from gateway.routing.backend import BackendChunk, BackendUsage, GenerationParams, PreparedPrompt
from gateway.tenants.limits import TenantLimits


class ScriptedBackend:
    """Yields the given texts one chunk each, then finishes, or raises where `fail_after` says."""

    name = "fake"

    def __init__(self, texts: list[str], fail_after: int | None = None) -> None:
        self.texts, self.fail_after = texts, fail_after

    def abort(self, request_id: str) -> None:
        pass

    async def stream(self, prompt, params, namespace, request_id):
        for index, text in enumerate(self.texts):
            if index == self.fail_after:
                raise RuntimeError("backend went away")
            yield BackendChunk(text=text, token_ids=(index,))
        yield BackendChunk(finish_reason="stop", usage=BackendUsage(10, 4, len(self.texts), 0.01, 0.02))


class CountingDatabase:
    """A session factory that counts the times the database is reached for (and then refuses)."""

    def __init__(self) -> None:
        self.num_uses = 0

    def __call__(self):
        self.num_uses += 1
        raise RuntimeError("no database in this test")


async def started_on(backend: ScriptedBackend, store: bool, rows: list) -> StartedResponse:
    body = ResponsesRequest(model="default", input="hi", store=store)
    request = GenerationRequest(model="default", messages=({"role": "user", "content": "hi"},))
    tenant = SimpleNamespace(id=7, name="acme", cache_group=None, max_concurrency=None)
    run = GenerationRun(caller=SimpleNamespace(tenant=tenant, api_key_id=3), request=request, request_id="resp_x",
                  tenant_limits=TenantLimits(4), recorder=RunRecorder(log_writer=SimpleNamespace(enqueue=rows.append)),
                  background_tasks=set())
    await run.admit()
    prompt = PreparedPrompt(token_ids=tuple(range(10)), text="hi", messages=(), static_prefix_len=0, model="m")
    run.prepared = PreparedRequest(prompt, GenerationParams(), canonicalize(request.canonical_input()), prompt.token_ids, {},
                                   "chat", None, True)
    run.open(backend, None)
    await run.prefetch()
    return StartedResponse(ResponseTurn("resp_x", body, normalize_input("hi"), "m", 1), run, 7, None)


async def events_of(stream) -> list[dict]:
    events = []
    async for frame in stream:
        head, data = frame.decode().rstrip("\n").split("\n")
        payload = json.loads(data.removeprefix("data: "))
        assert head == f"event: {payload['type']}"
        events.append(payload)
    return events


async def test_text_answer_streams_the_documented_events_numbered_from_zero():
    rows: list = []
    started = await started_on(ScriptedBackend(["The ", "capital ", "is Paris."]), store=False, rows=rows)
    database = CountingDatabase()
    events = await events_of(stream_response(started, session_factory=database))
    assert database.num_uses == 0
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    item_ids = {e["item_id"] for e in events if "item_id" in e} | {events[2]["item"]["id"]}
    assert len(item_ids) == 1 and events[7]["text"] == "The capital is Paris."
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["output"][0]["content"][0]["text"] == "The capital is Paris."
    assert final["usage"]["input_tokens"] == 10 and final["usage"]["input_tokens_details"]["cached_tokens"] == 4
    assert rows[0]["status"] == "ok" and started.run.tenant_limits.num_active(7) == 0


async def test_failure_after_the_stream_started_is_one_failed_event_and_nothing_stored():
    rows: list = []
    started = await started_on(ScriptedBackend(["Par", "is", "!"], fail_after=2), store=True, rows=rows)
    database = CountingDatabase()
    events = await events_of(stream_response(started, session_factory=database))
    assert database.num_uses == 0
    assert events[-1]["type"] == "response.failed" and "response.completed" not in [e["type"] for e in events]
    assert events[-1]["response"]["status"] == "failed" and events[-1]["response"]["error"]["message"]
    assert rows[0]["status"] == "error" and started.run.tenant_limits.num_active(7) == 0
