"""The chat API in-process: real SQLite, the real engine and model, through the full request path."""

from __future__ import annotations

import json

import pytest
from tests.support.app import chat_body, create_tenant, sse_payloads, wait_for_log_rows

pytestmark = pytest.mark.slow


def test_chat_completion_answers_and_second_identical_request_hits_cache(client):
    tenant = create_tenant(client, "acme")
    first = client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"])
    second = client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"])
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert "Paris" in body["choices"][0]["message"]["content"]
    assert body["choices"][0]["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < usage["prompt_tokens"]
    assert second.json()["choices"][0]["message"]["content"] == body["choices"][0]["message"]["content"]


def test_stream_is_openai_sse_with_usage_chunk_and_done(client):
    tenant = create_tenant(client, "acme")
    plain = client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"]).json()
    body = chat_body(stream=True, stream_options={"include_usage": True})
    with client.stream("POST", "/v1/chat/completions", json=body, headers=tenant["headers"]) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        payloads = sse_payloads(response.iter_lines())
    assert payloads[-1] == "[DONE]"
    chunks = payloads[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == plain["choices"][0]["message"]["content"]
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finish) == 1 and finish[0]["choices"][0]["finish_reason"] == "stop"
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert all(c["usage"] is None for c in chunks[:-1])


def test_stream_without_include_usage_has_no_usage_field(client):
    tenant = create_tenant(client, "acme")
    with client.stream("POST", "/v1/chat/completions", json=chat_body(stream=True), headers=tenant["headers"]) as response:
        payloads = sse_payloads(response.iter_lines())
    assert payloads[-1] == "[DONE]" and all("usage" not in c for c in payloads[:-1])


def test_tenants_never_share_cache_unless_they_share_a_cache_group(client):
    owner = create_tenant(client, "owner")
    stranger = create_tenant(client, "stranger")
    client.post("/v1/chat/completions", json=chat_body(), headers=owner["headers"])
    probe = client.post("/v1/chat/completions", json=chat_body(), headers=stranger["headers"]).json()
    assert probe["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    first = create_tenant(client, "team-a", cache_group="team")
    second = create_tenant(client, "team-b", cache_group="team")
    client.post("/v1/chat/completions", json=chat_body(), headers=first["headers"])
    shared = client.post("/v1/chat/completions", json=chat_body(), headers=second["headers"]).json()
    assert shared["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_each_request_writes_one_log_row_with_shadow_and_section_hashes(client):
    tenant = create_tenant(client, "acme")
    for _ in range(2):
        assert client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"]).status_code == 200
    for _ in range(2):
        raw = client.post("/v1/chat/completions", json=chat_body(canonicalize=False), headers=tenant["headers"]).json()
    rows = wait_for_log_rows(client.app.state.gw, 4)
    assert len(rows) == 4
    second, raw_row = rows[1], rows[3]
    assert second.tenant_id == tenant["id"] and second.status == "ok" and second.backend == "embedded"
    assert second.cached_tokens > 0 and second.prompt_tokens > second.cached_tokens
    assert second.shadow_cached_tokens is not None and second.shadow_cached_tokens > 0
    assert second.system_hash and second.question_hash and second.template == "chat"
    assert second.canonicalized is True and "system" in second.sections_found
    assert second.ttft_ms is not None and second.latency_ms >= second.ttft_ms
    assert raw_row.canonicalized is False and raw_row.template is None
    assert raw_row.prompt_tokens == raw["usage"]["prompt_tokens"]
    # In raw order the shadow index sees what the engine sees: its hit matches the engine's to a page.
    assert abs(raw_row.shadow_cached_tokens - raw_row.cached_tokens) <= client.app.state.gw.engine.config.page_size


def test_tools_and_tool_history_are_accepted(client):
    tenant = create_tenant(client, "agent")
    tools = [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    ]
    messages = [
        {"role": "developer", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21, "sky": "clear"}'},
        {"role": "user", "content": "So is it warm?"},
    ]
    body = {"model": "default", "messages": messages, "tools": tools, "tool_choice": "auto", "max_tokens": 16, "temperature": 0}
    response = client.post("/v1/chat/completions", json=body, headers=tenant["headers"])
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] in ("stop", "length", "tool_calls")
    assert choice["message"]["content"] or choice["message"]["tool_calls"]


def test_models_lists_the_engine_model(client, engine):
    tenant = create_tenant(client, "acme")
    models = client.get("/v1/models", headers=tenant["headers"]).json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == [engine.model_id]
    assert client.get(f"/v1/models/{engine.model_id}", headers=tenant["headers"]).status_code == 200
    by_id = client.post("/v1/chat/completions", json=chat_body(model=engine.model_id), headers=tenant["headers"])
    assert by_id.status_code == 200 and by_id.json()["model"] == engine.model_id


def test_canonicalize_preview_returns_sections_tokens_and_rendered_prompt(client):
    tenant = create_tenant(client, "acme")
    body = chat_body(context=[{"id": "d1", "text": "Paris is the capital of France."}])
    body["messages"][0]["content"] = "Today is 2026-11-29. " + body["messages"][0]["content"]
    preview = client.post("/v1/canonicalize", json=body, headers=tenant["headers"]).json()
    assert preview["sections"]["context"][0]["id"] == "d1"
    assert preview["sections"]["dynamic"] and preview["signals"]["dynamic_hoisted"] is True
    assert 0 < preview["static_prefix_len"] < preview["num_tokens"]
    assert sum(preview["section_tokens"].values()) == preview["num_tokens"]
    assert "Paris is the capital of France." in preview["rendered"] and isinstance(preview["lint"], list)


def test_named_tool_choice_forces_a_parseable_tool_call(client):
    tenant = create_tenant(client, "agent")
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    body = {"model": "default", "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [tool], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "max_tokens": 40, "temperature": 0}
    response = client.post("/v1/chat/completions", json=body, headers=tenant["headers"]).json()
    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    call = choice["message"]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}, headers=tenant["headers"]) as streamed:
        chunks = sse_payloads(streamed.iter_lines())[:-1]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert any(d.get("tool_calls") for d in deltas) and not any(d.get("content") for d in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    unknown = {**body, "tool_choice": {"type": "function", "function": {"name": "nope"}}}
    assert client.post("/v1/chat/completions", json=unknown, headers=tenant["headers"]).status_code == 400
