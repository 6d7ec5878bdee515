"""The internal Answer as chat completions renders it: the non-streaming `chat.completion` object."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.chat.schemas import AssistantMessage, ChatCompletion, Choice, Usage, make_usage
from gateway.insight.diagnosis_render import openai_prompt_cache_diagnostics

if TYPE_CHECKING:
    from gateway.generation import result
    from gateway.generation.run import GenerationRun


def chat_completion(run: GenerationRun, answer: result.Answer) -> ChatCompletion:
    calls = openai_tool_calls(answer.tool_calls)
    # beside calls, content is the prose the model wrote before them (None when there is none), as OpenAI's
    message = AssistantMessage(content=(answer.text.strip() or None) if calls else answer.text, tool_calls=calls)
    return ChatCompletion(id=run.request_id, created=run.created, model=run.model_id,
                          choices=[Choice(message=message, finish_reason=answer.finish_reason)],
                          usage=chat_usage(answer.usage), **asked_diagnostics(run))


def asked_diagnostics(run: GenerationRun) -> dict:
    """{"prompt_cache_diagnostics": ...} when the request named a comparison response (Responses' field, which
    chat completions accepts as radixgate's extra), else nothing."""
    diagnosis = run.cache_diagnosis() if run.request.compare_to else None
    return {} if diagnosis is None else {"prompt_cache_diagnostics": openai_prompt_cache_diagnostics(diagnosis)}


def openai_tool_calls(calls: tuple[result.ToolCall, ...]) -> list[dict] | None:
    """OpenAI's `tool_calls` entries (None for an answer without calls)."""
    return [{"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in calls] or None


def chat_usage(usage: result.Usage) -> Usage:
    return make_usage(usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens)
