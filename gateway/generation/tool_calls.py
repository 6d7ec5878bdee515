"""Tool calls in the embedded model's output: detect them while streaming, parse them into ToolCalls.

The built-in templates (and Qwen2.5's own chat template) ask the model to answer a tool call as
`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`; small models also answer with the
bare JSON object, or a list of them, sometimes in a ```json fence. Every such form is a call
(tool_call_parse.py says exactly which); text that does not parse stays ordinary content.

`ToolCallDetector` lets ordinary answers stream token by token: it holds text back only while it
could still be (the start of) a call: an answer that opens with `{`, `[` or a ```json fence, and,
anywhere in an answer, a `<tool_call>` tag and what follows it (a trailing `<tool_` is held
until the next text shows whether it is the tag). So call markup never reaches the client as
content, and prose before a tagged call still streams.
"""

from __future__ import annotations

from gateway.generation.result import ToolCall
from gateway.generation.tool_call_parse import (
    CLOSE_TAG, FENCE, OPEN_TAG, new_call_id, split_tool_calls, to_tool_call,
)

TOOL_CALL_OPEN = "<tool_call>\n"
TOOL_CALL_CLOSE = CLOSE_TAG
JSON_STARTS = ("{", "[")

__all__ = [
    "OPEN_TAG", "TOOL_CALL_CLOSE", "TOOL_CALL_OPEN", "ToolCallDetector", "from_openai_call", "new_call_id",
    "parse_tool_calls", "to_tool_call",
]


def parse_tool_calls(text: str, allowed_names: frozenset[str] | None = None, *, is_cut: bool = False) -> list[ToolCall] | None:
    """The calls an answer makes, or None if it makes none (prose before tagged calls is ignored).

    With `allowed_names`, a call to any other function makes the whole answer plain content. With
    `is_cut` (max_tokens ended the answer), a call cut inside its JSON counts, `is_complete=False`."""
    parsed = split_tool_calls(text, allowed_names, is_cut=is_cut)
    return parsed.calls if parsed is not None else None


def from_openai_call(call: dict) -> ToolCall:
    """A call a remote backend sent in OpenAI's shape ({"id", "function": {"name", "arguments"}})."""
    function = call.get("function") or {}
    return ToolCall(id=call.get("id") or new_call_id(), name=function.get("name", ""),
                    arguments=function.get("arguments") or "{}")


def opens_json_call(head: str) -> bool | None:
    """Whether an answer starting with `head` (no leading space) may be a bare call: True (hold it),
    False (stream it), None (too short to tell)."""
    if head.startswith(JSON_STARTS):
        return True
    if head.startswith(FENCE):
        first_line, newline, rest = head.partition("\n")
        if first_line[len(FENCE):].strip().lower() not in ("", "json"):
            return False
        if not newline or not rest.strip():
            return None
        return rest.lstrip().startswith(JSON_STARTS)
    return None if FENCE.startswith(head) else False


def tag_prefix_at_end(text: str) -> int:
    """Where a trailing partial `<tool_call>` begins in `text` (len(text) if none)."""
    for size in range(min(len(OPEN_TAG) - 1, len(text)), 0, -1):
        if OPEN_TAG.startswith(text[-size:]):
            return len(text) - size
    return len(text)


class ToolCallDetector:
    """Streams an answer's text, holding back only what could be a tool call (module docstring)."""

    def __init__(self, is_enabled: bool, tool_names: frozenset[str] | None = None) -> None:
        self.is_enabled = is_enabled
        self.tool_names = tool_names
        self._buffer = ""  # text not yet released: a possible call, or a possible tag's start
        self._is_holding = False  # everything from here on is held until finish
        self._is_started = not is_enabled  # the answer's opening was judged (bare JSON or not)

    def feed(self, text: str) -> str:
        """Take a text delta; return the part that can be sent to the client now."""
        if not self.is_enabled:
            return text
        self._buffer += text
        if self._is_holding:
            return ""
        if not self._is_started:
            head = self._buffer.lstrip()
            verdict = opens_json_call(head) if head else None
            if head.startswith(OPEN_TAG) or verdict:
                self._is_holding = True
                return ""
            if verdict is None or OPEN_TAG.startswith(head):
                return ""
            self._is_started = True
        return self._release_before_tag()

    def _release_before_tag(self) -> str:
        tag = self._buffer.find(OPEN_TAG)
        if tag >= 0:
            released, self._buffer, self._is_holding = self._buffer[:tag], self._buffer[tag:], True
            return released
        cut = tag_prefix_at_end(self._buffer)
        released, self._buffer = self._buffer[:cut], self._buffer[cut:]
        return released

    def finish(self, *, is_cut: bool = False) -> tuple[str, list[ToolCall] | None]:
        """At the end of the answer: (content not yet sent, tool calls or None). `is_cut`: max_tokens
        ended the answer, so a call cut inside its JSON still counts (its is_complete is False)."""
        rest, self._buffer = self._buffer, ""
        if self.is_enabled and rest.strip():
            parsed = split_tool_calls(rest, self.tool_names, is_cut=is_cut)
            if parsed is not None:
                return parsed.content, parsed.calls
        return rest, None
