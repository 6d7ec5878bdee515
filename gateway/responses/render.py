"""The `response` object of one Responses request: the request's settings echoed, the output, status and usage.

    turn = ResponseTurn(response_id, body, input_items, model_id, created_at)
    turn.response("in_progress")                                  # what response.created carries
    turn.response(response_status(answer), output, answer.usage)  # the finished one

A generation cut by max_output_tokens is "incomplete" with
incomplete_details.reason "max_output_tokens"; anything else that finished is
"completed".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.insight.diagnosis_render import openai_prompt_cache_diagnostics
from gateway.responses.schemas import (
    IncompleteDetails,
    InputTokensDetails,
    OutputTokensDetails,
    ResponseObject,
    ResponseUsage,
)

if TYPE_CHECKING:
    from gateway.generation.result import Answer, Usage
    from gateway.generation.run import GenerationRun
    from gateway.responses.schemas import ResponsesRequest

DEFAULT_TEXT = {"format": {"type": "text"}}


@dataclass(frozen=True)
class ResponseTurn:
    """One Responses request resolved: its id, the body, the whole conversation it generates from."""

    response_id: str
    body: ResponsesRequest
    input_items: list[dict]
    model_id: str
    created_at: int

    def response(self, status: str, output: list[dict] | None = None, usage: Usage | None = None,
                 error: dict | None = None) -> ResponseObject:
        body = self.body
        return ResponseObject(
            id=self.response_id,
            created_at=self.created_at,
            status=status,
            error=error,
            incomplete_details=IncompleteDetails(reason="max_output_tokens") if status == "incomplete" else None,
            instructions=body.instructions,
            max_output_tokens=body.max_output_tokens,
            model=self.model_id,
            output=output or [],
            parallel_tool_calls=body.parallel_tool_calls is True,  # unset: one call (gateway/generation/output_spec.py)
            previous_response_id=body.previous_response_id,
            prompt_cache_key=body.prompt_cache_key,
            store=body.store is not False,
            temperature=1.0 if body.temperature is None else body.temperature,
            text=echo_text(body.text),
            tool_choice="auto" if body.tool_choice is None else body.tool_choice,
            tools=[echo_tool(tool) for tool in body.tools or ()],
            top_p=1.0 if body.top_p is None else body.top_p,
            usage=response_usage(usage) if usage is not None else None,
            user=body.user,
            metadata=body.metadata or {},
        )


def response_status(answer: Answer) -> str:
    """"completed", or "incomplete" for an answer cut by max_output_tokens (a text, or a call cut inside
    its arguments: a complete call reports "tool_calls", never "length")."""
    return "incomplete" if answer.finish_reason == "length" else "completed"


def response_usage(usage: Usage) -> ResponseUsage:
    cached = usage.cached_tokens
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=usage.uncached_tokens),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=usage.total_tokens,
    )


def echo_text(text: dict | None) -> dict:
    if not text or not text.get("format"):
        return {**(text or {}), **DEFAULT_TEXT}
    return text


def echo_tool(tool: dict) -> dict:
    """A function tool as the response lists it (FunctionTool: parameters and strict always present)."""
    return {"type": "function", "name": tool.get("name"), "description": tool.get("description"),
            "parameters": tool.get("parameters"), "strict": tool.get("strict")}


def asked_diagnostics(response: ResponseObject, run: GenerationRun) -> ResponseObject:
    """`response` with `prompt_cache_diagnostics` when its request named a comparison response
    (`prompt_cache_options.comparison_response_id`), from the run's cache diagnosis."""
    diagnosis = run.cache_diagnosis() if run.request.compare_to else None
    if diagnosis is not None:
        response.prompt_cache_diagnostics = openai_prompt_cache_diagnostics(diagnosis)
    return response
