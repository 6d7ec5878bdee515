"""SSE framing of chat completion chunks, as OpenAI sends them."""

from __future__ import annotations

import json

from gateway.chat.schemas import make_usage
from gateway.chat.streaming import DONE_EVENT, ChunkFactory


def decode(event: bytes) -> dict:
    text = event.decode()
    assert text.startswith("data: ") and text.endswith("\n\n") and text.count("\n") == 2
    return json.loads(text[len("data: "):])


def test_chunks_share_id_and_carry_deltas():
    factory = ChunkFactory("chatcmpl-1", 123, "m", include_usage=False)
    role, content, finish = decode(factory.role()), decode(factory.content("Hi")), decode(factory.finish("stop"))
    assert {c["id"] for c in (role, content, finish)} == {"chatcmpl-1"}
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in (role, content, finish))
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert content["choices"][0]["delta"] == {"content": "Hi"} and content["choices"][0]["finish_reason"] is None
    assert finish["choices"][0]["delta"] == {} and finish["choices"][0]["finish_reason"] == "stop"
    assert DONE_EVENT == b"data: [DONE]\n\n"


def test_include_usage_adds_null_usage_then_a_usage_chunk_with_no_choices():
    factory = ChunkFactory("chatcmpl-1", 123, "m", include_usage=True)
    assert decode(factory.content("x"))["usage"] is None
    usage = decode(factory.usage(make_usage(10, 4, 3)))
    assert usage["choices"] == []
    assert usage["usage"]["prompt_tokens_details"]["cached_tokens"] == 4 and usage["usage"]["total_tokens"] == 13


def test_tool_call_deltas_are_indexed():
    factory = ChunkFactory("c", 1, "m", include_usage=False)
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    delta = decode(factory.tool_calls([call]))["choices"][0]["delta"]
    assert delta["tool_calls"] == [{"index": 0, **call}]
