"""A Responses request as the internal GenerationRequest, its field names, and a chained turn's prompt extending the previous one."""

from __future__ import annotations

import pytest

from gateway.errors import ApiError
from gateway.generation.prepare import output_spec, prepare_request
from gateway.generation.request import OutputFormat, ToolChoice
from gateway.responses.items import normalize_input, output_items
from gateway.responses.parse import generation_request, responses_param
from gateway.responses.schemas import ResponsesRequest
from gateway.generation.result import ToolCall

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def chat_of(**fields):
    body = ResponsesRequest.model_validate({"model": "default", **fields})
    return generation_request(body, normalize_input(body.input), chain_key="response-chain:resp_1")


def test_instructions_input_tools_and_sampling_map_onto_the_internal_request():
    request = chat_of(instructions="Be brief.", input="Weather in Paris?", tools=[WEATHER],
                      tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=9, temperature=0,
                      top_p=0.5, prompt_cache_key="k", safety_identifier="u1", template="agent", canonicalize=True,
                      context=[{"id": "d1", "text": "Paris is sunny."}])
    assert [(m["role"], m["content"]) for m in request.messages] == [("system", "Be brief."), ("user", "Weather in Paris?")]
    assert request.tools == ({"type": "function", "function": {k: WEATHER[k] for k in ("name", "description", "parameters")}},)
    assert request.tool_choice == ToolChoice("function", "get_weather")
    sampling = request.sampling
    assert (sampling.max_tokens, sampling.temperature, sampling.top_p) == (9, 0, 0.5)
    assert (request.route_key, request.user, request.template) == ("k", "u1", "agent")
    assert request.context == ({"id": "d1", "text": "Paris is sunny."},)
    assert chat_of(input="x").route_key == "response-chain:resp_1"  # no cache key: the conversation routes


def test_text_format_becomes_the_output_format():
    request = chat_of(input="x", text={"format": {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True}})
    assert request.output == OutputFormat("json_schema", "city", SCHEMA, True)
    assert chat_of(input="x", text={"format": {"type": "json_object"}}).output == OutputFormat("json_object")
    assert chat_of(input="x", text={"format": {"type": "text"}}).output is None


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
    ({"context": "not a list"}, "context"),
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
    prepared = prepare_request(generation_request(body, items, chain_key="c"), templates=registry, tokenizer=tokenizer,
                               model_id="m", max_context=8192, default_max_tokens=16)
    return prepared.prompt.token_ids


def call(call_id: str, city: str) -> list[dict]:
    return output_items("", [ToolCall(call_id, "get_weather", f'{{"city": "{city}"}}')])


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


@pytest.mark.parametrize(("field", "param"), [
    (("output", "schema"), "text.format.schema"),
    (("output",), "text.format"),
    (("tools", 2, "parameters"), "tools[2].parameters"),
    (("max_tokens",), "max_output_tokens"),
    (("messages",), "input"),
    (("messages", 3, "content"), "input"),
    (("tool_choice",), "tool_choice"),
])
def test_internal_fields_are_named_as_the_responses_api_spells_them(field, param):
    assert responses_param(field) == param


def test_an_error_on_the_shared_path_names_the_responses_field_in_param_and_message():
    bad = {**WEATHER, "parameters": {"type": "frob"}}
    request = chat_of(input="x", tools=[WEATHER, bad])
    with pytest.raises(ApiError) as caught:
        output_spec(request)
    error = caught.value.name_field(request.names)
    assert error.param == "tools[1].parameters" and error.message.startswith("tools[1].parameters is not a valid")
    assert "function" not in error.message
