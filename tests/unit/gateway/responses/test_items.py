"""Responses input items: normalized into stored items, turned into chat messages, answers into output items."""

from __future__ import annotations

import pytest

from gateway.errors import ApiError
from gateway.generation.result import ToolCall
from gateway.responses.items import items_to_messages, normalize_input, output_items


def test_string_input_is_one_user_message_item_with_an_id():
    [item] = normalize_input("What is the capital of France?")
    assert item["type"] == "message" and item["role"] == "user" and item["id"].startswith("msg_")
    assert item["content"] == [{"type": "input_text", "text": "What is the capital of France?"}]
    assert normalize_input("") == []


def test_easy_messages_and_typed_items_become_chat_messages_in_order():
    items = normalize_input([
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris"}, {"type": "input_text", "text": "and Rome?"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}', "id": "fc_x"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "rain"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny, then rain.", "annotations": []}]},
    ])
    assert items[3]["id"] == "fc_x" and items[2]["id"].startswith("fc_") and items[4]["id"].startswith("fco_")
    assert items_to_messages(items) == [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris\nand Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
        {"role": "assistant", "content": "Sunny, then rain."},
    ]


def test_a_previous_turn_plus_its_output_renders_the_previous_messages_first():
    first = normalize_input("Weather in Paris?")
    output = output_items("", [ToolCall("call_1", "get_weather", "{}")])
    second = [*first, *output, *normalize_input([{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}])]
    assert items_to_messages(second)[:1] == items_to_messages(first)
    assert [m["role"] for m in items_to_messages(second)] == ["user", "assistant", "tool"]


@pytest.mark.parametrize(("raw", "param"), [
    ([{"type": "input_image", "image_url": "x"}], "input[0].type"),
    ([{"type": "reasoning", "summary": []}], "input[0].type"),
    ([{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}], "input[0].content[0]"),
    ([{"role": "robot", "content": "hi"}], "input[0].role"),
    ([{"type": "function_call", "call_id": "c", "name": "f"}], "input[0].arguments"),
    (["just a string"], "input[0]"),
])
def test_items_radixgate_cannot_serve_are_a_400_naming_the_item(raw, param):
    with pytest.raises(ApiError) as caught:
        normalize_input(raw)
    assert caught.value.status_code == 400 and caught.value.param == param


def test_an_answer_becomes_one_message_or_one_function_call_per_call():
    [message] = output_items("Paris.", None, "incomplete")
    assert message["type"] == "message" and message["status"] == "incomplete"
    assert message["content"] == [{"type": "output_text", "text": "Paris.", "annotations": []}]
    calls = [ToolCall("call_a", "f", "{}"), ToolCall("call_b", "g", '{"x": 1}')]
    items = output_items("", calls)
    assert [(i["type"], i["call_id"], i["name"], i["arguments"]) for i in items] == [
        ("function_call", "call_a", "f", "{}"), ("function_call", "call_b", "g", '{"x": 1}')]
