"""A Responses request as the internal chat request, and a chained turn's prompt extending the previous one."""

from __future__ import annotations

import pytest

from gateway.chat.prepare import prepare_request
from gateway.errors import ApiError
from gateway.responses.items import normalize_input, output_items
from gateway.responses.schemas import ResponsesRequest
from gateway.responses.service import responses_param
from gateway.responses.to_chat import to_chat_request

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def chat_of(**fields):
    body = ResponsesRequest.model_validate({"model": "default", **fields})
    return to_chat_request(body, normalize_input(body.input))


def test_instructions_input_tools_and_sampling_map_onto_the_chat_request():
    chat = chat_of(instructions="Be brief.", input="Weather in Paris?", tools=[WEATHER],
                   tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=9, temperature=0,
                   top_p=0.5, prompt_cache_key="k", safety_identifier="u1", template="agent", canonicalize=True)
    assert [(m.role, m.content) for m in chat.messages] == [("system", "Be brief."), ("user", "Weather in Paris?")]
    assert chat.tools == [{"type": "function", "function": {k: WEATHER[k] for k in ("name", "description", "parameters")}}]
    assert chat.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert (chat.max_completion_tokens, chat.temperature, chat.top_p) == (9, 0, 0.5)
    assert (chat.prompt_cache_key, chat.user, chat.template) == ("k", "u1", "agent")


def test_text_format_becomes_response_format():
    chat = chat_of(input="x", text={"format": {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True}})
    assert chat.response_format == {
        "type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}}
    assert chat_of(input="x", text={"format": {"type": "json_object"}}).response_format == {"type": "json_object"}
    assert chat_of(input="x", text={"format": {"type": "text"}}).response_format is None


@pytest.mark.parametrize(("fields", "param"), [
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
    ({"tool_choice": {"type": "function", "name": "get_weather"}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"text": {"format": {"type": "json_schema", "name": "bad name", "schema": SCHEMA}}}, "text.format.name"),
    ({"text": {"format": {"type": "json_schema", "name": "ok", "schema": "not a schema"}}}, "text.format.schema"),
    ({"background": True}, "background"),
    ({"truncation": "auto"}, "truncation"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"include": ["message.output_text.logprobs"]}, "include"),
])
def test_what_radixgate_cannot_honour_is_a_400_naming_the_field(fields, param):
    with pytest.raises(ApiError) as caught:
        chat_of(input="x", **fields)
    assert caught.value.status_code == 400 and caught.value.param == param


def test_a_request_without_any_input_is_a_400():
    with pytest.raises(ApiError) as caught:
        chat_of(input=[])
    assert caught.value.param == "input"


def prompt_ids(registry, tokenizer, body: ResponsesRequest, items: list[dict]) -> tuple[int, ...]:
    prepared = prepare_request(to_chat_request(body, items), templates=registry, tokenizer=tokenizer,
                               model_id="m", max_context=8192, default_max_tokens=16)
    return prepared.prompt.token_ids


def call(call_id: str, city: str) -> list[dict]:
    return output_items("", [{"id": call_id, "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'}}])


def result(call_id: str) -> list[dict]:
    return [{"type": "function_call_output", "call_id": call_id, "output": "sunny, 21 C"}]


FREE_TURNS = [("Weather in Paris?", call("call_1", "Paris")), (result("call_1"), output_items("It is sunny.", None)),
              ("And tomorrow?", output_items("Probably rain.", None))]
FORCED_TURNS = [("Weather in Paris?", call("call_1", "Paris")), (result("call_1"), call("call_2", "Rome")),
                (result("call_2"), call("call_3", "Oslo"))]


@pytest.mark.parametrize(("tools", "tool_choice", "turns"), [
    (None, None, FREE_TURNS), ([WEATHER], "auto", FREE_TURNS), ([WEATHER], "required", FORCED_TURNS)])
def test_a_chained_turn_prompt_starts_with_the_whole_previous_prompt(registry, smollm2_tokenizer, tools, tool_choice, turns):
    """previous input + previous output + new input renders the previous prompt's exact token ids first
    (a forced call's `<tool_call>` opening included: the next turn renders the call from that opening on)."""
    fields = {"model": "default", "instructions": "You are a weather assistant.", "tools": tools, "tool_choice": tool_choice}
    items, previous = [], ()
    for new_input, output in turns:
        items = [*items, *normalize_input(new_input)]
        ids = prompt_ids(registry, smollm2_tokenizer, ResponsesRequest.model_validate(fields), items)
        assert ids[:len(previous)] == previous and len(ids) > len(previous)
        items, previous = [*items, *output], ids


@pytest.mark.parametrize(("chat_param", "param"), [
    ("response_format.json_schema.schema", "text.format.schema"),
    ("response_format.json_schema", "text.format"),
    ("tools[2].function.parameters", "tools[2].parameters"),
    ("max_completion_tokens", "max_output_tokens"),
    ("messages", "input"),
    ("tool_choice", "tool_choice"),
    (None, None),
])
def test_chat_path_errors_name_the_responses_field(chat_param, param):
    assert responses_param(chat_param) == param
