"""A chat-completions body as the internal GenerationRequest, and how this wire format names its fields.

    request = generation_request(body)        # 400 (OpenAI's envelope) for what radixgate cannot serve

Chat's messages and function tools already are the chat template's form
(gateway/generation/request.py), so they pass as they are; `response_format` becomes an
OutputFormat and `tool_choice` a ToolChoice, checked here. Fields that would change the answer
and that radixgate does not implement are a 400 naming the field, never a silent drop.
"""

from __future__ import annotations

from typing import Any

from gateway.chat.schemas import ChatCompletionRequest
from gateway.errors import FieldPath, bad_request, format_path
from gateway.generation.request import GenerationRequest, OutputFormat, Sampling, ToolChoice
from gateway.insight.diagnosis_render import requested_comparison

# OpenAI fields radixgate does not implement, with the values that mean "not used" (sent by some clients)
UNSUPPORTED_FIELDS = {
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "functions": (None, []),
    "function_call": (None,),
    "audio": (None,),
    "modalities": (None, ["text"]),
    "prediction": (None,),
    "web_search_options": (None,),
}
TOOL_CHOICE_MODES = ("none", "auto", "required")


def generation_request(body: ChatCompletionRequest, *, route_key: str | None = None) -> GenerationRequest:
    """The request `body` means. Raises ApiError (400)."""
    validate_request(body)
    plain = body.body_dict()
    salt = (body.model_extra or {}).get("cache_salt")
    return GenerationRequest(
        model=body.model,
        messages=tuple(plain["messages"]),
        tools=tuple(plain.get("tools") or ()),
        tool_choice=tool_choice(body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls,
        output=output_format(body.response_format),
        sampling=Sampling(
            max_tokens=body.max_completion_tokens or body.max_tokens,
            temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
            seed=body.seed,
            stop=tuple(body.stop_list()),
        ),
        context=tuple(plain.get("context") or ()),
        template=body.template,
        canonicalize=body.canonicalize,
        queue_timeout_s=body.queue_timeout_s,
        cache_salt=salt if isinstance(salt, str) and salt else None,
        route_key=body.prompt_cache_key or route_key,
        user=body.user,
        compare_to=requested_comparison(body.model_extra),
        names=chat_param_names(body),
    )


def validate_request(body: ChatCompletionRequest) -> None:
    """Reject what we cannot serve, with OpenAI-style 400s naming the field, before any work is done."""
    if body.n is not None and body.n > 1:
        raise bad_request("n > 1 is not supported: radixgate returns exactly one choice per request.", "n", "unsupported_n")
    extra = body.model_extra or {}
    for name, unused in UNSUPPORTED_FIELDS.items():
        if name in extra and extra[name] not in unused:
            raise bad_request(f"{name!r} is not supported by this server; leave it out.", name, "unsupported_parameter")


def output_format(response_format: dict | None) -> OutputFormat | None:
    """`response_format` as an OutputFormat (None for text)."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise bad_request("response_format must be an object.", "response_format")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputFormat("json_object")
    if kind != "json_schema":
        raise bad_request(f"response_format.type {kind!r} is not supported: use 'text', 'json_object' or "
                          "'json_schema'.", "response_format.type")
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise bad_request("response_format.json_schema must be an object with a non-empty 'name'.",
                          "response_format.json_schema")
    return OutputFormat("json_schema", spec["name"], spec.get("schema", {"type": "object"}), spec.get("strict"),
                        spec.get("description"))


def tool_choice(choice: Any) -> ToolChoice | None:
    """`tool_choice` as a ToolChoice: a mode, or {"type": "function", "function": {"name"}}."""
    if choice is None:
        return None
    if choice in TOOL_CHOICE_MODES:
        return ToolChoice(choice)
    name = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(name, str) or not name:
        raise bad_request("tool_choice must be 'none', 'auto', 'required' or "
                          "{'type': 'function', 'function': {'name': ...}}.", "tool_choice")
    return ToolChoice("function", name)


def chat_param_names(body: ChatCompletionRequest):
    """How chat completions spells each internal field (the rest as the internal path reads)."""
    max_tokens = "max_completion_tokens" if body.max_completion_tokens else "max_tokens"

    def name(field: FieldPath) -> str:
        match field:
            case ("output",):
                return "response_format"
            case ("output", "schema"):
                return "response_format.json_schema.schema"
            case ("tools", int(index), "parameters"):
                return f"tools[{index}].function.parameters"
            case ("max_tokens",):
                return max_tokens
        return format_path(field)

    return name
