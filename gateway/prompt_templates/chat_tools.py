"""How a model's own chat template lays out tools, tool calls and tool results, derived by diffing renders.

Qwen2.5's template (ChatML with a tools branch) is the model case: the tools go into the system turn,

    <|im_start|>system\\n{system}\\n\\n# Tools\\n...<tools>\\n{tool json}\\n{tool json}\\n</tools>\\n\\n...<|im_end|>\\n

a run of tool results shares one user turn (`<tool_response>` blocks, one per result), and a
conversation without a system message gets the template's default system text. Each of these is
found the same way as the turn markers (chat_format.py): render sentinel conversations with
tokenizer.apply_chat_template and split the renders around the sentinels. A template that ignores
tools (SmolLM2's) yields no ToolsFormat, and the built-in templates then write their own tools block.

Tool JSON is written as the chat template's `tojson` writes it (", " and ": " separators, unicode
kept), in canonical key order (see `tool_json`), so the block is the model's own rendering of the
canonical tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway.canonicalize.marked_text import MarkedText

_SENTINEL_TOOL = "rgsentineltool{}xq"
# Keys in the order OpenAI's tool objects (and the Qwen chat template's training data) list them;
# any other key follows, sorted.
KEY_ORDER = ("type", "function", "name", "description", "parameters")


@dataclass(frozen=True)
class ToolsFormat:
    """The model's tools block, which ends its system turn: lead + open + tool_json(t1) + separator +
    tool_json(t2) ... + close. `lead` (whitespace) directly follows the system text; cut there, the
    system text and the block tokenize the same apart as together."""

    lead: str
    open: str
    separator: str
    close: str

    def render(self, tools: list[dict]) -> MarkedText:
        """The block without its lead; tool JSON is client text."""
        pieces: list[tuple[str, bool]] = [(self.open, False)]
        for index, tool in enumerate(tools):
            if index:
                pieces.append((self.separator, False))
            pieces.append((tool_json(tool), True))
        pieces.append((self.close, False))
        return MarkedText.join(pieces)


def tool_json(tool: object) -> str:
    """A tool definition as the chat template's `tojson` writes it, keys in KEY_ORDER then sorted."""
    return json.dumps(ordered(tool), ensure_ascii=False)


def ordered(value: object) -> object:
    if isinstance(value, list):
        return [ordered(item) for item in value]
    if not isinstance(value, dict):
        return value
    first = [key for key in KEY_ORDER if key in value]
    rest = sorted(key for key in value if key not in KEY_ORDER)
    return {key: ordered(value[key]) for key in [*first, *rest]}


def sentinel_tool(index: int) -> dict:
    name = _SENTINEL_TOOL.format(index)
    return {"type": "function", "function": {"name": name, "description": name,
                                             "parameters": {"type": "object", "properties": {}}}}


def derive_tools_format(render, system_start: str, system_text: str) -> ToolsFormat | None:
    """The tools block of a template (None when it ignores tools or lays them out otherwise).

    `render(messages, tools)` is the template's text; `system_start + system_text` opens its system turn."""
    system = [{"role": "system", "content": system_text}]
    one, two = sentinel_tool(0), sentinel_tool(1)
    with_one, with_two = render(system, [one]), render(system, [one, two])
    first, second = tool_json(one), tool_json(two)
    opening = system_start + system_text
    if with_one.count(first) != 1 or not with_one.startswith(opening):
        return None
    head, close = with_one[len(opening):].split(first)
    if not with_two.startswith(opening + head + first) or not with_two.endswith(second + close):
        return None
    separator = with_two[len(opening + head + first):-len(second + close)]
    if opening + head + first + separator + second + close != with_two:
        return None
    lead = head[: len(head) - len(head.lstrip())]
    return ToolsFormat(lead, head[len(lead):], separator, close)


def derive_default_system(render, system_start: str, system_end: str, user_start: str) -> str:
    """The system text the template writes when the conversation has no system message ("" if none)."""
    text = render([{"role": "user", "content": "RGSENTINELUSERXQ"}], None)
    preamble = text[: text.find(user_start + "RGSENTINELUSERXQ")]
    if preamble.startswith(system_start) and preamble.endswith(system_end) and len(preamble) > len(system_start + system_end):
        return preamble[len(system_start):-len(system_end)]
    return ""


def derive_tool_result_separator(render, tool_start: str, tool_end: str) -> str | None:
    """What the template writes between two consecutive tool results when it groups them in one turn
    (None: each result is a turn of its own, or the template lays them out some other way)."""
    call = {"id": "call_0", "type": "function", "function": {"name": "rgsentineltool0xq", "arguments": {}}}
    base = [{"role": "user", "content": "RGSENTINELUSERXQ"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    results = [{"role": "tool", "tool_call_id": "call_0", "content": f"RGSENTINELRESULT{index}XQ"} for index in (0, 1)]
    before, after = render(base, None), render([*base, *results], None)
    if not after.startswith(before):
        return None
    turns = after[len(before):]
    first, second = results[0]["content"], results[1]["content"]
    if turns == tool_start + first + tool_end + tool_start + second + tool_end:
        return None
    if not (turns.startswith(tool_start + first) and turns.endswith(second + tool_end)):
        return None
    separator = turns[len(tool_start + first):-len(second + tool_end)]
    return separator if tool_start + first + separator + second + tool_end == turns else None
