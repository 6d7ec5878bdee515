"""The Responses API on a real `radixgate serve` with the default model, driven by the official `openai` SDK."""

from __future__ import annotations

import json

import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel
from sqlalchemy import create_engine, func, select

from engine import EngineConfig
from gateway.db.models import StoredResponse

pytestmark = pytest.mark.slow

INSTRUCTIONS = "You are a helpful assistant. Answer in one short sentence."
WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
PAGE_SIZE = EngineConfig().page_size  # the e2e server runs the engine's defaults


class CityFacts(BaseModel):
    city: str
    country: str


def page_aligned(num_tokens: int) -> int:
    return num_tokens // PAGE_SIZE * PAGE_SIZE


@pytest.fixture()
def tenant(gateway_server) -> dict:
    return gateway_server.create_tenant()


@pytest.fixture()
def client(gateway_server, tenant) -> OpenAI:
    return OpenAI(base_url=gateway_server.api_base, api_key=tenant["api_key"]["key"], max_retries=0, timeout=300)


def num_stored(gateway_server, tenant_id: int) -> int:
    engine = create_engine(gateway_server.db_url)
    try:
        with engine.connect() as connection:
            return connection.scalar(select(func.count()).select_from(StoredResponse).where(StoredResponse.tenant_id == tenant_id))
    finally:
        engine.dispose()


def test_create_retrieve_chain_input_items_and_delete(client):
    first = client.responses.create(model="default", instructions=INSTRUCTIONS, input="What is the capital of France?",
                                    max_output_tokens=12, temperature=0, metadata={"run": "1"})
    assert first.status in ("completed", "incomplete") and first.id.startswith("resp_")
    assert "Paris" in first.output_text
    assert first.usage.input_tokens > 0 and first.usage.input_tokens_details.cached_tokens == 0
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    stored = client.responses.retrieve(first.id)
    assert stored.output_text == first.output_text and stored.metadata == {"run": "1"} and stored.usage == first.usage

    second = client.responses.create(model="default", instructions=INSTRUCTIONS, input="And of Germany?",
                                     previous_response_id=first.id, max_output_tokens=12, temperature=0)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens_details.cached_tokens >= page_aligned(first.usage.input_tokens)
    items = client.responses.input_items.list(second.id, order="asc").data
    assert [(item.type, item.role) for item in items] == [("message", "user"), ("message", "assistant"), ("message", "user")]
    assert items[1].content[0].text == first.output_text and items[2].content[0].text == "And of Germany?"

    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    assert client.responses.retrieve(second.id).id == second.id  # a chained response stands on its own


def test_stream_sends_the_documented_events_in_order(client):
    stream = client.responses.create(model="default", instructions=INSTRUCTIONS, input="What is the capital of France?",
                                     max_output_tokens=12, temperature=0, stream=True)
    events = list(stream)
    kinds = [event.type for event in events]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
    assert kinds[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert kinds[-1] in ("response.completed", "response.incomplete") and "response.output_text.delta" in kinds
    final = events[-1].response
    deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert deltas == events[-4].text == final.output_text and "Paris" in deltas
    assert final.usage.input_tokens > 0 and client.responses.retrieve(final.id).output_text == deltas


def test_streamed_forced_tool_call_is_a_function_call_item_with_valid_arguments(client):
    events = list(client.responses.create(model="default", input="What's the weather in Paris?", tools=[WEATHER],
                                          tool_choice="required", max_output_tokens=32, temperature=0, stream=True))
    kinds = [event.type for event in events]
    assert kinds[2:7] == ["response.output_item.added", "response.function_call_arguments.delta",
                          "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    call = events[-1].response.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id
    assert events[3].delta == events[4].arguments == call.arguments
    assert isinstance(json.loads(call.arguments)["city"], str)


def test_text_format_json_schema_parses_into_the_pydantic_model(client):
    parsed = client.responses.parse(model="default", instructions="Give the city and its country.", input="Paris",
                                    text_format=CityFacts, max_output_tokens=40, temperature=0)
    assert parsed.status == "completed" and isinstance(parsed.output_parsed, CityFacts)
    assert parsed.output_parsed.city and parsed.output_parsed.country


def test_unknown_or_foreign_ids_are_404_and_bad_requests_400_storing_nothing(gateway_server, client, tenant):
    other = gateway_server.create_tenant()
    theirs = OpenAI(base_url=gateway_server.api_base, api_key=other["api_key"]["key"], max_retries=0, timeout=120)
    foreign = theirs.responses.create(model="default", input="Say hi.", max_output_tokens=2, temperature=0)
    for call in (lambda: client.responses.retrieve(foreign.id), lambda: client.responses.delete(foreign.id),
                 lambda: client.responses.input_items.list(foreign.id)):
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert caught.value.body["code"] == "not_found"
    for previous in (foreign.id, "resp_unknown"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="default", input="Hi", previous_response_id=previous, max_output_tokens=2)
        assert caught.value.body["code"] == "previous_response_not_found" and caught.value.body["param"] == "previous_response_id"
    bad = [({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_time"}}, "tool_choice"),
           ({"text": {"format": {"type": "json_schema", "name": "answer", "schema": ["not", "a", "schema"]}}}, "text.format.schema"),
           ({"text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "objekt"}}}}, "text.format.schema"),
           ({"tools": [{**WEATHER, "parameters": {"type": "object", "required": "city"}}], "tool_choice": "required"},
            "tools[0].parameters"),
           ({"input": "word " * 9000}, "input")]
    for fields, param in bad:
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(**{"model": "default", "input": "Hi", "max_output_tokens": 2, **fields})
        assert caught.value.body["param"] == param
    assert num_stored(gateway_server, tenant["id"]) == 0
    assert theirs.responses.retrieve(foreign.id).id == foreign.id


def test_store_false_is_not_retrievable(client, gateway_server, tenant):
    response = client.responses.create(model="default", input="Say hi.", max_output_tokens=2, temperature=0, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    assert num_stored(gateway_server, tenant["id"]) == 0


def test_agent_loop_of_six_turns_hits_the_whole_previous_prompt_every_turn(client, capsys):
    """A tool-using loop chained by previous_response_id: a forced call, its result, an answer, a new question, ...
    Every turn's cached_tokens >= the previous turn's whole prompt, page-aligned."""
    previous, rows = None, []
    for turn in range(1, 7):
        if previous is not None and previous.output[0].type == "function_call":
            new_input, tool_choice, max_tokens = [{"type": "function_call_output", "call_id": previous.output[0].call_id,
                                                   "output": "sunny, 21 C"}], "none", 12
        else:
            new_input, tool_choice, max_tokens = f"What is the weather in city number {turn}?", "required", 40
        response = client.responses.create(
            model="default", instructions="You are a weather agent. Use the tool.", tools=[WEATHER], input=new_input,
            tool_choice=tool_choice, previous_response_id=previous.id if previous else None,
            max_output_tokens=max_tokens, temperature=0)
        cached = response.usage.input_tokens_details.cached_tokens
        needed = page_aligned(previous.usage.input_tokens) if previous else 0
        rows.append((turn, response.output[0].type, response.usage.input_tokens, cached, needed))
        with capsys.disabled():
            print(f"\nturn {turn}: output={response.output[0].type} input_tokens={response.usage.input_tokens} "
                  f"cached_tokens={cached} previous prompt page-aligned={needed}")
        previous = response
    assert all(cached >= needed for _, _, _, cached, needed in rows), rows
    assert [kind for _, kind, *_ in rows] == ["function_call", "message"] * 3
