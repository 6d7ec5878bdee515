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


def test_tool_calls_stream_id_and_name_first_then_argument_fragments():
    factory = ChunkFactory("c", 1, "m", include_usage=False)
    arguments = json.dumps({"city": "Paris", "unit": "celsius", "days": 3})
    calls = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": arguments}},
             {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]
    deltas = [decode(event)["choices"][0]["delta"]["tool_calls"] for event in factory.tool_calls(calls)]
    assert all(len(d) == 1 for d in deltas)
    heads = [d[0] for d in deltas if "id" in d[0]]
    assert heads == [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}},
                     {"index": 1, "id": "call_2", "type": "function", "function": {"name": "g", "arguments": ""}}]
    fragments = [d[0] for d in deltas if "id" not in d[0]]
    assert all(set(f) == {"index", "function"} and set(f["function"]) == {"arguments"} for f in fragments)
    first_call = [f["function"]["arguments"] for f in fragments if f["index"] == 0]
    assert len(first_call) > 1 and "".join(first_call) == arguments
    assert deltas.index([heads[1]]) > max(i for i, d in enumerate(deltas) if d[0]["index"] == 0)
