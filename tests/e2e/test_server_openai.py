"""A real `radixgate serve` on loopback with the real default model, driven by the official `openai` SDK."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from openai import OpenAI
from sqlalchemy import create_engine, select

from gateway.db.models import RequestLog

pytestmark = pytest.mark.slow

SYSTEM = "You are a helpful assistant. Answer in one short sentence."
QUESTION = "What is the capital of France?"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def messages(question: str = QUESTION) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture()
def client(gateway_server, tenant_key) -> OpenAI:
    return OpenAI(base_url=gateway_server.api_base, api_key=tenant_key, max_retries=0, timeout=120)


def test_openai_sdk_completion_with_cached_tokens_usage(client):
    first = client.chat.completions.create(model="default", messages=messages(), max_tokens=12, temperature=0)
    second = client.chat.completions.create(model="default", messages=messages(), max_tokens=12, temperature=0)
    assert "Paris" in first.choices[0].message.content
    assert first.choices[0].finish_reason in ("stop", "length")
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert 0 < second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens
    assert second.usage.total_tokens == second.usage.prompt_tokens + second.usage.completion_tokens


def test_openai_sdk_streaming_with_include_usage(client):
    plain = client.chat.completions.create(model="default", messages=messages(), max_tokens=12, temperature=0)
    stream = client.chat.completions.create(
        model="default", messages=messages(), max_tokens=12, temperature=0,
        stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.prompt_tokens == plain.usage.prompt_tokens
    assert usage.prompt_tokens_details.cached_tokens > 0


def test_openai_sdk_tools_and_tool_results(client):
    history = [
        {"role": "developer", "content": "You are a weather assistant. Use tools when needed."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temp_c": 21, "sky": "clear"})},
        {"role": "user", "content": "Should I take an umbrella?"},
    ]
    response = client.chat.completions.create(
        model="default", messages=history, tools=[WEATHER_TOOL], tool_choice="auto", max_tokens=24, temperature=0,
        user="user-42", seed=7, prompt_cache_key="weather",
    )
    choice = response.choices[0]
    assert choice.finish_reason in ("stop", "length", "tool_calls")
    assert choice.message.content or choice.message.tool_calls
    again = client.chat.completions.create(model="default", messages=history, tools=[WEATHER_TOOL], max_tokens=4, temperature=0)
    assert again.usage.prompt_tokens_details.cached_tokens > 0


def test_openai_sdk_sees_openai_errors(gateway_server, client):
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=gateway_server.api_base, api_key="sk-wrong", max_retries=0).chat.completions.create(
            model="default", messages=messages(), max_tokens=4)
    with pytest.raises(openai.BadRequestError) as too_many:
        client.chat.completions.create(model="default", messages=messages(), max_tokens=4, n=2)
    assert too_many.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="default", messages=messages(), max_tokens=4, extra_body={"template": "nope"})
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=messages(), max_tokens=4)


def test_openai_sdk_lists_models_and_extra_fields_work(client):
    model_ids = [m.id for m in client.models.list()]
    assert len(model_ids) == 1
    response = client.chat.completions.create(
        model=model_ids[0], messages=messages("Which city is the capital of France?"), max_tokens=12, temperature=0,
        extra_body={"context": [{"id": "doc-1", "text": "Paris is the capital of France."}], "template": "rag"},
    )
    assert response.model == model_ids[0] and response.choices[0].message.content
    raw = client.chat.completions.create(model="default", messages=messages(), max_tokens=4, extra_body={"canonicalize": False})
    assert raw.usage.prompt_tokens > 0


def test_client_disconnect_mid_stream_aborts_the_engine_request(gateway_server, tenant_key):
    body = {"model": "default", "messages": messages("Write a very long story about a dragon and a knight."),
            "max_tokens": 1500, "temperature": 0, "stream": True}
    headers = {"Authorization": f"Bearer {tenant_key}"}
    with httpx.stream("POST", f"{gateway_server.api_base}/chat/completions", json=body, headers=headers, timeout=60) as response:
        assert response.status_code == 200
        events = 0
        for line in response.iter_lines():
            events += line.startswith("data: ")
            if events >= 4:
                break
    row = wait_for_row(gateway_server, lambda r: r.error_code == "client_disconnected")
    assert row.status == "error" and row.completion_tokens < 1500
    assert "aborting" in gateway_server.log_text()


def test_client_that_gives_up_on_a_non_streaming_request_aborts_it(gateway_server, tenant_key):
    body = {"model": "default", "messages": messages("Write a very long essay about the history of Rome."),
            "max_tokens": 1500, "temperature": 0}
    headers = {"Authorization": f"Bearer {tenant_key}"}
    with pytest.raises(httpx.TimeoutException):
        # 0.5 s is a few dozen tokens at most; the essay runs to hundreds, so the client always gives up first
        httpx.post(f"{gateway_server.api_base}/chat/completions", json=body, headers=headers, timeout=0.5)
    row = wait_for_row(gateway_server, lambda r: r.error_code == "client_disconnected"
                       and r.tenant_id == tenant_id_of(gateway_server, tenant_key))
    assert row.completion_tokens < 1500


def tenant_id_of(gateway_server, key: str) -> int:
    from gateway.db.models import ApiKey
    from gateway.tenants.service import hash_key

    engine = create_engine(gateway_server.db_url)
    try:
        with engine.connect() as connection:
            return connection.execute(select(ApiKey.tenant_id).where(ApiKey.key_hash == hash_key(key))).scalar_one()
    finally:
        engine.dispose()


def test_server_logs_one_info_line_per_request(gateway_server, client):
    client.chat.completions.create(model="default", messages=messages(), max_tokens=4, temperature=0)
    deadline = time.monotonic() + 5
    while "chat tenant=" not in gateway_server.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    line = next(l for l in gateway_server.log_text().splitlines() if "chat tenant=" in l)
    for field in ("status=", "prompt=", "cached=", "ttft_ms=", "latency_ms="):
        assert field in line


def wait_for_row(gateway_server, predicate, timeout_s: float = 20.0) -> RequestLog:
    engine = create_engine(gateway_server.db_url)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            with engine.connect() as connection:
                rows = [r for r in connection.execute(select(RequestLog)) if predicate(r)]
            if rows:
                return rows[-1]
            time.sleep(0.2)
    finally:
        engine.dispose()
    raise AssertionError("no matching request-log row was written")
