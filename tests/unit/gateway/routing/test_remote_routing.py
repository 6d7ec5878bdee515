"""Remote backends through litellm against a tiny real OpenAI-compatible server on loopback.

The server streams Server-Sent Events exactly like OpenAI's API (deltas, a finish chunk, a usage
chunk) and records what it received, so the test sees what litellm really sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from gateway.errors import from_exception
from gateway.routing.backend import BackendUnavailableError, GenerationParams, OutputFormat, PreparedPrompt, ToolChoice
from gateway.tenants.isolation import cache_namespace
from gateway.routing.remote import BackendRejectedError, RemoteBackend
from gateway.routing.salt import CacheSalter
from gateway.routing.router import FailoverBackend, Router
from tests.support.ports import free_port

MESSAGES = ({"role": "system", "content": "You are terse."}, {"role": "user", "content": "say hello world"})


def tiny_openai_app(received: list[dict]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions(request: Request):
        body = await request.json()
        received.append(body)
        if body.get("max_tokens", 1) > 1000:
            return JSONResponse({"error": {"message": "max_tokens too large", "type": "invalid_request_error"}}, 400)
        words = ["hello", " world"]

        def event(delta: dict, finish: str | None = None, usage: dict | None = None) -> str:
            choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
            chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"], "choices": choices}
            if usage:
                chunk["usage"] = usage
            return f"data: {json.dumps(chunk)}\n\n"

        async def events():
            yield event({"role": "assistant", "content": ""})
            for word in words:
                yield event({"content": word})
            yield event({}, finish="stop")
            usage = {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22, "prompt_tokens_details": {"cached_tokens": 16}}
            yield event({}, usage=usage)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


@pytest.fixture(scope="module")
def remote():
    received: list[dict] = []
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(tiny_openai_app(received), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1", received
    server.should_exit = True
    thread.join(timeout=10)


def prompt() -> PreparedPrompt:
    return PreparedPrompt(token_ids=(1, 2, 3), text="", messages=MESSAGES, static_prefix_len=2, model="tiny")


async def collect(backend, params: GenerationParams | None = None):
    return [c async for c in backend.stream(prompt(), params or GenerationParams(max_tokens=8), "tenant:1|tiny", "r1")]


def test_remote_streams_deltas_then_one_final_chunk_with_usage(remote):
    url, received = remote
    chunks = asyncio.run(collect(RemoteBackend("r", "tiny", url, "sk-x")))
    assert "".join(c.text for c in chunks) == "hello world"
    final = chunks[-1]
    assert final.finish_reason == "stop" and [c for c in chunks if c.usage] == [final]
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (20, 2)
    assert received[-1]["messages"] == list(MESSAGES) and received[-1]["stream"] is True


def test_remote_cached_tokens_are_unknown_unless_the_remote_keeps_tenants_apart(remote):
    url, _ = remote
    shared = asyncio.run(collect(RemoteBackend("r", "tiny", url)))[-1]
    isolated = asyncio.run(collect(RemoteBackend("r", "tiny", url, report_cached_tokens=True)))[-1]
    salted = asyncio.run(collect(RemoteBackend("r", "tiny", url, kind="vllm", salter=CacheSalter(b"k"))))[-1]
    assert shared.usage.cached_tokens is None
    assert isolated.usage.cached_tokens == 16 and salted.usage.cached_tokens == 16


def test_the_request_litellm_sends_carries_the_gateways_salt_per_cache_domain(remote):
    """Two tenants: two salts; two tenants of one cache group: one salt; none from the client (the request
    is built from the namespace and GenerationParams, which has no salt field; a body's `cache_salt` is
    shown not to pass through in tests/integration/gateway/test_edge_gateway.py)."""
    url, received = remote
    backend = RemoteBackend("r", "tiny", url, kind="vllm", salter=CacheSalter(b"server-secret"))
    client_params = GenerationParams(max_tokens=8)
    salts = []
    for tenant_id, group in ((1, None), (2, None), (3, "team"), (4, "team")):
        namespace = cache_namespace(tenant_id, group, "tiny")
        asyncio.run(collect_in(backend, namespace, client_params))
        salts.append(received[-1]["cache_salt"])
    assert salts[0] != salts[1] and salts[2] == salts[3] and salts[2] not in salts[:2]
    assert all(len(salt) == 64 for salt in salts)
    assert salts[0] == CacheSalter(b"server-secret").salt(cache_namespace(1, None, "tiny"))
    assert salts[0] != CacheSalter(b"another-secret").salt(cache_namespace(1, None, "tiny"))
    unsalted = RemoteBackend("r", "tiny", url, kind="openai")
    asyncio.run(collect_in(unsalted, cache_namespace(1, None, "tiny"), client_params))
    assert "cache_salt" not in received[-1]


async def collect_in(backend, namespace: str, params: GenerationParams):
    return [c async for c in backend.stream(prompt(), params, namespace, "r-salt")]


def test_remote_client_errors_are_400_and_do_not_mark_it_unhealthy(remote):
    url, _ = remote
    backend = RemoteBackend("r", "tiny", url)
    with pytest.raises(BackendRejectedError) as caught:
        asyncio.run(collect(backend, GenerationParams(max_tokens=5000)))
    api_error = from_exception(caught.value)
    assert (api_error.status_code, api_error.code) == (400, "backend_rejected") and backend.is_healthy()


def test_unreachable_remote_is_unavailable_and_cools_down():
    dead = RemoteBackend("dead", "tiny", f"http://127.0.0.1:{free_port()}/v1", cooldown_s=30)
    with pytest.raises(BackendUnavailableError):
        asyncio.run(collect(dead))
    assert not dead.is_healthy()


def test_router_fails_over_from_a_dead_replica_to_a_live_one(remote):
    url, received = remote
    dead = RemoteBackend("dead", "tiny", f"http://127.0.0.1:{free_port()}/v1")
    live = RemoteBackend("live", "tiny", url)
    router = Router(None, [dead, live])
    backend = FailoverBackend([dead, live], router.loads)  # the dead one first, whatever the policy says
    num_before = len(received)
    chunks = asyncio.run(collect(backend))
    assert "".join(c.text for c in chunks) == "hello world"
    assert isinstance(backend, FailoverBackend) and backend.name == "live"
    assert len(received) == num_before + 1 and not dead.is_healthy()
    assert router.pick(prompt(), "tenant:1|tiny").candidates[0] is live


def test_abort_ends_the_stream_with_finish_reason_abort(remote):
    url, _ = remote
    backend = RemoteBackend("r", "tiny", url)

    async def first_then_abort():
        chunks = backend.stream(prompt(), GenerationParams(max_tokens=8), "tenant:1|tiny", "r-abort")
        first = await anext(chunks)
        backend.abort("r-abort")
        rest = [c async for c in chunks]
        return [first, *rest]

    chunks = asyncio.run(first_then_abort())
    assert chunks[0].text == "hello" and chunks[-1].finish_reason == "abort"
    assert "world" not in "".join(c.text for c in chunks)


def test_remote_gets_response_format_tools_and_parallel_tool_calls_passed_through(remote):
    url, received = remote
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    response_format = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    params = GenerationParams(max_tokens=8, tools=(tool,), tool_choice=ToolChoice("required"), parallel_tool_calls=False,
                              output=OutputFormat("json_schema", "a", {"type": "object"}))
    asyncio.run(collect(RemoteBackend("r", "tiny", url), params))
    sent = received[-1]
    assert sent["response_format"] == response_format and sent["tools"] == [tool]
    assert sent["tool_choice"] == "required" and sent["parallel_tool_calls"] is False
