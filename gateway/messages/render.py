"""The internal Answer as the Messages API renders it: a `message` with text and tool_use blocks.

    message(run, answer)       # the non-streaming body (and the streaming events' parts)

stop_reason: "tool_use" for calls, "max_tokens" when max_tokens (or the context) cut the answer,
"stop_sequence" (with `stop_sequence` set) when one of the request's stop strings ended it, else "end_turn". Usage has Anthropic's meaning, from the internal Usage (gateway/generation/result.py):

    cache_read_input_tokens      = cached (read from the caller's cache domain)
    cache_creation_input_tokens  = cache_write (computed up to the last cache breakpoint, now held)
    input_tokens                 = prompt - cached - cache_write (the rest, after the last breakpoint)
    cache_creation               = {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens} (cache_write split by TTL)

so the three figures sum to the prompt, which is what /v1/messages/count_tokens returns for the same body.

`diagnostics` is the hook for the per-request cache diagnosis: whatever the run carries as
`run.diagnosis` (an object with `to_dict()`, or a dict), rendered as the message's `diagnostics`;
None (the default, and until something fills it) leaves the field null.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.generation.result import Answer, ToolCall, Usage
    from gateway.generation.run import GenerationRun

STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens"}


def message(run: GenerationRun, answer: Answer) -> dict:
    """The finished `message` object."""
    return {**message_head(run, usage(answer.usage)), "content": content_blocks(answer),
            "stop_reason": stop_reason(answer), "stop_sequence": answer.stop_sequence}


def message_head(run: GenerationRun, usage_body: dict) -> dict:
    """The message's fields that are known before its content (message_start carries them; the diagnosis
    compares this prompt with the previous one, so it is known before the answer)."""
    return {"id": run.request_id, "type": "message", "role": "assistant", "model": run.model_id, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage_body, "diagnostics": diagnostics(run)}


def content_blocks(answer: Answer) -> list[dict]:
    blocks = [{"type": "text", "text": answer.text}] if answer.text or not answer.tool_calls else []
    return blocks + [tool_use_block(call) for call in answer.tool_calls]


def tool_use_block(call: ToolCall) -> dict:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call_input(call)}


def call_input(call: ToolCall) -> dict:
    """A call's arguments as the object Anthropic's `input` is (arguments that are no object: {})."""
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def stop_reason(answer: Answer) -> str:
    if answer.tool_calls:
        return "tool_use"
    if answer.stop_sequence is not None:
        return "stop_sequence"
    return STOP_REASONS.get(answer.finish_reason, "end_turn")


def usage(figures: Usage) -> dict:
    """Anthropic's usage object (see the module docstring)."""
    written, written_1h = figures.cache_write_tokens, figures.cache_write_1h_tokens
    return {
        "input_tokens": figures.prompt_tokens - figures.cached_tokens - written,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": figures.cached_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": written - written_1h, "ephemeral_1h_input_tokens": written_1h},
        "output_tokens": figures.completion_tokens,
        "service_tier": "standard",
    }


def diagnostics(run: GenerationRun) -> Any:
    """The run's cache diagnosis in Anthropic's `diagnostics` shape, or None (see the module docstring)."""
    diagnosis = getattr(run, "diagnosis", None)
    if diagnosis is None:
        return None
    return diagnosis.to_dict() if hasattr(diagnosis, "to_dict") else diagnosis
