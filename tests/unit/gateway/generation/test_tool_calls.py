"""Tool-call parsing and the streaming detector that holds back only possible tool calls."""

from __future__ import annotations

import json

from gateway.generation.tool_calls import ToolCallDetector, parse_tool_calls


def feed_all(detector: ToolCallDetector, deltas: list[str]) -> str:
    return "".join(detector.feed(delta) for delta in deltas)


def test_parses_tagged_list_and_bare_json_calls():
    tagged = parse_tool_calls('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>')
    assert (tagged[0].name, tagged[0].arguments) == ("f", '{"a": 1}')
    assert tagged[0].id.startswith("call_")
    listed = parse_tool_calls('[{"name": "f", "arguments": {}}, {"name": "g", "arguments": "{}"}]')
    assert [c.name for c in listed] == ["f", "g"]
    assert json.loads(parse_tool_calls('{"name": "h", "parameters": {"x": 2}}')[0].arguments) == {"x": 2}


def test_non_calls_are_not_parsed():
    for text in ("Paris.", '{"answer": 1}', "<tool_call>not json</tool_call>", "[1, 2]", ""):
        assert parse_tool_calls(text) is None


def test_ordinary_answers_stream_immediately():
    detector = ToolCallDetector(is_enabled=True)
    assert detector.feed(" The") == " The" and detector.feed(" answer") == " answer"
    assert detector.finish() == ("", None)


def test_possible_tool_call_is_held_and_parsed_at_the_end():
    detector = ToolCallDetector(is_enabled=True)
    assert feed_all(detector, ["<tool", "_call>", '{"name": "f", "arguments": {}}', "</tool_call>"]) == ""
    content, calls = detector.finish()
    assert content == "" and calls[0].name == "f"


def test_held_text_that_is_not_a_call_is_released_as_content():
    detector = ToolCallDetector(is_enabled=True)
    assert feed_all(detector, ["{", "not a call}"]) == ""
    assert detector.finish() == ("{not a call}", None)
    markup = ToolCallDetector(is_enabled=True)
    assert feed_all(markup, ["<", "b>bold"]) == "<b>bold"


def test_disabled_detector_passes_everything_through():
    detector = ToolCallDetector(is_enabled=False)
    assert detector.feed('{"name": "f", "arguments": {}}') == '{"name": "f", "arguments": {}}'
    assert detector.finish() == ("", None)


def test_calls_to_functions_not_offered_are_plain_content():
    text = '<tool_call>{"name": "Paris", "arguments": {}}</tool_call>'
    assert parse_tool_calls(text, frozenset({"get_weather"})) is None
    detector = ToolCallDetector(is_enabled=True, tool_names=frozenset({"get_weather"}))
    detector.feed(text)
    assert detector.finish() == (text, None)
