"""A model's chat-turn markers, derived from its tokenizer's own chat template.

Derivation renders sentinel conversations with tokenizer.apply_chat_template and
diffs consecutive renders: render([sys]) gives the system turn, render([sys,
user]) minus it gives the user turn, and so on; splitting each turn around its
sentinel yields (start, end). This works for any template that renders turns
left to right (ChatML, Llama 3, Mistral-style, Qwen, ...). A role the template
rejects borrows the user markers; a template that cannot be diffed at all falls
back to ChatML, so rendering never fails for lack of a chat format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway.canonicalize.canonicalizer import message_text
from gateway.canonicalize.marked_text import MarkedText

_SENTINEL = "RGSENTINEL{}XQ"
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ChatFormat:
    """starts/ends: role -> marker text; generation_prompt: the assistant header.

    The helpers return MarkedText: the markers are template text (their special
    tokens count), a message's content is client text (its special-token text never is)."""

    starts: dict
    ends: dict
    generation_prompt: str

    def turn_start(self, role: str) -> MarkedText:
        return MarkedText(self.starts.get(role, self.starts["user"]))

    def turn_end(self, role: str) -> MarkedText:
        return MarkedText(self.ends.get(role, self.ends["user"]))

    def format_message(self, message: dict) -> MarkedText:
        """One history message as a whole turn; assistant tool calls become
        <tool_call> JSON lines after the content (client text, like the content)."""
        role = message.get("role", "user")
        role = "system" if role == "developer" else ("tool" if role == "function" else role)
        parts = [message_text(message)]
        for call in message.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, dict) else call
            parts.append("<tool_call>\n" + json.dumps(function, sort_keys=True, ensure_ascii=False) + "\n</tool_call>")
        body = "\n".join(part for part in parts if part)
        return MarkedText.join([(self.turn_start(role), False), (body, True), (self.turn_end(role), False)])


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
    return ChatFormat(starts, ends, generation_prompt)


def render(tokenizer, messages: list[dict], add_generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def split_turn(turn: str, sentinel: str) -> tuple[str, str]:
    if turn.count(sentinel) != 1:
        raise ValueError("sentinel not rendered exactly once")
    start, end = turn.split(sentinel)
    return start, end
