"""Parsing the tool calls in a model's answer, in every form small instruct models write them.

Forms (Qwen2.5's own first; `name` must be a string, `arguments` (or `parameters`) any JSON):
  * tagged: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, one block per call, prose
    allowed before the first block (it stays content); a block's body may also be a JSON list of calls;
  * bare: the whole answer is such an object (or a list of them), optionally in a ```json fence.

Contract:
  * a call whose JSON is complete is a call whatever follows it: a missing or cut `</tool_call>`, or
    (bare, naming a declared tool) trailing text, does not turn it back into content;
  * with `is_cut` (max_tokens ended the answer) a call cut inside its JSON is still a call, marked
    `is_complete=False`, its arguments the JSON text as far as it was generated (what OpenAI returns
    with finish_reason "length");
  * with `allowed_names`, a call to any other function makes the whole answer plain content; a bare
    object must name a declared function (without `allowed_names`, any name).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

from gateway.generation.result import ToolCall

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
FENCE = "```"
_DECODER = json.JSONDecoder()
# A call object cut after its name: {"name": "f", "arguments": <whatever was generated>
_CUT_CALL = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)
_CUT_ARGUMENTS = re.compile(r'\s*,\s*"(?:arguments|parameters)"\s*:\s*(.*)\Z', re.DOTALL)
_CUT_NAME = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)\Z', re.DOTALL)


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer split into `content` (prose before the calls, usually "") and its `calls`."""

    content: str
    calls: list[ToolCall]


def split_tool_calls(text: str, allowed_names: frozenset[str] | None = None, *, is_cut: bool = False) -> ParsedAnswer | None:
    """The answer's prose and calls, or None when it makes no call (see the module docstring)."""
    start = text.find(OPEN_TAG)
    if start >= 0:
        calls = parse_tagged(text[start:], allowed_names, is_cut)
        return ParsedAnswer(text[:start].strip(), calls) if calls else None
    calls = parse_bare(unfence(text.strip()), allowed_names, is_cut)
    return ParsedAnswer("", calls) if calls else None


def parse_tagged(text: str, allowed_names: frozenset[str] | None, is_cut: bool) -> list[ToolCall] | None:
    """Calls from `<tool_call>` blocks; `text` starts with the first tag."""
    calls: list[ToolCall] = []
    position = 0
    while text.startswith(OPEN_TAG, position):
        body = skip_space(text, position + len(OPEN_TAG))
        try:
            value, end = _DECODER.raw_decode(text, body)
        except json.JSONDecodeError:
            cut = cut_call(text[body:], allowed_names) if is_cut else None
            return calls + [cut] if cut is not None and allowed(cut, allowed_names) else None
        found = to_calls(value, allowed_names)
        if found is None:
            return None
        calls += found
        position = skip_space(text, end)
        if text.startswith(CLOSE_TAG, position):
            position = skip_space(text, position + len(CLOSE_TAG))
    return calls or None


def parse_bare(text: str, allowed_names: frozenset[str] | None, is_cut: bool) -> list[ToolCall] | None:
    """Calls from an answer that is a call object or a list of them (trailing text allowed only
    after a call to a declared function)."""
    if not text.startswith(("{", "[")):
        return None
    try:
        value, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        if not is_cut or allowed_names is None:
            return None
        cut = cut_call(text, allowed_names)
        return [cut] if cut is not None and cut.name in allowed_names else None
    calls = to_calls(value, allowed_names)
    if calls is None or (text[end:].strip() and allowed_names is None):
        return None
    return calls


def to_calls(value: object, allowed_names: frozenset[str] | None) -> list[ToolCall] | None:
    calls = [to_tool_call(item) for item in (value if isinstance(value, list) else [value])]
    if not calls or any(call is None or not allowed(call, allowed_names) for call in calls):
        return None
    return calls


def allowed(call: ToolCall, allowed_names: frozenset[str] | None) -> bool:
    return allowed_names is None or call.name in allowed_names


def to_tool_call(item: object) -> ToolCall | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    arguments = item.get("arguments", item.get("parameters", {}))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=new_call_id(), name=item["name"], arguments=arguments)


def cut_call(text: str, allowed_names: frozenset[str] | None) -> ToolCall | None:
    """A call object cut by max_tokens: its name (a cut name completes to the one declared name it
    starts) and its arguments as far as generated; None when `text` is not the start of a call."""
    text = text.rstrip()
    match = _CUT_CALL.match(text)
    if match is not None:
        name = json.loads(f'"{match.group(1)}"')
        arguments = _CUT_ARGUMENTS.match(text, match.end())  # None: cut before the arguments began
        return ToolCall(id=new_call_id(), name=name, arguments=arguments.group(1) if arguments else "", is_complete=False)
    match = _CUT_NAME.match(text)
    if match is None and not '{"name": "'.startswith(text) or allowed_names is None:
        return None
    prefix = match.group(1) if match is not None else ""
    candidates = [name for name in allowed_names if name.startswith(prefix)]
    if len(candidates) != 1:
        return None
    return ToolCall(id=new_call_id(), name=candidates[0], arguments="", is_complete=False)


def unfence(text: str) -> str:
    """The body of a ```json (or bare ```) fence around the whole answer; other text unchanged."""
    if not text.startswith(FENCE):
        return text
    first_line, _, body = text.partition("\n")
    if first_line[len(FENCE):].strip().lower() not in ("", "json"):
        return text
    body = body.rstrip()
    return body[: -len(FENCE)].rstrip() if body.endswith(FENCE) else body


def skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
