"""GenerationRequest: what every wire format's request means, in the one shape the request path reads.

    request = chat.parse.generation_request(body)          # OpenAI chat completions
    request = responses.parse.generation_request(body, items)   # OpenAI Responses
    run = await path.start(request, caller=caller, http_request=http_request)

The conversation is held in the form a model's chat template reads (Hugging Face's
`apply_chat_template`): message dicts with `role`, `content` (a string, or text parts),
`tool_calls` ({"id", "type": "function", "function": {"name", "arguments"}}) and `tool_call_id`,
and tools as {"type": "function", "function": {"name", "description", "parameters"}}. That is the
canonicalizer's input language and the model's, not any client's wire format: a wire format
translates its own messages into it at its edge (system blocks, items, tool_use / tool_result
blocks), and nothing on the shared path knows which wire format a request came in.

Everything else is typed: sampling, the output constraint (OutputFormat, ToolChoice), radixgate's
own fields (template, context documents, canonicalize, queue deadline), the cache salt and the
routing key. `names` is how the caller's wire format spells a field of this request (an error
raised on the shared path carries the internal field, gateway/errors.py `field_error`, and the
path names it with these before the caller sees it).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import ParamNames, format_path
from gateway.routing.backend import OutputFormat, ToolChoice

__all__ = ["CacheBreakpoint", "GenerationRequest", "OutputFormat", "Sampling", "ToolChoice"]


@dataclass(frozen=True)
class CacheBreakpoint:
    """A caller's cache breakpoint (Anthropic's `cache_control`): pin the canonical prefix that holds the
    tools, the system message and ``messages[:messages]`` (``messages`` counts entries of
    ``GenerationRequest.messages``, the system message included) for ``ttl_s`` seconds, refreshed on each
    hit. Canonical order puts tools and system first, so a breakpoint on a tool or on the system is
    ``messages`` = the number of leading system messages."""

    messages: int
    ttl_s: float = 300.0


@dataclass(frozen=True)
class Sampling:
    """How to sample. `max_tokens` None: the server's default (settings.default_max_tokens). `top_k` 0: off."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationRequest:
    """One request, whatever wire format it came in (see the module docstring for the conversation's form)."""

    model: str
    messages: tuple[dict, ...]
    tools: tuple[dict, ...] = ()
    tool_choice: ToolChoice | None = None  # None: "auto" when there are tools
    parallel_tool_calls: bool | None = None
    output: OutputFormat | None = None  # None: free text
    sampling: Sampling = Sampling()
    context: tuple = ()  # retrieved documents: strings or {"id", "text"} (radixgate's `context` field)
    template: str | None = None
    canonicalize: bool = True
    queue_timeout_s: float | None = None
    cache_salt: str | None = None  # splits the caller's cache namespace further (tenants/isolation.py)
    route_key: str | None = None  # keeps related requests on one backend (prompt_cache_key, a chain)
    user: str | None = None
    cache_breakpoints: tuple[CacheBreakpoint, ...] = ()  # up to 4, in prompt order (Messages' cache_control)
    compare_to: str | None = None  # a previous response id the cache diagnosis compares with (insight/diagnosis_store.py)
    names: ParamNames = format_path

    def canonical_input(self) -> dict:
        """The conversation as the canonicalizer and the raw-order renderer read it (plain JSON types)."""
        body: dict = {"messages": [dict(message) for message in self.messages]}
        if self.tools:
            body["tools"] = [dict(tool) for tool in self.tools]
        if self.context:
            body["context"] = [doc if isinstance(doc, str) else dict(doc) for doc in self.context]
        return body

    def sample_body(self) -> dict:
        """The request as the template studio stores and replays it (the canonical input, the template, the
        model): a body the chat-completions parser reads back to the same conversation."""
        body = {"model": self.model, **self.canonical_input()}
        if self.template is not None:
            body["template"] = self.template
        return body
