"""The internal Answer in the Messages API's shapes: the message, usage with Anthropic's meaning, the stream's
content blocks, and Anthropic's error envelope."""

from __future__ import annotations

import json
from types import SimpleNamespace

from gateway.errors import ApiError, bad_request, service_unavailable, too_many_requests, unauthorized
from gateway.generation.result import Answer, ToolCall, Usage
from gateway.messages.envelope import error_body, error_response
from gateway.messages.render import message, usage
from gateway.messages.streaming import Blocks

RUN = SimpleNamespace(request_id="msg_1", model_id="m", diagnosis=None)


def decode(frame: bytes) -> dict:
    head, data = frame.decode().rstrip("\n").split("\n")
    payload = json.loads(data.removeprefix("data: "))
    assert head == f"event: {payload['type']}"
    return payload


def test_usage_splits_the_prompt_into_read_written_and_the_rest():
    figures = usage(Usage(prompt_tokens=1000, cached_tokens=600, completion_tokens=7, cache_write_tokens=300,
                          cache_write_1h_tokens=100))
    assert (figures["input_tokens"], figures["cache_creation_input_tokens"], figures["cache_read_input_tokens"]) == (100, 300, 600)
    assert figures["cache_creation"] == {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 100}
    assert figures["input_tokens"] + figures["cache_creation_input_tokens"] + figures["cache_read_input_tokens"] == 1000
    assert figures["output_tokens"] == 7


def test_message_has_text_and_tool_use_blocks_and_anthropic_stop_reasons():
    calls = (ToolCall("toolu_1", "get_weather", '{"city": "Paris"}'), ToolCall("toolu_2", "f", "[1]"))
    called = message(RUN, Answer("", calls, "tool_calls", Usage(10, 0, 5)))
    assert called["content"] == [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                                 {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}}]
    assert (called["stop_reason"], called["id"], called["type"], called["role"]) == ("tool_use", "msg_1", "message", "assistant")
    cut = message(RUN, Answer("Hel", (), "length", Usage(10, 0, 5)))
    assert cut["content"] == [{"type": "text", "text": "Hel"}] and cut["stop_reason"] == "max_tokens"
    assert message(RUN, Answer("Hi.", (), "stop", Usage(10, 0, 2)))["stop_reason"] == "end_turn"
    assert message(RUN, Answer("", (), "stop", Usage(10, 0, 1)))["content"] == [{"type": "text", "text": ""}]
    stopped = message(RUN, Answer("4", (), "stop", Usage(10, 0, 2), stop_sequence="END"))
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", "END")


def test_the_diagnosis_hook_renders_what_the_run_carries():
    diagnosed = SimpleNamespace(request_id="msg_2", model_id="m",
                                diagnosis=SimpleNamespace(to_dict=lambda: {"cache_miss_reason": {"type": "system_changed"}}))
    assert message(diagnosed, Answer("x", (), "stop", Usage(3, 0, 1)))["diagnostics"] == {
        "cache_miss_reason": {"type": "system_changed"}}
    assert message(RUN, Answer("x", (), "stop", Usage(3, 0, 1)))["diagnostics"] is None


def test_stream_blocks_are_numbered_text_first_then_each_call_with_its_input_in_fragments():
    blocks = Blocks()
    frames = [blocks.open_text(), blocks.text("Hi"), *blocks.close_text(),
              *blocks.tool_use(ToolCall("toolu_1", "get_weather", '{"city": "Paris", "unit": "celsius"}'))]
    events = [decode(frame) for frame in frames]
    assert [(e["type"], e["index"]) for e in events[:3]] == [
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_stop", 0)]
    assert events[3] == {"type": "content_block_start", "index": 1,
                         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}
    fragments = [e["delta"]["partial_json"] for e in events[4:-1]]
    assert len(fragments) > 1 and json.loads("".join(fragments)) == {"city": "Paris", "unit": "celsius"}
    assert events[-1] == {"type": "content_block_stop", "index": 1}
    assert blocks.close_text() == []


def test_errors_take_anthropics_envelope_with_the_type_of_their_status():
    assert error_body(bad_request("max_tokens: Field required", "max_tokens")) == {
        "type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}
    cases = [(unauthorized(), 401, "authentication_error"), (ApiError(403, "no", "permission_error"), 403, "permission_error"),
             (ApiError(404, "gone"), 404, "not_found_error"), (too_many_requests("slow down"), 429, "rate_limit_error"),
             (service_unavailable("busy"), 529, "overloaded_error"), (ApiError(500, "boom", "server_error"), 500, "api_error")]
    for error, status, kind in cases:
        response = error_response(error)
        assert response.status_code == status and json.loads(response.body)["error"]["type"] == kind
    assert error_response(too_many_requests("x", 7)).headers["retry-after"] == "7"
