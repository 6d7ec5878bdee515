"""OutputSpec from a chat body's fields (through the chat parser): which grammar, which forced prefix, and 400s
naming the field as chat completions spells it."""

from __future__ import annotations

import pytest

from gateway.chat.parse import generation_request, validate_request
from gateway.chat.schemas import ChatCompletionRequest
from gateway.errors import ApiError
from gateway.generation.output_spec import close_objects
from gateway.generation.prepare import output_spec
from gateway.generation.tool_calls import TOOL_CALL_OPEN

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ADD = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def spec(response_format=None, tools=None, tool_choice=None, parallel_tool_calls=None):
    fields = {"response_format": response_format, "tools": tools, "tool_choice": tool_choice,
              "parallel_tool_calls": parallel_tool_calls}
    body = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}],
                                 **{key: value for key, value in fields.items() if value is not None})
    request = generation_request(body)
    try:
        return output_spec(request)
    except ApiError as exc:
        raise exc.name_field(request.names)


def refusal(**fields) -> ApiError:
    with pytest.raises(ApiError) as caught:
        spec(**fields)
    assert caught.value.status_code == 400
    return caught.value


def test_no_constraint_fields_mean_free_text():
    for fields in ({}, {"response_format": {"type": "text"}}, {"tools": [WEATHER], "tool_choice": "none"}):
        assert spec(**fields).grammar is None and spec(**fields).assistant_prefix == ""


def test_json_schema_response_format_carries_the_schema():
    out = spec(response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}})
    assert '"answer"' in out.grammar.source and out.grammar.trigger is None and not out.is_tool_call_forced
    assert '"type": "object"' in spec(response_format={"type": "json_object"}).grammar.source


def test_a_named_tool_choice_forces_exactly_one_call_to_that_tool():
    out = spec(tools=[WEATHER, ADD], tool_choice={"type": "function", "function": {"name": "add"}})
    assert out.is_tool_call_forced and out.assistant_prefix == TOOL_CALL_OPEN
    assert '"const": "add"' in out.grammar.source and "get_weather" not in out.grammar.source
    assert "*" not in out.grammar.source.splitlines()[0]  # no repetition: one call
    assert out.grammar.finish_reason == "tool_calls"


def test_required_allows_any_tool_and_parallel_calls_only_when_asked():
    parallel = spec(tools=[WEATHER, ADD], tool_choice="required", parallel_tool_calls=True)
    assert '"const": "add"' in parallel.grammar.source and '"const": "get_weather"' in parallel.grammar.source
    assert parallel.grammar.source.splitlines()[0].endswith(")*")
    for unset_or_false in (None, False):
        single = spec(tools=[WEATHER, ADD], tool_choice="required", parallel_tool_calls=unset_or_false)
        assert "*" not in single.grammar.source.splitlines()[0]


def test_auto_with_tools_is_a_lazy_grammar_triggered_by_the_call_tag():
    out = spec(tools=[WEATHER])
    assert out.grammar.trigger == "<tool_call>" and out.assistant_prefix == "" and not out.is_tool_call_forced


@pytest.mark.parametrize(("fields", "param"), [
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMA}}}, "response_format.json_schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "frob"}}}},
     "response_format.json_schema.schema"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}]}, "tools[0].function.parameters"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
])
def test_bad_constraint_fields_get_a_400_naming_the_field(fields, param):
    assert refusal(**fields).param == param


@pytest.mark.parametrize(("field", "value"), [("logprobs", True), ("top_logprobs", 3), ("logit_bias", {"1": 5}),
                                              ("presence_penalty", 0.5), ("functions", [{"name": "f"}])])
def test_unsupported_fields_get_a_400_naming_them(field, value):
    body = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], **{field: value})
    with pytest.raises(ApiError) as caught:
        validate_request(body)
    assert caught.value.status_code == 400 and caught.value.param == field


def test_unsupported_fields_at_their_unused_values_pass():
    body = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], logprobs=False,
                                 presence_penalty=0, frequency_penalty=0.0, logit_bias={})
    validate_request(body)


def test_object_schemas_are_closed_unless_they_say_otherwise():
    schema = {"type": "object", "properties": {
        "properties": {"type": "object", "properties": {"x": {"type": "string"}}},
        "open": {"type": "object", "properties": {}, "additionalProperties": True},
        "list": {"type": "array", "items": {"type": "object", "properties": {"y": {"type": "number"}}}}}}
    closed = close_objects(schema)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["properties"]["additionalProperties"] is False
    assert set(closed["properties"]) == {"properties", "open", "list"}  # a property named "properties" is not a schema key
    assert closed["properties"]["open"]["additionalProperties"] is True
    assert closed["properties"]["list"]["items"]["additionalProperties"] is False
    assert "additionalProperties" not in schema and close_objects({"type": "object"}) == {"type": "object"}
