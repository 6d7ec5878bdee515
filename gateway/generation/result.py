"""What the request path hands back to a wire format: the answer's parts as they stream, then the answer.

    async for event in answer_events(run):        # gateway/generation/answer.py, the one drain loop
        TextDelta  -> text the client may see now
        Answer     -> last: the whole text, the tool calls, why it stopped, the usage

A wire format renders these in its own shapes (chat chunks, Responses events, ...); none of them
inspects backend chunks or another wire format's objects.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCall:
    """One call the answer makes: `arguments` is the JSON text of the arguments object, or, when
    max_tokens cut the call (`is_complete` false), that text as far as it was generated."""

    id: str
    name: str
    arguments: str
    is_complete: bool = True


@dataclass(frozen=True)
class Usage:
    """Prompt and completion tokens. `cached_tokens` of the prompt were read from the caller's own cache
    domain; the rest (`uncached_tokens`) were computed for this request. `cache_write_tokens` of those
    were computed up to the request's last cache breakpoint (CacheBreakpoint, rounded down to a KV page)
    and are now cached, pinned for its TTL where the pin quota allowed (`cache_write_1h_tokens` of them
    up to its last 1h breakpoint): Anthropic's cache_creation figures (gateway/pins/breakpoints.py). The
    rest of the uncached prompt is Anthropic's `input_tokens`. A remote backend cannot pin: 0 writes."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Answer:
    """The finished answer. `finish_reason`: "stop", "length" (max_tokens cut it) or "tool_calls" (it is
    `tool_calls`, and then `text` is what was not part of a call, usually "")."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: Usage
    stop_sequence: str | None = None  # finish_reason "stop" by one of the request's stop strings: that string
