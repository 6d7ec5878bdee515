"""Anthropic Messages API request models (POST /v1/messages and /v1/messages/count_tokens).

Requests accept unknown fields (clients send new betas every month) but validate the ones radixgate
reads. Content blocks stay plain dicts here: gateway/messages/content.py reads them, so an
unsupported block type is a 400 naming its place (`messages.2.content.0.type`), not a pydantic
union error. Fields Claude Code sends on every request (`thinking`, `context_management`,
`output_config.effort`, `diagnostics`, `service_tier`, ...) are accepted; what they ask for a model
without thinking or server-side edits is nothing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.canonicalize.surrogates import scrub_surrogates


class InputMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["user", "assistant", "system"]  # a system turn mid-conversation (Claude Code's environment block)
    content: str | list[dict[str, Any]]


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    user_id: str | None = None


class ThinkingConfig(BaseModel):
    """`enabled` / `adaptive` / `disabled` (or a newer mode): accepted, and no thinking happens on a model without it."""

    model_config = ConfigDict(extra="allow")

    type: str
    budget_tokens: int | None = Field(default=None, ge=0)


class CountTokensRequest(BaseModel):
    """What /v1/messages/count_tokens reads: the prompt-shaping fields of a Messages request."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[InputMessage] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: ThinkingConfig | None = None
    cache_control: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None
    output_format: dict[str, Any] | None = None  # the structured-outputs beta's spelling of output_config.format
    context_management: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] | None = None
    container: Any = None

    @model_validator(mode="before")
    @classmethod
    def _scrub_surrogates(cls, data: Any) -> Any:
        return scrub_surrogates(data)


class MessagesRequest(CountTokensRequest):
    """POST /v1/messages. `max_tokens` is required (as Anthropic's API requires it) and is a cap: the answer
    never asks for more than the model's context leaves."""

    max_tokens: int = Field(ge=1)
    stream: bool = False
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    metadata: Metadata | None = None
    service_tier: str | None = None
