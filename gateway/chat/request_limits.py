"""check_request_limits: what a chat (or canonicalize) body may carry, checked before any work on it.

Every limit comes from `settings.limits` (LimitSettings) and a body past one is an
OpenAI-style 400 naming the field: the number of messages, tools, context documents
and stop strings, each stop string's length, the seed's range, the length of every
string anywhere in the body, and the prompt's total characters (a cheap stand-in for
its token count, checked before tokenizing; the exact token count is checked once,
after). The body-size limit itself is enforced earlier, on the raw bytes
(gateway/body_limit.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import ApiError, bad_request

if TYPE_CHECKING:
    from gateway.chat.schemas import ChatCompletionRequest
    from gateway.settings import LimitSettings


def check_request_limits(body: ChatCompletionRequest, limits: LimitSettings) -> None:
    """Raise ApiError (400) for the first limit the body passes."""
    check_count("messages", len(body.messages), limits.max_messages)
    check_count("tools", len(body.tools or ()), limits.max_tools)
    check_count("context", len(body.context or ()), limits.max_documents)
    stops = body.stop_list()
    check_count("stop", len(stops), limits.max_stop)
    for stop in stops:
        if len(stop) > limits.max_stop_chars:
            raise bad_request(f"Each stop sequence may have at most {limits.max_stop_chars} characters.", "stop", "stop_too_long")
    if body.seed is not None and not -(limits.max_seed + 1) <= body.seed <= limits.max_seed:
        raise bad_request(f"seed must be between {-(limits.max_seed + 1)} and {limits.max_seed}.", "seed", "invalid_seed")
    num_chars = check_strings(body.body_dict(), limits.max_field_chars, "")
    if num_chars > limits.max_prompt_chars:
        raise ApiError(400, f"The request has {num_chars} characters of text; the limit is {limits.max_prompt_chars}.",
                       "invalid_request_error", "context_length_exceeded", "messages")


def check_count(field: str, num: int, limit: int) -> None:
    if num > limit:
        raise bad_request(f"At most {limit} {field} are allowed; the request has {num}.", field, "too_many_items")


def check_strings(value: Any, max_chars: int, path: str) -> int:
    """Total characters of every string in `value`; raises 400 (naming the path) for one over `max_chars`."""
    if isinstance(value, str):
        if len(value) > max_chars:
            raise bad_request(f"{path or 'a field'} has {len(value)} characters; the limit is {max_chars}.",
                              path or None, "string_too_long")
        return len(value)
    if isinstance(value, dict):
        return sum(check_strings(item, max_chars, f"{path}.{key}" if path else str(key)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return sum(check_strings(item, max_chars, f"{path}[{index}]") for index, item in enumerate(value))
    return 0
