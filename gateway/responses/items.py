"""Responses-API items: the client's input normalized into stored items, and items turned into template messages.

    items = normalize_input(body.input)            # every item a dict with "type" and "id"; 400 on what we cannot serve
    messages = items_to_messages(items)            # the messages those items mean, in order, in the chat template's
                                                   # form (gateway/generation/request.py)
    items = output_items(text, calls)               # what a generated answer becomes

Invariant: `items_to_messages` is a pure function of the items, message by
message: consecutive `function_call` items form one assistant message with
several tool_calls, a `function_call_output` is a tool message, every other
item is one message; ids and statuses never reach the prompt. So items a + b
map to messages(a) + messages(b) unless b starts with a function_call right
after a's trailing ones (they merge into one message), and a chain rebuilt as
previous input + previous output + new input renders the previous turn's
messages unchanged, then the new turn.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from gateway.errors import bad_request
from gateway.generation.result import ToolCall

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
TEXT_PART_TYPES = ("input_text", "output_text", "text", "refusal")
ID_PREFIXES = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}


def new_item_id(item_type: str) -> str:
    return f"{ID_PREFIXES[item_type]}_{uuid.uuid4().hex}"


def normalize_input(raw: str | list[Any], param: str = "input") -> list[dict]:
    """The request's input as stored items: a string is one user message; every item gets a type and an id."""
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}] if raw else []
    return [normalize_item(item, f"{param}[{index}]") for index, item in enumerate(raw)]


def normalize_item(item: Any, param: str) -> dict:
    if not isinstance(item, dict):
        raise bad_request(f"{param} must be an object.", param)
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return normalize_message(item, param)
    if kind == "function_call":
        for key in ("call_id", "name", "arguments"):
            if not isinstance(item.get(key), str):
                raise bad_request(f"{param}.{key} must be a string.", f"{param}.{key}")
        return {"type": "function_call", "id": item.get("id") or new_item_id("function_call"),
                "call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"],
                "status": "completed"}
    if kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise bad_request(f"{param}.call_id must be a string.", f"{param}.call_id")
        return {"type": "function_call_output", "id": item.get("id") or new_item_id("function_call_output"),
                "call_id": item["call_id"], "output": output_text(item.get("output"), f"{param}.output"),
                "status": "completed"}
    raise bad_request(
        f"{param}.type {kind!r} is not supported: radixgate takes message, function_call and function_call_output items.",
        f"{param}.type", "unsupported_item_type",
    )


def normalize_message(item: dict, param: str) -> dict:
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        raise bad_request(f"{param}.role must be one of {', '.join(MESSAGE_ROLES)}.", f"{param}.role")
    part_type = "output_text" if role == "assistant" else "input_text"
    content = item.get("content")
    if isinstance(content, str):
        parts = [text_part(part_type, content)]
    elif isinstance(content, list):
        parts = [text_part(part_type, part_text(part, f"{param}.content[{i}]")) for i, part in enumerate(content)]
    else:
        raise bad_request(f"{param}.content must be a string or a list of parts.", f"{param}.content")
    return {"type": "message", "id": item.get("id") or new_item_id("message"), "role": role,
            "content": parts, "status": "completed"}


def text_part(part_type: str, text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": []} if part_type == "output_text" else {"type": part_type, "text": text}


def part_text(part: Any, param: str) -> str:
    if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES:
        text = part.get("text", part.get("refusal"))
        if isinstance(text, str):
            return text
    kind = part.get("type") if isinstance(part, dict) else type(part).__name__
    raise bad_request(f"{param}: content part {kind!r} is not supported; only text parts are.", param, "unsupported_content")


def output_text(output: Any, param: str) -> str:
    """A function_call_output's output as text: a string, or its text parts joined."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(part_text(part, f"{param}[{i}]") for i, part in enumerate(output))
    raise bad_request(f"{param} must be a string or a list of text parts.", param)


def items_to_messages(items: list[dict]) -> list[dict]:
    """The chat messages the items mean (see the module docstring for the merge rule)."""
    messages: list[dict] = []
    for item in items:
        kind = item["type"]
        if kind == "message":
            messages.append({"role": item["role"], "content": "\n".join(part["text"] for part in item["content"])})
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if messages and messages[-1].get("tool_calls"):
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
    return messages


def output_items(text: str, calls: tuple[ToolCall, ...] | list[ToolCall] | None, status: str = "completed") -> list[dict]:
    """A generated answer as output items: one function_call per tool call, else one assistant message."""
    if calls:
        return [{"type": "function_call", "id": new_item_id("function_call"), "call_id": call.id,
                 "name": call.name, "arguments": call.arguments,
                 "status": "completed" if call.is_complete else "incomplete"}
                for call in calls]
    return [message_item(text, status)]


def message_item(text: str, status: str = "completed", item_id: str | None = None) -> dict:
    return {"type": "message", "id": item_id or new_item_id("message"), "role": "assistant", "status": status,
            "content": [text_part("output_text", text)]}


def dumps(items: list[dict]) -> str:
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"))
