"""A Responses request as the internal GenerationRequest, and how this wire format names its fields.

    request = generation_request(body, items, chain_key)   # items: the resolved conversation (previous turns + this input)

`instructions` becomes the leading system message, the items become messages
(gateway/responses/items.py), function tools the chat template's tool form, `text.format` an
OutputFormat, `tool_choice` a ToolChoice; max_output_tokens, temperature/top_p, user,
prompt_cache_key (else the conversation's chain) and radixgate's extras (template, context,
canonicalize) carry over. From there the one request path (canonicalizer, templates, pins,
routing, request log, stats, tenant limits) serves it; nothing builds a chat request.

Fields that would change the answer and that radixgate cannot honour are a 400 naming the
field, never a silent drop.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gateway.errors import FieldPath, bad_request, format_path
from gateway.generation.extras import RadixgateExtras
from gateway.generation.request import GenerationRequest, OutputFormat, Sampling, ToolChoice
from gateway.insight.diagnosis_render import requested_comparison
from gateway.responses.items import items_to_messages

if TYPE_CHECKING:
    from gateway.responses.schemas import ResponsesRequest

SCHEMA_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_CHOICE_MODES = ("none", "auto", "required")


def generation_request(body: ResponsesRequest, items: list[dict], chain_key: str) -> GenerationRequest:
    """The request `body` means over the resolved conversation `items`; `chain_key` routes every turn of one
    conversation alike (unless the client names a prompt_cache_key). Raises ApiError (400)."""
    reject_unsupported(body)
    messages = items_to_messages(items)
    if body.instructions:
        messages.insert(0, {"role": "system", "content": body.instructions})
    if not messages:
        raise bad_request("The request has no input: send `input` (or `instructions`).", "input", "missing_input")
    tools = template_tools(body.tools or [])
    extras = RadixgateExtras.read(body.model_extra)
    return GenerationRequest(
        model=body.model,
        messages=tuple(messages),
        tools=tuple(tools),
        tool_choice=tool_choice(body.tool_choice, tools),
        parallel_tool_calls=body.parallel_tool_calls,
        output=output_format(body.text),
        sampling=Sampling(max_tokens=body.max_output_tokens,
                          temperature=1.0 if body.temperature is None else body.temperature,
                          top_p=1.0 if body.top_p is None else body.top_p),
        context=extras.context_docs(),
        template=extras.template,
        canonicalize=extras.canonicalize,
        route_key=body.prompt_cache_key or chain_key,
        user=body.user or body.safety_identifier,
        compare_to=requested_comparison(body.model_extra),
        names=responses_param,
    )


def responses_param(field: FieldPath) -> str:
    """How the Responses API spells each internal field (the rest as the internal path reads)."""
    match field:
        case ("output",):
            return "text.format"
        case ("output", "schema"):
            return "text.format.schema"
        case ("max_tokens",):
            return "max_output_tokens"
        case ("messages", *_):
            return "input"
    return format_path(field)


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


def template_tools(tools: list[dict]) -> list[dict]:
    """Responses function tools ({"type": "function", "name", ...}) in the chat template's nested form."""
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


def tool_choice(choice: str | dict | None, tools: list[dict]) -> ToolChoice | None:
    """tool_choice as a ToolChoice; a named function must be one of `tools`."""
    if choice is None:
        return None
    if choice in TOOL_CHOICE_MODES:
        return ToolChoice(choice)
    if isinstance(choice, dict) and choice.get("type") in TOOL_CHOICE_MODES and len(choice) == 1:
        return ToolChoice(choice["type"])
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(choice.get("name"), str):
        raise bad_request("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'name': ...}.",
                          "tool_choice", "unsupported_tool_choice")
    names = [tool["function"]["name"] for tool in tools]
    if choice["name"] not in names:
        raise bad_request(f"tool_choice names {choice['name']!r}, which is not in tools.", "tool_choice", "unknown_tool")
    return ToolChoice("function", choice["name"])


def output_format(text: dict | None) -> OutputFormat | None:
    """`text.format` as an OutputFormat (None for plain text)."""
    fmt = (text or {}).get("format")
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return OutputFormat("json_object")
    if fmt.get("type") != "json_schema":
        raise bad_request(f"text.format.type {fmt.get('type')!r} is not supported.", "text.format.type")
    name, schema = fmt.get("name"), fmt.get("schema")
    if not isinstance(name, str) or not SCHEMA_NAME_RE.match(name):
        raise bad_request("text.format.name must be 1-64 letters, digits, '_' or '-'.", "text.format.name")
    if not isinstance(schema, dict):
        raise bad_request("text.format.schema must be a JSON Schema object.", "text.format.schema", "invalid_schema")
    return OutputFormat("json_schema", name, schema, fmt.get("strict"), fmt.get("description") or None)
