"""The backend contract: what the router hands a request to, and what comes back.

A backend turns one prepared prompt into a stream of chunks. The embedded
engine (routing/embedded.py) and remote OpenAI-compatible engines reached via
litellm (routing/remote.py) both implement `Backend`; the router
(routing/router.py) picks one per request (prefix affinity, health, load).

Invariants every backend keeps:
- `stream` yields zero or more chunks with text deltas, and exactly one final
  chunk whose `finish_reason` is set ("stop" | "length" | "abort" |
  "tool_calls"); only that final chunk carries `usage`.
- `usage.cached_tokens` counts only tokens served from a cache inside the
  caller's `namespace` (one tenant, or one cache group, plus the model id);
  a backend that cannot tell reports None ("unknown", logged as NULL), never a guess.
- Closing the iterator early (client gone, `aclose()`, task cancelled) aborts
  the request in the backend; `abort(request_id)` does the same from outside.
- Errors surface as exceptions: engine errors (PromptTooLongError,
  EngineOverloadedError, ...) or `BackendUnavailableError` for a remote that
  cannot be reached (the router may then fail over).

Wiring (gateway/main.py builds it at startup):
    from gateway.routing.router import build_router
    router = build_router(settings, embedded)   # embedded: EmbeddedBackend | None
  build_router reads `settings.remotes` (list of RemoteSettings: name, model,
  api_base, api_key, weight, kind, timeouts, cooldown) and `settings.routing`
  and returns a `BackendRouter`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Protocol, runtime_checkable


class BackendUnavailableError(Exception):
    """A backend could not take the request (connection refused, timeout, 5xx) before its first output.
    Its message is ours, fit for the client (no upstream name, URL or text)."""


class BackendStreamError(Exception):
    """A backend failed after its first output; the stream ends with an error event. Message as above."""


@dataclass(frozen=True)
class OutputFormat:
    """The shape the answer must take: one JSON object (`json_object`), or one JSON value valid under
    `schema` (`json_schema`, named `name`). Free text is no OutputFormat at all (None)."""

    kind: str  # "json_object" | "json_schema"
    name: str | None = None
    schema: dict | None = None
    strict: bool | None = None
    description: str | None = None


@dataclass(frozen=True)
class ToolChoice:
    """Whether the answer calls a tool: "auto" (the model decides), "none", "required" (one or more
    calls), or "function" (exactly one call to `name`)."""

    mode: str
    name: str | None = None


@dataclass(frozen=True)
class GenerationParams:
    """Sampling and output parameters, backend-neutral (each backend speaks them in its own protocol)."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    seed: int | None = None
    stop: tuple[str, ...] = ()
    tools: tuple[dict, ...] = ()  # in the chat template's form: {"type": "function", "function": {...}}
    tool_choice: ToolChoice | None = None  # None: "auto" when there are tools
    user: str | None = None
    output: OutputFormat | None = None
    parallel_tool_calls: bool | None = None
    grammar: Any = None  # an engine.Grammar for the embedded engine; remotes get the fields above
    # scheduling, for the embedded engine only: whose fair share the request counts against (the
    # tenant, not its cache namespace: tenants sharing a cache group still get a share each), that
    # share's weight, and the client's own bound on its queue wait (never above the server's)
    tenant: str | None = None
    tenant_weight: float = 1.0
    queue_timeout_s: float | None = None
    # cache breakpoints, for the embedded engine only (remotes cannot pin): (prompt tokens, ttl_s) prefixes to
    # pin once computed, and (the namespace whose pin quota they count against, that quota in tokens)
    cache_pins: tuple[tuple[int, float], ...] = ()
    pin_quota: tuple[str, int] | None = None


@dataclass(frozen=True)
class PreparedPrompt:
    """A request after canonicalization, rendering and tokenization.

    token_ids: the full prompt for the embedded engine (section-stable ids).
    text: the same prompt as rendered text (what token_ids decode to).
    messages: the canonical-order chat messages, for remote OpenAI-style backends
      that render their own chat template.
    static_prefix_len: number of leading token_ids shared by every request with
      the same static sections (system, tools, context).
    system_prefix_len: of those, the leading system and tools tokens (<= static_prefix_len): what
      every request of one agent or app shares, whatever its retrieved context; affinity hashes them.
    assistant_prefix: text the answer is forced to start with (e.g. `<tool_call>` when
      tool_choice requires a call). Its ids are already the last of token_ids; a
      backend generating from token_ids yields it as its first text. Backends that
      render `messages` themselves ignore it (they honour params.tool_choice).
    """

    token_ids: tuple[int, ...]
    text: str
    messages: tuple[dict, ...]
    static_prefix_len: int
    model: str
    assistant_prefix: str = ""
    system_prefix_len: int = 0

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    def prefix_key(self, num_tokens: int | None = None) -> str:
        """Stable hash of the first `num_tokens` ids (default: the static prefix)."""
        limit = self.static_prefix_len if num_tokens is None else num_tokens
        data = ",".join(map(str, self.token_ids[:limit])).encode()
        return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True)
class BackendUsage:
    prompt_tokens: int
    cached_tokens: int | None  # None: unknown (the backend reports none, or cannot be trusted to)
    completion_tokens: int
    ttft_s: float | None = None
    decode_s: float | None = None
    host_cached_tokens: int = 0  # of cached_tokens, those the engine copied in from its host tier


@dataclass(frozen=True)
class BackendChunk:
    """One step of a backend's output: a text delta, and on the last chunk the finish reason and usage."""

    text: str = ""
    token_ids: tuple[int, ...] = ()
    finish_reason: str | None = None
    usage: BackendUsage | None = None
    tool_calls: tuple[dict, ...] = field(default_factory=tuple)
    stop_sequence: str | None = None  # on the final chunk: the caller's stop string that ended the answer, if known


@runtime_checkable
class Backend(Protocol):
    """Something that can generate for a prepared prompt."""

    name: str

    def is_healthy(self) -> bool: ...

    def stream(
        self, prompt: PreparedPrompt, params: GenerationParams, namespace: str, request_id: str
    ) -> AsyncIterator[BackendChunk]: ...

    def abort(self, request_id: str) -> None: ...


@runtime_checkable
class BackendRouter(Protocol):
    """Picks the backend for a request. `backends` lists all of them (for /v1/models, health)."""

    backends: list[Backend]

    def pick(self, prompt: PreparedPrompt, namespace: str, cache_key: str | None = None) -> Backend: ...

    def check_grammar(self, grammar: Any) -> None:
        """Raise (GrammarError) if a backend that would run `grammar` cannot compile it."""

