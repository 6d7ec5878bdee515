"""A Messages conversation (system, messages of content blocks, tools) in the chat template's form,
with its `cache_control` breakpoints.

    conversation = read_conversation(system, messages, tools, top_level_cache_control)

- `system` (a string or text blocks) becomes one leading system message (blocks joined as text parts); a
  `system` turn among the messages (Claude Code sends its environment block so) a system message in place;
- a user message's `tool_result` blocks become `tool` messages (in order, `is_error` results marked
  "Error: "), its text blocks one user message after them;
- an assistant message's text blocks become its content, its `tool_use` blocks its `tool_calls`
  ({"id", "type": "function", "function": {"name", "arguments": JSON text}}); `thinking` and
  `redacted_thinking` blocks (from another model's turn) are dropped: they never reach a prompt;
- a custom tool ({"name", "description", "input_schema"}) becomes {"type": "function", "function":
  {"name", "description", "parameters"}}.

Breakpoints (CacheBreakpoint, gateway/generation/request.py) are message-granular: a marked block
pins the prefix through the whole internal message that holds it; a marked tool or system block
pins the tools and the system message; the top-level `cache_control` marks the last block of the
last message. At most 4 per request (Anthropic's limit); two on one message keep the longer TTL.
Images, documents, server tools and every other block or tool type radixgate cannot serve are a
400 naming the block's place (`messages.1.content.0.type`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import bad_request
from gateway.generation.request import CacheBreakpoint

MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
DROPPED_BLOCKS = ("thinking", "redacted_thinking")
CUSTOM_TOOL_TYPES = (None, "custom")


@dataclass
class Conversation:
    messages: list[dict] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)
    marks: list[CacheBreakpoint] = field(default_factory=list)

    def breakpoints(self) -> tuple[CacheBreakpoint, ...]:
        """The marks in prompt order, one per position (the longest TTL), at most MAX_BREAKPOINTS."""
        if len(self.marks) > MAX_BREAKPOINTS:
            raise bad_request(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                              f"Found {len(self.marks)}.", "cache_control", "too_many_cache_breakpoints")
        longest: dict[int, float] = {}
        for mark in self.marks:
            longest[mark.messages] = max(mark.ttl_s, longest.get(mark.messages, 0.0))
        return tuple(CacheBreakpoint(position, ttl) for position, ttl in sorted(longest.items()))


def read_conversation(system: str | list[dict] | None, messages: list[Any], tools: list[dict] | None,
                      cache_control: dict | None) -> Conversation:
    """The conversation in the chat template's form; raises ApiError (400) naming the field at fault."""
    conversation = Conversation()
    read_system(system, conversation)
    conversation.tools = [read_tool(tool, index, conversation) for index, tool in enumerate(tools or ())]
    for index, message in enumerate(messages):
        if message.role == "user":
            read_user(message.content, f"messages.{index}", conversation)
        elif message.role == "system":
            read_system_turn(message.content, f"messages.{index}", conversation)
        else:
            read_assistant(message.content, f"messages.{index}", conversation)
    if messages and messages[-1].role == "assistant":
        where = f"messages.{len(messages) - 1}.role"
        raise bad_request(f"{where}: the last message must be a user message; continuing an assistant turn (prefill) "
                          "is not supported by this server.", where, "unsupported_prefill")
    if cache_control is not None:
        ttl = cache_ttl(cache_control, "cache_control")
        conversation.marks.append(CacheBreakpoint(len(conversation.messages), ttl))
    return conversation


def cache_ttl(cache_control: Any, where: str) -> float:
    """The TTL in seconds a `cache_control` asks for: {"type": "ephemeral", "ttl": "5m" (default) | "1h"}."""
    if not isinstance(cache_control, dict) or cache_control.get("type") != "ephemeral":
        raise bad_request(f"{where}.type must be 'ephemeral'.", f"{where}.type", "invalid_cache_control")
    ttl = cache_control.get("ttl") or "5m"
    if ttl not in TTL_SECONDS:
        raise bad_request(f"{where}.ttl must be '5m' or '1h', not {ttl!r}.", f"{where}.ttl", "invalid_cache_control")
    return TTL_SECONDS[ttl]


def mark(block: dict, where: str, position: int, conversation: Conversation) -> None:
    """Record the block's breakpoint (if it has one) at `position` internal messages."""
    if block.get("cache_control") is not None:
        conversation.marks.append(CacheBreakpoint(position, cache_ttl(block["cache_control"], f"{where}.cache_control")))


