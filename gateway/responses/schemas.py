"""OpenAI Responses-API request and response models (names and shapes as in openai.types.responses).

The request accepts unknown fields (clients send vendor extras) but validates
the ones it uses; radixgate's extras (`template`, `context`,
`canonicalize`) are read by gateway/responses/parse.py. Input and output items stay
plain dicts, normalized by gateway/responses/items.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.canonicalize.surrogates import scrub_surrogates

METADATA_MAX_KEYS, METADATA_MAX_KEY_CHARS, METADATA_MAX_VALUE_CHARS = 16, 64, 512


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    input: str | list[Any] = ""
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: dict[str, Any] | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    previous_response_id: str | None = None
    store: bool | None = True
    metadata: dict[str, str] | None = None
    prompt_cache_key: str | None = None
    stream: bool | None = False
    user: str | None = None
    safety_identifier: str | None = None
    # accepted so that a value radixgate cannot honour is a 400 naming it (gateway/responses/parse.py)
    background: bool | None = None
    conversation: Any = None
    truncation: str | None = None
    top_logprobs: int | None = None
    include: list[str] | None = None
    prompt: Any = None
    reasoning: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _scrub_surrogates(cls, data: Any) -> Any:
        return scrub_surrogates(data)

    @field_validator("metadata")
    @classmethod
    def _check_metadata(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return value
        if len(value) > METADATA_MAX_KEYS:
            raise ValueError(f"at most {METADATA_MAX_KEYS} metadata keys")
        for key, item in value.items():
            if len(key) > METADATA_MAX_KEY_CHARS or len(item) > METADATA_MAX_VALUE_CHARS:
                raise ValueError(f"metadata keys are at most {METADATA_MAX_KEY_CHARS} characters, "
                                 f"values at most {METADATA_MAX_VALUE_CHARS}")
        return value

    @field_validator("text")
    @classmethod
    def _check_text(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not isinstance(value.get("format", {}), dict):
            raise ValueError("text.format must be an object")
        return value


class InputTokensDetails(BaseModel):
    cached_tokens: int = 0
    cache_write_tokens: int = 0  # prompt tokens computed and written to the cache: input - cached


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens", "content_filter"]


class ResponseObject(BaseModel):
    """The `response` object: returned by POST and GET, and carried by the stream's lifecycle events."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["completed", "failed", "in_progress", "incomplete"]
    error: dict[str, Any] | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str
    output: list[dict[str, Any]] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    reasoning: dict[str, Any] = Field(default_factory=lambda: {"effort": None, "summary": None})
    store: bool = True
    temperature: float = 1.0
    text: dict[str, Any] = Field(default_factory=lambda: {"format": {"type": "text"}})
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    top_p: float = 1.0
    truncation: str = "disabled"
    usage: ResponseUsage | None = None
    user: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    prompt_cache_diagnostics: dict[str, Any] | None = None  # when prompt_cache_options.comparison_response_id is sent

    @property
    def output_text(self) -> str:
        return "".join(part["text"] for item in self.output if item["type"] == "message"
                       for part in item["content"] if part["type"] == "output_text")


class DeletedResponse(BaseModel):
    id: str
    object: Literal["response.deleted"] = "response.deleted"
    deleted: bool = True


class InputItemList(BaseModel):
    object: Literal["list"] = "list"
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool
