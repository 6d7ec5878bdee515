"""A Responses request as the internal chat request: one request path, two wire formats.

    chat_body = to_chat_request(body, items)    # items: the resolved conversation (previous turns + this input)

The chat request carries everything generation depends on: `instructions` as
the leading system message, the items as messages (gateway/responses/items.py),
function tools and tool_choice in chat's shape, `text.format` as
`response_format`, max_output_tokens, temperature/top_p, user, prompt_cache_key
and radixgate's extras (template, context, canonicalize). From there the chat
path (canonicalizer, templates, pins, routing, request log, stats, tenant
limits) serves it unchanged.

Fields that would change the answer and that radixgate cannot honour are a 400
naming the field, never a silent drop.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gateway.chat.schemas import ChatCompletionRequest
from gateway.errors import bad_request
from gateway.responses.items import items_to_messages

if TYPE_CHECKING:
    from gateway.responses.schemas import ResponsesRequest

SCHEMA_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_CHOICE_MODES = ("none", "auto", "required")
CHAT_EXTRAS = ("template", "context", "canonicalize")


def to_chat_request(body: ResponsesRequest, items: list[dict]) -> ChatCompletionRequest:
    """The chat request `body` means over the resolved conversation `items`. Raises ApiError (400)."""
    reject_unsupported(body)
    messages = items_to_messages(items)
    if body.instructions:
        messages.insert(0, {"role": "system", "content": body.instructions})
    if not messages:
        raise bad_request("The request has no input: send `input` (or `instructions`).", "input", "missing_input")
    tools = chat_tools(body.tools or [])
    fields: dict[str, Any] = {
        "model": body.model,
        "messages": messages,
        "tools": tools or None,
        "tool_choice": chat_tool_choice(body.tool_choice, tools),
        "max_completion_tokens": body.max_output_tokens,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "user": body.user or body.safety_identifier,
        "prompt_cache_key": body.prompt_cache_key,
        "response_format": response_format(body.text),
        "parallel_tool_calls": body.parallel_tool_calls,
    }
    extras = body.model_extra or {}
    fields.update({name: extras[name] for name in CHAT_EXTRAS if name in extras})
    try:
        return ChatCompletionRequest.model_validate({key: value for key, value in fields.items() if value is not None})
    except ValidationError as exc:  # the chat schema's own checks (tools, context, ...) on what we passed on
        first = exc.errors()[0]
        raise bad_request(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}", None) from exc


def reject_unsupported(body: ResponsesRequest) -> None:
    if body.background:
        raise bad_request("background responses are not supported.", "background", "unsupported_parameter")
    if body.conversation is not None:
        raise bad_request("conversation is not supported: chain responses with previous_response_id.",
                          "conversation", "unsupported_parameter")
    if body.truncation not in (None, "disabled"):
        raise bad_request("truncation 'auto' is not supported: a prompt too long for the model is a 400.",
                          "truncation", "unsupported_parameter")
    if body.top_logprobs:
        raise bad_request("logprobs are not supported.", "top_logprobs", "unsupported_parameter")
    if "message.output_text.logprobs" in (body.include or []):
        raise bad_request("logprobs are not supported.", "include", "unsupported_parameter")
    if body.prompt is not None:
        raise bad_request("stored prompts are not supported: send instructions and input.", "prompt", "unsupported_parameter")
    reasoning = body.reasoning or {}
    if reasoning.get("effort") or reasoning.get("summary"):
        raise bad_request("reasoning is not supported by this model.", "reasoning", "unsupported_parameter")


def chat_tools(tools: list[dict]) -> list[dict]:
    """Responses function tools ({"type": "function", "name", ...}) in chat's nested shape."""
    converted = []
    for index, tool in enumerate(tools):
        if tool.get("type") != "function":
            raise bad_request(f"tools[{index}].type {tool.get('type')!r} is not supported: only function tools are.",
                              f"tools[{index}].type", "unsupported_tool_type")
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise bad_request(f"tools[{index}].name must be a non-empty string.", f"tools[{index}].name")
        function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if tool.get(key) is not None}
        converted.append({"type": "function", "function": function})
    return converted


def chat_tool_choice(choice: str | dict | None, tools: list[dict]) -> str | dict | None:
    """tool_choice in chat's shape; a named function must be one of `tools`."""
    if choice is None or choice in TOOL_CHOICE_MODES:
        return choice
    if isinstance(choice, dict) and choice.get("type") in TOOL_CHOICE_MODES and len(choice) == 1:
        return choice["type"]
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(choice.get("name"), str):
        raise bad_request("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'name': ...}.",
                          "tool_choice", "unsupported_tool_choice")
    names = [tool["function"]["name"] for tool in tools]
    if choice["name"] not in names:
        raise bad_request(f"tool_choice names {choice['name']!r}, which is not in tools.", "tool_choice", "unknown_tool")
    return {"type": "function", "function": {"name": choice["name"]}}


def response_format(text: dict | None) -> dict | None:
    """`text.format` as chat's response_format (None for plain text)."""
    fmt = (text or {}).get("format")
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") != "json_schema":
        raise bad_request(f"text.format.type {fmt.get('type')!r} is not supported.", "text.format.type")
    name, schema = fmt.get("name"), fmt.get("schema")
    if not isinstance(name, str) or not SCHEMA_NAME_RE.match(name):
        raise bad_request("text.format.name must be 1-64 letters, digits, '_' or '-'.", "text.format.name")
    if not isinstance(schema, dict):
        raise bad_request("text.format.schema must be a JSON Schema object.", "text.format.schema", "invalid_schema")
    json_schema = {"name": name, "schema": schema, "strict": fmt.get("strict")}
    if fmt.get("description"):
        json_schema["description"] = fmt["description"]
    return {"type": "json_schema", "json_schema": {k: v for k, v in json_schema.items() if v is not None}}
