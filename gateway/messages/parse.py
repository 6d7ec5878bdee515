"""A Messages body as the internal GenerationRequest, and how this wire format names its fields.

    request = generation_request(body, session_header)    # POST /v1/messages
    request = count_request(body, session_header)         # POST /v1/messages/count_tokens: the same prompt

The conversation and its cache breakpoints come from content.py. `tool_choice` auto / any / tool /
none becomes ToolChoice auto / required / function / none (any and tool are then forced by the
grammar, as chat's required and function are), `disable_parallel_tool_use` the inverse of
`parallel_tool_calls`, `output_config.format` (or the beta's `output_format`) a json_schema
OutputFormat, `stop_sequences` / `temperature` / `top_p` / `top_k` / `max_tokens` the Sampling
(max_tokens is a cap: prepare clamps it to what the context leaves). A Claude Code session (the
`X-Claude-Code-Session-Id` header, or the `session_id` inside `metadata.user_id`) is the routing
key, so its turns stay on one node as a Responses chain's do.

`count_request` builds the request the same body would send (same messages, tools, tool choice and
output constraint), so its prompt token count is the prompt the generation would have.
"""

from __future__ import annotations

import json
import re

from gateway.errors import FieldPath, bad_request
from gateway.generation.request import GenerationRequest, OutputFormat, Sampling, ToolChoice
from gateway.messages.content import read_conversation
from gateway.messages.schemas import CountTokensRequest, MessagesRequest

OUTPUT_SCHEMA_NAME = "output"
LEGACY_SESSION_RE = re.compile(r"_session_([0-9a-fA-F-]{8,})$")


def generation_request(body: MessagesRequest, session_header: str | None = None) -> GenerationRequest:
    """The request `body` means. Raises ApiError (400) naming the Messages field at fault."""
    user_id = body.metadata.user_id if body.metadata else None
    sampling = Sampling(
        max_tokens=body.max_tokens,
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        top_k=body.top_k or 0,
        stop=tuple(body.stop_sequences or ()),
    )
    return build_request(body, sampling, session_route_key(session_header, user_id), user_id)


def count_request(body: CountTokensRequest, session_header: str | None = None) -> GenerationRequest:
    """The request a Messages body with these prompt fields would make (its sampling does not change the prompt)."""
    return build_request(body, Sampling(), session_route_key(session_header, None), None)


def build_request(body: CountTokensRequest, sampling: Sampling, route_key: str | None, user: str | None) -> GenerationRequest:
    reject_unsupported(body)
    conversation = read_conversation(body.system, body.messages, body.tools, body.cache_control)
    choice = tool_choice(body.tool_choice, conversation.tools)
    disable_parallel = (body.tool_choice or {}).get("disable_parallel_tool_use")
    return GenerationRequest(
        model=body.model,
        messages=tuple(conversation.messages),
        tools=tuple(conversation.tools),
        tool_choice=choice,
        parallel_tool_calls=None if disable_parallel is None else not disable_parallel,
        output=output_format(body),
        sampling=sampling,
        route_key=route_key,
        user=user,
        cache_breakpoints=conversation.breakpoints(),
        names=messages_param,
    )


def reject_unsupported(body: CountTokensRequest) -> None:
    if body.mcp_servers:
        raise bad_request("mcp_servers is not supported by this server: connect MCP tools on the client.",
                          "mcp_servers", "unsupported_parameter")
    if body.container is not None:
        raise bad_request("container is not supported by this server.", "container", "unsupported_parameter")


def tool_choice(choice: dict | None, tools: list[dict]) -> ToolChoice | None:
    """{"type": "auto" | "any" | "tool" (with "name") | "none"} as a ToolChoice."""
    if choice is None:
        return None
    kind = choice.get("type")
    if kind in ("auto", "none"):
        return ToolChoice(kind)
    if kind == "any":
        if not tools:
            raise bad_request("tool_choice 'any' needs tools.", "tool_choice", "missing_tools")
        return ToolChoice("required")
    if kind != "tool":
        raise bad_request("tool_choice.type must be 'auto', 'any', 'tool' or 'none'.", "tool_choice.type")
    name = choice.get("name")
    if name not in [tool["function"]["name"] for tool in tools]:
        raise bad_request(f"tool_choice.name {name!r} is not one of tools.", "tool_choice.name", "unknown_tool")
    return ToolChoice("function", name)


def output_format(body: CountTokensRequest) -> OutputFormat | None:
    """`output_config.format` (or `output_format`): {"type": "json_schema", "schema": {...}} as an OutputFormat."""
    config = body.output_config or {}
    where, fmt = ("output_config.format", config.get("format")) if config.get("format") is not None else (
        "output_format", body.output_format)
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        raise bad_request(f"{where}.type must be 'json_schema'.", f"{where}.type")
    if not isinstance(fmt.get("schema"), dict):
        raise bad_request(f"{where}.schema must be a JSON Schema object.", f"{where}.schema", "invalid_schema")
    return OutputFormat("json_schema", OUTPUT_SCHEMA_NAME, fmt["schema"])


def session_route_key(header: str | None, user_id: str | None) -> str | None:
    """The Claude Code session a request belongs to: the X-Claude-Code-Session-Id header, else the
    `session_id` of `metadata.user_id` (a JSON object as text; older clients: "..._session_<uuid>")."""
    session = header.strip() if header and header.strip() else None
    if session is None and user_id:
        session = user_id_session(user_id)
    return f"claude-code-session:{session}" if session else None


def user_id_session(user_id: str) -> str | None:
    try:
        value = json.loads(user_id)
    except ValueError:
        match = LEGACY_SESSION_RE.search(user_id)
        return match.group(1) if match else None
    session = value.get("session_id") if isinstance(value, dict) else None
    return session if isinstance(session, str) and session else None


def messages_param(field: FieldPath) -> str:
    """How the Messages API spells each internal field: dotted paths, as Anthropic's errors name them."""
    match field:
        case ("output",):
            return "output_config.format"
        case ("output", "schema"):
            return "output_config.format.schema"
        case ("tools", int(index), "parameters"):
            return f"tools.{index}.input_schema"
        case ("stop", *_):
            return "stop_sequences"
        case ("messages", *_):
            return "messages"
    return ".".join(str(part) for part in field)
