"""A Messages body as the internal GenerationRequest: conversation, tools, sampling, cache breakpoints, routing key,
and a 400 naming the field for what radixgate cannot serve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.errors import ApiError, field_error
from gateway.generation.request import CacheBreakpoint, OutputFormat, ToolChoice
from gateway.messages.parse import count_request, generation_request, messages_param
from gateway.messages.schemas import CountTokensRequest, MessagesRequest

WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
EPHEMERAL = {"type": "ephemeral"}


def parse(**fields):
    body = MessagesRequest.model_validate({"model": "default", "max_tokens": 64,
                                           "messages": [{"role": "user", "content": "Hi"}], **fields})
    return generation_request(body)


def refusal(**fields) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(**fields)
    assert caught.value.status_code == 400
    return caught.value


def test_system_blocks_tool_use_and_tool_results_become_the_chat_template_conversation():
    request = parse(system=[{"type": "text", "text": "cc_version=1"}, {"type": "text", "text": "You are an agent."}],
                    tools=[WEATHER], messages=[
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                          {"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                                          {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                                     {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
                                      "content": [{"type": "text", "text": "timeout"}]},
                                     {"type": "text", "text": "Summarize."}]},
    ])
    system, question, assistant, result_1, result_2, last = request.messages
    assert system == {"role": "system", "content": [{"type": "text", "text": "cc_version=1"},
                                                    {"type": "text", "text": "You are an agent."}]}
    assert question == {"role": "user", "content": "Weather in Paris and Rome?"}
    assert assistant["content"] == "Checking."
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in assistant["tool_calls"]] == [
        ("toolu_1", "get_weather", {"city": "Paris"}), ("toolu_2", "get_weather", {"city": "Rome"})]
    assert result_1 == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    assert result_2 == {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: timeout"}
    assert last == {"role": "user", "content": "Summarize."}
    assert request.tools == ({"type": "function", "function": {
        "name": "get_weather", "description": WEATHER["description"], "parameters": WEATHER["input_schema"]}},)


def test_sampling_tool_choice_and_output_format_carry_over():
    request = parse(max_tokens=32000, temperature=0.2, top_p=0.9, top_k=40, stop_sequences=["END"], tools=[WEATHER],
                    tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                    output_config={"effort": "high", "format": {"type": "json_schema", "schema": {"type": "object"}}})
    sampling = request.sampling
    assert (sampling.max_tokens, sampling.temperature, sampling.top_p, sampling.top_k, sampling.stop) == (
        32000, 0.2, 0.9, 40, ("END",))
    assert request.tool_choice == ToolChoice("function", "get_weather") and request.parallel_tool_calls is False
    assert request.output == OutputFormat("json_schema", "output", {"type": "object"})
    assert parse(tools=[WEATHER], tool_choice={"type": "any"}).tool_choice == ToolChoice("required")
    assert parse(tools=[WEATHER], tool_choice={"type": "none"}).tool_choice == ToolChoice("none")
    assert parse(tools=[WEATHER], tool_choice={"type": "auto", "disable_parallel_tool_use": False}).parallel_tool_calls is True
    assert parse(output_format={"type": "json_schema", "schema": {"type": "array"}}).output.schema == {"type": "array"}
    assert parse().sampling.top_k == 0 and parse().parallel_tool_calls is None


def test_what_claude_code_sends_on_every_request_is_accepted():
    user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": "4f1c2a9e-0000-4000-8000-000000000001"})
    request = parse(thinking={"type": "adaptive"}, context_management={"edits": [{"type": "clear_thinking_20251015"}]},
                    output_config={"effort": "high"}, max_tokens=32000, metadata={"user_id": user_id},
                    diagnostics={"previous_message_id": None}, stream=True)
    assert request.output is None
    assert request.route_key == "claude-code-session:4f1c2a9e-0000-4000-8000-000000000001"
    assert request.user == user_id
    assert parse(thinking={"type": "enabled", "budget_tokens": 2048}).messages == parse().messages


def test_claude_codes_captured_request_parses_with_its_system_turn_and_breakpoints():
    body = json.loads((Path(__file__).parent / "claude_code_request.json").read_text())
    request = generation_request(MessagesRequest.model_validate(body), "f7cea0bd-2df6-4695-b85b-e042b0188d26")
    roles = [message["role"] for message in request.messages]
    assert roles == ["system", "user", "system"] and len(request.tools) == 21
    assert request.messages[-1]["content"].startswith("# Environment")
    assert request.cache_breakpoints == (CacheBreakpoint(1, 300.0), CacheBreakpoint(3, 300.0))
    assert request.route_key == "claude-code-session:f7cea0bd-2df6-4695-b85b-e042b0188d26"
    assert request.sampling.max_tokens == 32000 and request.output is None


def test_session_header_wins_and_older_user_ids_still_route():
    body = MessagesRequest.model_validate({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
                                          "metadata": {"user_id": "user_ab12_account__session_1234abcd-5678"}})
    assert generation_request(body).route_key == "claude-code-session:1234abcd-5678"
    assert generation_request(body, "sess-9").route_key == "claude-code-session:sess-9"
    assert parse(metadata={"user_id": "plain-user"}).route_key is None


def test_cache_control_marks_become_message_granular_breakpoints():
    request = parse(system=[{"type": "text", "text": "S", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                    tools=[{**WEATHER, "cache_control": EPHEMERAL}], messages=[
        {"role": "user", "content": [{"type": "text", "text": "q1"}, {"type": "text", "text": "env", "cache_control": EPHEMERAL}]},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"}])
    # tools and system: the leading system message (1h wins over the tool's 5m); the marked block: through messages[1]
    assert request.cache_breakpoints == (CacheBreakpoint(1, 3600.0), CacheBreakpoint(2, 300.0))
    top_level = parse(cache_control=EPHEMERAL, messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                                                         {"role": "user", "content": "q2"}])
    assert top_level.cache_breakpoints == (CacheBreakpoint(3, 300.0),)
    assert parse(tools=[{**WEATHER, "cache_control": EPHEMERAL}]).cache_breakpoints == (CacheBreakpoint(0, 300.0),)
    results = parse(messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]}, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": EPHEMERAL}, {"type": "text", "text": "go"}]}],
        tools=[WEATHER])
    assert results.cache_breakpoints == (CacheBreakpoint(3, 300.0),)  # through the tool message, before the text


@pytest.mark.parametrize(("fields", "param"), [
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}]}, "messages.0.content.0.type"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}, "messages.0.content.0.type"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]}, {"role": "user", "content": "x"}]},
     "messages.1.content.0.type"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools.0.type"),
    ({"tools": [{"name": "f"}]}, "tools.0.input_schema"),
    ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
    ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ({"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]}, "mcp_servers"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "The answer is"}]}, "messages.1.role"),
    ({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}, "system.0.cache_control.ttl"),
    ({"cache_control": {"type": "persistent"}}, "cache_control.type"),
    ({"output_config": {"format": {"type": "regex", "schema": {}}}}, "output_config.format.type"),
])
def test_what_radixgate_cannot_serve_is_a_400_naming_the_field(fields, param):
    error = refusal(**fields)
    assert error.param == param and param in error.message


def test_more_than_four_breakpoints_is_a_400():
    blocks = [{"type": "text", "text": f"s{i}", "cache_control": EPHEMERAL} for i in range(5)]
    assert refusal(system=blocks).param == "cache_control"


def test_count_request_has_the_prompt_fields_of_the_same_body():
    fields = {"model": "default", "system": "S", "tools": [WEATHER], "tool_choice": {"type": "any"},
              "messages": [{"role": "user", "content": "q"}], "cache_control": EPHEMERAL}
    counted = count_request(CountTokensRequest.model_validate(fields))
    sent = generation_request(MessagesRequest.model_validate({**fields, "max_tokens": 5, "temperature": 0}))
    assert (counted.messages, counted.tools, counted.tool_choice, counted.output, counted.cache_breakpoints) == (
        sent.messages, sent.tools, sent.tool_choice, sent.output, sent.cache_breakpoints)


def test_internal_fields_are_named_as_the_messages_api_names_them():
    assert messages_param(("tools", 2, "parameters")) == "tools.2.input_schema"
    assert messages_param(("output", "schema")) == "output_config.format.schema"
    assert messages_param(("max_tokens",)) == "max_tokens" and messages_param(("stop",)) == "stop_sequences"
    error = field_error(("tools", 0, "parameters"), lambda p: f"{p} is not a valid schema").name_field(messages_param)
    assert (error.param, error.message) == ("tools.0.input_schema", "tools.0.input_schema is not a valid schema")
