"""A real `radixgate serve` on loopback with the real default model, driven by `litellm.completion(model="openai/...")`."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm  # noqa: E402

pytestmark = pytest.mark.slow

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]


def complete(gateway_server, key: str, **kwargs):
    return litellm.completion(
        model="openai/default", api_base=gateway_server.api_base, api_key=key, messages=MESSAGES,
        max_tokens=12, temperature=0, num_retries=0, **kwargs,
    )


def test_litellm_completion_reports_cached_tokens(gateway_server, tenant_key):
    first = complete(gateway_server, tenant_key)
    second = complete(gateway_server, tenant_key)
    assert "Paris" in first.choices[0].message.content
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert 0 < second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens


def test_litellm_streaming_with_usage(gateway_server, tenant_key):
    plain = complete(gateway_server, tenant_key)
    chunks = list(complete(gateway_server, tenant_key, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    usage = next(getattr(c, "usage", None) for c in reversed(chunks) if getattr(c, "usage", None))
    assert usage.prompt_tokens == plain.usage.prompt_tokens
    assert usage.prompt_tokens_details.cached_tokens > 0


def test_litellm_with_tools(gateway_server, tenant_key):
    tools = [{"type": "function", "function": {
        "name": "lookup_capital", "description": "Capital city of a country.",
        "parameters": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}}}]
    response = complete(gateway_server, tenant_key, tools=tools, tool_choice="auto")
    choice = response.choices[0]
    assert choice.finish_reason in ("stop", "length", "tool_calls")
    assert choice.message.content or choice.message.tool_calls
    assert response.usage.prompt_tokens_details.cached_tokens is not None


def test_litellm_bad_key_is_authentication_error(gateway_server):
    with pytest.raises(litellm.AuthenticationError):
        complete(gateway_server, "sk-wrong")
