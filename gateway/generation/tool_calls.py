"""Tool calls in the embedded model's output: detect them while streaming, parse them into ToolCalls.

The built-in templates ask the model to answer a tool call as
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (a JSON list of such
objects is accepted too, and so is a bare JSON object that is the whole
answer). Text that does not parse stays ordinary content.

`ToolCallDetector` lets ordinary answers stream token by token: it holds text
back only while the answer so far could still be the start of a tool call.
"""

from __future__ import annotations

import json
import re
import uuid

from gateway.generation.result import ToolCall

TOOL_CALL_OPEN = "<tool_call>\n"
TOOL_CALL_CLOSE = "</tool_call>"
OPEN_TAG = "<tool_call>"
TAG_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def parse_tool_calls(text: str, allowed_names: frozenset[str] | None = None) -> list[ToolCall] | None:
    """The calls a complete answer makes, or None if it is not a tool call.

    With `allowed_names`, a call to any other function makes the whole answer plain content.
    """
    stripped = text.strip()
    bodies = TAG_RE.findall(stripped) if stripped.startswith(OPEN_TAG) else [stripped]
    calls: list[ToolCall] = []
    for body in bodies:
        try:
            value = json.loads(body)
        except (json.JSONDecodeError, ValueError):
            return None
        for item in value if isinstance(value, list) else [value]:
            call = to_tool_call(item)
            if call is None or (allowed_names is not None and call.name not in allowed_names):
                return None
            calls.append(call)
    return calls or None


def to_tool_call(item: object) -> ToolCall | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    arguments = item.get("arguments", item.get("parameters", {}))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return ToolCall(id=new_call_id(), name=item["name"], arguments=arguments)


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def from_openai_call(call: dict) -> ToolCall:
    """A call a remote backend sent in OpenAI's shape ({"id", "function": {"name", "arguments"}})."""
    function = call.get("function") or {}
    return ToolCall(id=call.get("id") or new_call_id(), name=function.get("name", ""),
                    arguments=function.get("arguments") or "{}")


class ToolCallDetector:
    """Decides, from the first characters of an answer, whether to stream it or hold it as a possible tool call."""

    def __init__(self, is_enabled: bool, tool_names: frozenset[str] | None = None) -> None:
        self.is_enabled = is_enabled
        self.tool_names = tool_names
        self._buffer = ""
        self._is_holding = False
        self._is_decided = not is_enabled

    def feed(self, text: str) -> str:
        """Take a text delta; return the part that can be sent to the client now."""
        if self._is_decided and not self._is_holding:
            return text
        self._buffer += text
        if self._is_holding:
            return ""
        head = self._buffer.lstrip()
        if not head:
            return ""
        if head.startswith(("{", "[")) or head.startswith(OPEN_TAG) or OPEN_TAG.startswith(head):
            self._is_holding = len(head) >= len(OPEN_TAG) or head[0] in "{["
            self._is_decided = self._is_holding
            return ""
        self._is_decided = True
        released, self._buffer = self._buffer, ""
        return released

    def finish(self) -> tuple[str, list[ToolCall] | None]:
        """At the end of the answer: (content not yet sent, tool calls or None)."""
        rest, self._buffer = self._buffer, ""
        if self.is_enabled and rest.strip():
            calls = parse_tool_calls(rest, self.tool_names)
            if calls:
                return "", calls
        return rest, None
