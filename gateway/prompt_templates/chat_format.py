"""A model's chat-turn markers, derived from its tokenizer's own chat template.

Derivation renders sentinel conversations with tokenizer.apply_chat_template and
diffs consecutive renders: render([sys]) gives the system turn, render([sys,
user]) minus it gives the user turn, and so on; splitting each turn around its
sentinel yields (start, end). This works for any template that renders turns
left to right (ChatML, Llama 3, Mistral-style, Qwen, ...). A role the template
rejects borrows the user markers; a template that cannot be diffed at all falls
back to ChatML, so rendering never fails for lack of a chat format.

The same diffing finds the template's default system text, its tools block and how
it groups consecutive tool results (chat_tools.py), so a model with a tools branch
(Qwen2.5) is prompted exactly as its own template would prompt it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway.canonicalize.canonicalizer import message_text
from gateway.canonicalize.marked_text import MarkedText
from gateway.prompt_templates.chat_tools import (
    ToolsFormat, derive_default_system, derive_tool_result_separator, derive_tools_format,
)

_SENTINEL = "RGSENTINEL{}XQ"
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ChatFormat:
    """starts/ends: role -> marker text; generation_prompt: the assistant header;
    default_system: the system text the model's template writes when a conversation has
    none ("" if it writes none); tools: the model's own tools block (None: its template
    ignores tools); tool_result_separator: what joins consecutive tool results inside one
    turn (None: each result is a turn of its own).

    The helpers return MarkedText: the markers are template text (their special
    tokens count), a message's content is client text (its special-token text never is)."""

    starts: dict
    ends: dict
    generation_prompt: str
    default_system: str = ""
    tools: ToolsFormat | None = None
    tool_result_separator: str | None = None

    def turn_start(self, role: str) -> MarkedText:
        return MarkedText(self.starts.get(role, self.starts["user"]))

    def turn_end(self, role: str) -> MarkedText:
        return MarkedText(self.ends.get(role, self.ends["user"]))

    def end_system(self, tools: list | None) -> MarkedText:
        """What follows the system text: the lead of the model's tools block when there are
        tools and the model has one (format_tools then closes the turn), else the turn's end."""
        if tools and self.tools is not None:
            return MarkedText(self.tools.lead)
        return self.turn_end("system")

    def format_tools(self, tools: list[dict]) -> MarkedText:
        """The model's own tools block for `tools` (closing the system turn); "" when it has none."""
        return self.tools.render(tools) if self.tools is not None and tools else MarkedText("")

    def format_message(self, message: dict) -> MarkedText:
        """One history message as a whole turn; assistant tool calls become
        `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` blocks after the
        content (client text, like the content), as Qwen2.5's template writes them."""
        role = message_role(message)
        body = message_body(message)
        return MarkedText.join([(self.turn_start(role), False), (body, True), (self.turn_end(role), False)])

    def format_messages(self, messages: list[dict]) -> MarkedText:
        """History messages in order; a run of tool results shares one turn where the model's template groups them."""
        pieces: list[tuple[str, bool]] = []
        for index, message in enumerate(messages):
            role = message_role(message)
            previous = message_role(messages[index - 1]) if index else None
            following = message_role(messages[index + 1]) if index + 1 < len(messages) else None
            grouped = role == "tool" and self.tool_result_separator is not None
            if grouped and previous == "tool":
                pieces.append((self.tool_result_separator, False))
            else:
                pieces.append((self.turn_start(role), False))
            pieces.append((message_body(message), True))
            if not (grouped and following == "tool"):
                pieces.append((self.turn_end(role), False))
        return MarkedText.join(pieces)


def message_role(message: dict) -> str:
    role = message.get("role", "user")
    return "system" if role == "developer" else ("tool" if role == "function" else role)


def message_body(message: dict) -> str:
    """A message's text, then one <tool_call> block per call it makes (newline-separated)."""
    parts = [message_text(message)]
    for call in message.get("tool_calls") or []:
        parts.append("<tool_call>\n" + call_json(call) + "\n</tool_call>")
    return "\n".join(part for part in parts if part)


def call_json(call: object) -> str:
    """`{"name": ..., "arguments": {...}}`: the arguments as a JSON value, not OpenAI's JSON string
    (text that does not parse stays a string)."""
    function = call.get("function", call) if isinstance(call, dict) else {}
    arguments = function.get("arguments", {}) if isinstance(function, dict) else {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            pass
    name = function.get("name", "") if isinstance(function, dict) else ""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def chatml_format() -> ChatFormat:
    starts = {role: f"<|im_start|>{role}\n" for role in ROLES}
    ends = {role: "<|im_end|>\n" for role in ROLES}
    return ChatFormat(starts, ends, "<|im_start|>assistant\n")


def derive_chat_format(tokenizer) -> ChatFormat:
    """Markers of `tokenizer`'s chat template (ChatML when it has none or cannot be diffed)."""
    if not getattr(tokenizer, "chat_template", None):
        return chatml_format()
    try:
        return diff_chat_format(tokenizer)
    except Exception:  # noqa: BLE001 — a template that rejects the probe gets ChatML
        return chatml_format()


def diff_chat_format(tokenizer) -> ChatFormat:
    convo = [{"role": "system", "content": _SENTINEL.format(0)}]
    previous = render(tokenizer, convo)
    starts, ends = {}, {}
    starts["system"], ends["system"] = split_turn(previous, convo[0]["content"])
    for index, role in enumerate(("user", "assistant", "tool"), start=1):
        message = {"role": role, "content": _SENTINEL.format(index)}
        if role == "tool":
            message["tool_call_id"] = "call_0"
        try:
            current = render(tokenizer, [*convo, message])
        except Exception:  # noqa: BLE001 — any template failure means "role unsupported"
            continue
        if not current.startswith(previous):
            raise ValueError("chat template does not render turns left to right")
        starts[role], ends[role] = split_turn(current[len(previous):], message["content"])
        convo, previous = [*convo, message], current
    if "user" not in starts:
        raise ValueError("chat template has no user turn")
    with_prompt = render(tokenizer, convo[:2], add_generation_prompt=True)
    generation_prompt = with_prompt[len(render(tokenizer, convo[:2])):]
    return ChatFormat(starts, ends, generation_prompt, **derive_extras(tokenizer, starts, ends))


def derive_extras(tokenizer, starts: dict, ends: dict) -> dict:
    """default_system, tools and tool_result_separator; a probe the template rejects leaves its default."""
    def with_tools(messages, tools):
        return render(tokenizer, messages, tools=tools)

    extras: dict = {}
    probes = {
        "default_system": lambda: derive_default_system(with_tools, starts["system"], ends["system"], starts["user"]),
        "tools": lambda: derive_tools_format(with_tools, starts["system"], _SENTINEL.format(0)),
        "tool_result_separator": lambda: derive_tool_result_separator(
            with_tools, starts.get("tool", starts["user"]), ends.get("tool", ends["user"])),
    }
    for name, probe in probes.items():
        try:
            extras[name] = probe()
        except Exception:  # noqa: BLE001 — a template that rejects a probe keeps that default
            pass
    return extras


def render(tokenizer, messages: list[dict], add_generation_prompt: bool = False, tools: list | None = None) -> str:
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt)


def split_turn(turn: str, sentinel: str) -> tuple[str, str]:
    if turn.count(sentinel) != 1:
        raise ValueError("sentinel not rendered exactly once")
    start, end = turn.split(sentinel)
    return start, end
