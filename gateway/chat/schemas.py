"""OpenAI chat-completion request and response models, plus radixgate's extra request fields.

Requests accept unknown fields (clients send vendor extras) but validate the
ones we use. Extra radixgate fields: `template` (name), `context` (documents,
strings or {"id", "text"}), `canonicalize` (default true), `queue_timeout_s` (the longest
this request may wait in the engine's queue before it is first scheduled; the server's
limit when larger or unset; past it: 503 with Retry-After).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.canonicalize.surrogates import scrub_surrogates
from gateway.generation.extras import ContextDoc


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1)
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
    prompt_cache_key: str | None = None
    # radixgate extras
    template: str | None = None
    context: list[str | ContextDoc] | None = None
    canonicalize: bool = True
    queue_timeout_s: float | None = Field(default=None, gt=0.0)

    @model_validator(mode="before")
    @classmethod
    def _scrub_surrogates(cls, data: Any) -> Any:
        return scrub_surrogates(data)

    @field_validator("stop")
    @classmethod
    def _limit_stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > 4:
            raise ValueError("at most 4 stop sequences")
        return value

    @field_validator("tools")
    @classmethod
    def _check_tools(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        for index, tool in enumerate(value or ()):
            function = tool.get("function")
            if tool.get("type", "function") != "function" or not isinstance(function, dict):
                raise ValueError(f"tools[{index}] must be {{'type': 'function', 'function': {{'name': ...}}}}")
            if not isinstance(function.get("name"), str) or not function["name"]:
                raise ValueError(f"tools[{index}].function.name must be a non-empty string")
        return value

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    def body_dict(self) -> dict[str, Any]:
        """The body as plain JSON types, for the canonicalizer and render_raw."""
        return self.model_dump(mode="json", exclude_none=True)


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class CompletionTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails = Field(default_factory=CompletionTokensDetails)


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    refusal: str | None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str | None
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None
    prompt_cache_diagnostics: dict[str, Any] | None = None  # only when asked (gateway/chat/render.py)


class ChunkDelta(BaseModel):
    role: str | None = None
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: str | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "radixgate"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def make_usage(prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> Usage:
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=cached_tokens),
    )
