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


WEATHER = frozenset({"get_weather", "get_time"})
PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def test_a_complete_call_is_a_call_whatever_follows_it():
    for text in (f"<tool_call>\n{PARIS}\n</tool_", f"<tool_call>\n{PARIS}\n", f"<tool_call>\n{PARIS}\n</tool_call>\n<"):
        (call,) = parse_tool_calls(text, WEATHER)
        assert (call.name, json.loads(call.arguments), call.is_complete) == ("get_weather", {"city": "Paris"}, True)


def test_bare_and_fenced_calls_to_declared_tools_are_calls():
    for text in (PARIS, f"```json\n{PARIS}\n```", f"```\n{PARIS}\n```", f"{PARIS}\nThis gets the weather."):
        (call,) = parse_tool_calls(text, WEATHER)
        assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert parse_tool_calls('{"name": "Paris", "arguments": {}}', WEATHER) is None
    assert parse_tool_calls(f"{PARIS} trailing prose") is None  # no declared names: only a whole-answer object


def test_several_tagged_calls_and_prose_before_them():
    text = f'Let me check.\n<tool_call>\n{PARIS}\n</tool_call>\n<tool_call>\n{{"name": "get_time", "arguments": {{}}}}\n</tool_call>'
    assert [call.name for call in parse_tool_calls(text, WEATHER)] == ["get_weather", "get_time"]


def test_a_call_cut_by_max_tokens_keeps_its_arguments_as_far_as_generated():
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    assert parse_tool_calls(text, WEATHER) is None  # not cut: malformed text stays content
    (call,) = parse_tool_calls(text, WEATHER, is_cut=True)
    assert (call.name, call.arguments, call.is_complete) == ("get_weather", '{"city": "Par', False)
    (named,) = parse_tool_calls('<tool_call>\n{"name": "get_wea', WEATHER, is_cut=True)
    assert (named.name, named.arguments) == ("get_weather", "")
    (before_arguments,) = parse_tool_calls('<tool_call>\n{"name": "get_time", "argum', WEATHER, is_cut=True)
    assert (before_arguments.name, before_arguments.arguments) == ("get_time", "")
    assert parse_tool_calls('<tool_call>\n{"name": "get_', WEATHER, is_cut=True) is None  # two tools start so
    (bare,) = parse_tool_calls('{"name": "get_time", "arguments": {"ci', WEATHER, is_cut=True)
    assert (bare.name, bare.arguments) == ("get_time", '{"ci')


def test_prose_streams_until_a_tag_and_the_tagged_call_is_held():
    detector = ToolCallDetector(is_enabled=True, tool_names=WEATHER)
    sent = feed_all(detector, ["I will", " check.\n<tool", "_call>\n", PARIS, "\n</tool_call>"])
    assert sent == "I will check.\n"
    content, calls = detector.finish()
    assert content == "" and calls[0].name == "get_weather"


def test_a_trailing_tag_prefix_is_held_until_it_is_not_a_tag():
    detector = ToolCallDetector(is_enabled=True, tool_names=WEATHER)
    assert detector.feed("Use a <tool") == "Use a "
    assert detector.feed("box> here") == "<toolbox> here"
    assert detector.finish() == ("", None)


def test_fenced_json_is_held_but_other_code_fences_stream():
    detector = ToolCallDetector(is_enabled=True, tool_names=WEATHER)
    assert feed_all(detector, ["```", "json\n", PARIS, "\n```"]) == ""
    assert detector.finish()[1][0].name == "get_weather"
    code = ToolCallDetector(is_enabled=True, tool_names=WEATHER)
    assert feed_all(code, ["```", "python\n", "print(1)"]) == "```python\nprint(1)"


def test_detector_finish_with_a_cut_call_returns_it_incomplete():
    detector = ToolCallDetector(is_enabled=True, tool_names=WEATHER)
    feed_all(detector, ["<tool_call>\n", '{"name": "get_weather", "arguments": {"city": "Li'])
    content, calls = detector.finish(is_cut=True)
    assert content == "" and calls[0].arguments == '{"city": "Li' and not calls[0].is_complete