def read_tool(tool: Any, index: int, conversation: Conversation) -> dict:
    where = f"tools.{index}"
    if not isinstance(tool, dict):
        raise bad_request(f"{where} must be an object.", where)
    if tool.get("type") not in CUSTOM_TOOL_TYPES:
        raise bad_request(f"{where}.type {tool.get('type')!r}: server tools are not supported by this server; send "
                          "custom tools (name, description, input_schema).", f"{where}.type", "unsupported_tool_type")
    name, schema = tool.get("name"), tool.get("input_schema")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{where}.name must be a non-empty string.", f"{where}.name")
    if not isinstance(schema, dict):
        raise bad_request(f"{where}.input_schema must be a JSON Schema object.", f"{where}.input_schema", "invalid_schema")
    mark(tool, where, len(conversation.messages), conversation)  # canonical order: tools beside the system
    function = {"name": name, "description": tool.get("description"), "parameters": schema, "strict": tool.get("strict")}
    return {"type": "function", "function": {key: value for key, value in function.items() if value is not None}}


def read_system(system: str | list[dict] | None, conversation: Conversation) -> None:
    if system is None or system == "" or system == []:
        return
    if isinstance(system, str):
        conversation.messages.append({"role": "system", "content": system})
        return
    texts = []
    for index, block in enumerate(system):
        texts.append(text_of(block, f"system.{index}"))
        mark(block, f"system.{index}", 1, conversation)
    conversation.messages.append({"role": "system", "content": text_content(texts)})


def read_system_turn(content: str | list[dict], where: str, conversation: Conversation) -> None:
    """A system message among the turns (text blocks only), kept where it is: the canonicalizer decides its place."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    texts = [text_of(block, f"{where}.content.{index}") for index, block in enumerate(blocks)]
    conversation.messages.append({"role": "system", "content": text_content(texts)})
    for index, block in enumerate(blocks):
        mark(block, f"{where}.content.{index}", len(conversation.messages), conversation)


def read_user(content: str | list[dict], where: str, conversation: Conversation) -> None:
    if isinstance(content, str):
        conversation.messages.append({"role": "user", "content": content})
        return
    texts: list[str] = []
    text_blocks: list[tuple[dict, str]] = []
    for index, block in enumerate(content):
        place = f"{where}.content.{index}"
        kind = block_type(block, place)
        if kind == "tool_result":
            conversation.messages.append(tool_message(block, place))
            mark(block, place, len(conversation.messages), conversation)
        elif kind == "text":
            texts.append(text_of(block, place))
            text_blocks.append((block, place))
        else:
            raise unsupported_block(kind, place, "a user message")
    if texts or not content:
        conversation.messages.append({"role": "user", "content": text_content(texts)})
        for block, place in text_blocks:
            mark(block, place, len(conversation.messages), conversation)


def read_assistant(content: str | list[dict], where: str, conversation: Conversation) -> None:
    if isinstance(content, str):
        conversation.messages.append({"role": "assistant", "content": content})
        return
    texts, calls, marked = [], [], []
    for index, block in enumerate(content):
        place = f"{where}.content.{index}"
        kind = block_type(block, place)
        if kind in DROPPED_BLOCKS:
            continue
        if kind == "text":
            texts.append(text_of(block, place))
        elif kind == "tool_use":
            calls.append(tool_call(block, place))
        else:
            raise unsupported_block(kind, place, "an assistant message")
        marked.append((block, place))
    message: dict = {"role": "assistant", "content": "\n\n".join(texts)}
    if calls:
        message["tool_calls"] = calls
    conversation.messages.append(message)
    for block, place in marked:
        mark(block, place, len(conversation.messages), conversation)


def block_type(block: Any, where: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise bad_request(f"{where} must be a content block with a 'type'.", where)
    return block["type"]


def unsupported_block(kind: str, where: str, container: str):
    return bad_request(f"{where}.type: {kind!r} blocks in {container} are not supported by this server "
                       "(it serves text, tool_use and tool_result).", f"{where}.type", "unsupported_content")


def text_of(block: Any, where: str) -> str:
    if block_type(block, where) != "text":
        raise unsupported_block(block["type"], where, "this place")
    if not isinstance(block.get("text"), str):
        raise bad_request(f"{where}.text must be a string.", f"{where}.text")
    return block["text"]


def text_content(texts: list[str]) -> str | list[dict]:
    """One text block as a string, several as the chat template's text parts."""
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": text} for text in texts]


def tool_call(block: dict, where: str) -> dict:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise bad_request(f"{where} needs a non-empty 'id' and 'name'.", where)
    if not isinstance(arguments, dict):
        raise bad_request(f"{where}.input must be an object.", f"{where}.input")
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def tool_message(block: dict, where: str) -> dict:
    call_id, content = block.get("tool_use_id"), block.get("content", "")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.tool_use_id must be a non-empty string.", f"{where}.tool_use_id")
    if isinstance(content, list):
        content = "\n".join(text_of(part, f"{where}.content.{index}") for index, part in enumerate(content))
    elif not isinstance(content, str):
        raise bad_request(f"{where}.content must be a string or text blocks.", f"{where}.content")
    if block.get("is_error"):
        content = f"Error: {content}"
    return {"role": "tool", "tool_call_id": call_id, "content": content}
