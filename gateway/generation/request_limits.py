"""check_request_limits: what a request may carry, checked before any work on it.

Every limit comes from `settings.limits` (LimitSettings) and a request past one is a
400 about the internal field (named by the caller's wire format): the number of messages, tools, context documents
and stop strings, each stop string's length, the seed's range, the length of every
string anywhere in the body, and the prompt's total characters (a cheap stand-in for
its token count, checked before tokenizing; the exact token count is checked once,
after). The body-size limit itself is enforced earlier, on the raw bytes
(gateway/body_limit.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import FieldPath, field_error

if TYPE_CHECKING:
    from gateway.generation.request import GenerationRequest
    from gateway.settings import LimitSettings


def check_request_limits(request: GenerationRequest, limits: LimitSettings) -> None:
    """Raise ApiError (400) for the first limit the request passes."""
    check_count(("messages",), len(request.messages), limits.max_messages)
    check_count(("tools",), len(request.tools), limits.max_tools)
    check_count(("context",), len(request.context), limits.max_documents)
    stops = request.sampling.stop
    check_count(("stop",), len(stops), limits.max_stop)
    for stop in stops:
        if len(stop) > limits.max_stop_chars:
            raise field_error(("stop",), lambda p: f"Each {p} sequence may have at most {limits.max_stop_chars} "
                              "characters.", "stop_too_long")
    seed, max_seed = request.sampling.seed, limits.max_seed
    if seed is not None and not -(max_seed + 1) <= seed <= max_seed:
        raise field_error(("seed",), lambda p: f"{p} must be between {-(max_seed + 1)} and {max_seed}.", "invalid_seed")
    num_chars = check_strings(text_fields(request), limits.max_field_chars, ())
    if num_chars > limits.max_prompt_chars:
        raise field_error(("messages",), lambda _: f"The request has {num_chars} characters of text; the limit is "
                          f"{limits.max_prompt_chars}.", "context_length_exceeded")


def check_count(field: FieldPath, num: int, limit: int) -> None:
    if num > limit:
        raise field_error(field, lambda p: f"At most {limit} {p} are allowed; the request has {num}.", "too_many_items")


def check_strings(value: Any, max_chars: int, path: FieldPath) -> int:
    """Total characters of every string in `value`; raises 400 (naming the path) for one over `max_chars`."""
    if isinstance(value, str):
        if len(value) > max_chars:
            num = len(value)
            raise field_error(path, lambda p: f"{p or 'a field'} has {num} characters; the limit is {max_chars}.",
                              "string_too_long")
        return len(value)
    if isinstance(value, dict):
        return sum(check_strings(item, max_chars, (*path, str(key))) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return sum(check_strings(item, max_chars, (*path, index)) for index, item in enumerate(value))
    return 0


def text_fields(request: GenerationRequest) -> dict:
    """Every client-given string of the request, under its internal field path."""
    output = request.output
    fields = {**request.canonical_input(), "model": request.model, "user": request.user, "template": request.template,
              "stop": list(request.sampling.stop), "output": {"name": output.name, "schema": output.schema} if output else None}
    return {key: value for key, value in fields.items() if value is not None}
