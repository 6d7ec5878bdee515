"""Structured outputs and forced tool calls through a real `radixgate serve`, with the `openai` SDK (issue 15)."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slow

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
FORCED = {"type": "function", "function": {"name": "get_weather"}}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Oslo?"}]


@pytest.fixture()
def client(gateway_server, tenant_key) -> OpenAI:
    return OpenAI(base_url=gateway_server.api_base, api_key=tenant_key, max_retries=0, timeout=120)


def test_json_schema_response_format_gives_schema_valid_content(client):
    response = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Ada is 36. Give her name and age as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
        max_tokens=40, temperature=0)
    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), PERSON)


def test_json_schema_streams_the_same_json(client):
    stream = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Bo is 7. Name and age as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
        max_tokens=40, temperature=0, stream=True)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    jsonschema.validate(json.loads(text), PERSON)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_forced_tool_call_has_schema_valid_arguments(client):
    response = client.chat.completions.create(model="default", messages=ASK_WEATHER, tools=[WEATHER],
                                              tool_choice=FORCED, max_tokens=48, temperature=0)
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


def test_a_streamed_forced_call_sends_id_and_name_then_argument_fragments(client):
    stream = client.chat.completions.create(model="default", messages=ASK_WEATHER, tools=[WEATHER],
                                            tool_choice="required", max_tokens=48, temperature=0, stream=True)
    deltas = [(c.choices[0].delta, c.choices[0].finish_reason) for c in stream if c.choices]
    parts = [part for delta, _ in deltas for part in (delta.tool_calls or [])]
    assert parts[0].id and parts[0].function.name == "get_weather" and parts[0].function.arguments == ""
    assert len(parts) > 1 and all(p.id is None and p.function.name is None for p in parts[1:])
    arguments = "".join(p.function.arguments for p in parts)
    jsonschema.validate(json.loads(arguments), WEATHER["function"]["parameters"])
    assert not any(delta.content for delta, _ in deltas) and deltas[-1][1] == "tool_calls"


@pytest.mark.parametrize(("fields", "param"), [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "frob"}}}},
     "response_format.json_schema.schema"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"logprobs": True}, "logprobs"),
])
def test_bad_constraints_are_400s_naming_the_field(client, fields, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="default", messages=ASK_WEATHER, max_tokens=4, **fields)
    assert caught.value.status_code == 400 and caught.value.body["param"] == param
