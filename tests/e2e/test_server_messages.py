"""Anthropic's Messages API on a real `radixgate serve` with the default model, driven by real clients: the
`anthropic` SDK, langchain-anthropic's ChatAnthropic and pydantic-ai's AnthropicModel (issue 44)."""

from __future__ import annotations

import anthropic
import httpx
import jsonschema
import pytest
from anthropic import Anthropic

pytestmark = pytest.mark.slow

SYSTEM = "You are a helpful assistant. Answer in one short sentence."
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
EPHEMERAL = {"type": "ephemeral"}
LONG_SYSTEM = SYSTEM + " " + " ".join(f"Rule {i}: keep every answer polite, short and accurate." for i in range(120))


@pytest.fixture()
def client(gateway_server, tenant_key) -> Anthropic:
    return Anthropic(base_url=gateway_server.url, api_key=tenant_key, max_retries=0, timeout=300)


def prompt_figures(usage) -> int:
    return usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens


def test_create_answers_with_a_message_and_anthropic_usage(client):
    message = client.messages.create(model="default", max_tokens=16, extra_body={"temperature": 0}, system=SYSTEM,
                                     messages=[{"role": "user", "content": "What is the capital of France?"}])
    assert message.id.startswith("msg_") and message.type == "message" and message.role == "assistant"
    assert message.stop_reason in ("end_turn", "max_tokens") and "Paris" in message.content[0].text
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens == 0  # a fresh tenant: nothing of its own is cached


def test_stream_sends_every_event_in_order(client):
    with client.messages.stream(model="default", max_tokens=12, extra_body={"temperature": 0}, system=SYSTEM,
                                messages=[{"role": "user", "content": "What is the capital of France?"}]) as stream:
        kinds = [event.type for event in stream if event.type not in ("text", "ping")]  # "text": the SDK's own helper
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[1] == "content_block_start"
    assert set(kinds[2:-3]) == {"content_block_delta"} and len(kinds[2:-3]) >= 1
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert "Paris" in final.content[0].text and final.stop_reason in ("end_turn", "max_tokens")
    assert prompt_figures(final.usage) > 0 and final.usage.output_tokens > 0


def test_forced_tool_use_has_schema_valid_input_and_a_tool_result_round_trips(client):
    question = {"role": "user", "content": "What is the weather in Paris?"}
    called = client.messages.create(model="default", max_tokens=48, extra_body={"temperature": 0}, tools=[WEATHER],
                                    tool_choice={"type": "tool", "name": "get_weather"}, messages=[question])
    (call,) = [block for block in called.content if block.type == "tool_use"]
    assert called.stop_reason == "tool_use" and call.name == "get_weather" and call.id
    jsonschema.validate(call.input, WEATHER["input_schema"])
    # tool_choice none: the answer to a tool result is text (the 135M model, left to choose, calls again)
    answer = client.messages.create(model="default", max_tokens=24, extra_body={"temperature": 0}, tools=[WEATHER],
                                    tool_choice={"type": "none"}, messages=[
        question, {"role": "assistant", "content": [block.model_dump() for block in called.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny, 21 C."}]}])
    assert answer.stop_reason in ("end_turn", "max_tokens") and answer.content[0].type == "text"
    assert answer.content[0].text.strip()
    assert answer.usage.input_tokens + answer.usage.cache_read_input_tokens > called.usage.input_tokens


def test_count_tokens_is_the_prompt_of_the_same_body_and_a_marked_prefix_is_read_back(client):
    body = {"model": "default", "system": [{"type": "text", "text": LONG_SYSTEM, "cache_control": EPHEMERAL}],
            "tools": [WEATHER], "messages": [{"role": "user", "content": "Say hello."}]}
    counted = client.messages.count_tokens(**body).input_tokens
    assert counted > 1000
    first = client.messages.create(**body, max_tokens=8, extra_body={"temperature": 0})
    second = client.messages.create(**body, max_tokens=8, extra_body={"temperature": 0})
    assert prompt_figures(first.usage) == counted == prompt_figures(second.usage)
    assert first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens >= 1000  # the marked system prefix (and the tools) read from the cache


def test_errors_come_in_anthropics_envelope(gateway_server, client, tenant_key):
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="default", max_tokens=8, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}])
    envelope = bad.value.body  # the SDK keeps the whole body: {"type": "error", "error": {"type", "message"}}
    assert envelope["type"] == "error" and envelope["error"]["type"] == "invalid_request_error"
    assert "messages.0.content.0.type" in envelope["error"]["message"]
    response = httpx.post(f"{gateway_server.url}/v1/messages", json={"model": "default", "messages": []},
                          headers={"x-api-key": tenant_key, "anthropic-version": "2023-06-01"}, timeout=60)
    assert response.status_code == 400 and response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "invalid_request_error" and "max_tokens" in response.json()["error"]["message"]
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-opus-9", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.AuthenticationError):
        Anthropic(base_url=gateway_server.url, api_key="sk-wrong", max_retries=0).messages.create(
            model="default", max_tokens=8, messages=[{"role": "user", "content": "hi"}])


def test_models_list_in_anthropics_shape(client):
    (model,) = list(client.models.list())
    assert model.type == "model" and model.id and model.created_at is not None


def test_langchain_anthropic_invokes_and_forces_a_tool(gateway_server, tenant_key):
    from langchain_anthropic import ChatAnthropic

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"Sunny in {city}."

    llm = ChatAnthropic(base_url=gateway_server.url, api_key=tenant_key, model="default", temperature=0,
                        max_tokens=32, max_retries=0)
    assert "Paris" in llm.invoke("What is the capital of France? Answer in one sentence.").content
    reply = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("What is the weather in Lima?")
    (call,) = reply.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"]["city"], str)
