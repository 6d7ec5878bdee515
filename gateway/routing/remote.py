"""Remote OpenAI-compatible engines (SGLang, vLLM, another radixgate) reached through litellm.

A RemoteBackend sends the canonical-order chat messages (`PreparedPrompt.messages`), so the
remote's own prefix cache sees the same stable prefixes the embedded engine would.

Invariants:
- `usage.cached_tokens` is the remote's figure only when the remote is declared to keep one
  cache domain per caller (`report_cached_tokens=True`, e.g. a radixgate reached with a key of a
  tenant that no other caller shares); otherwise 0, since a shared remote cache would turn
  cached_tokens into a cross-tenant oracle (routing/base.py).
- A failure before the first chunk (connection refused, timeout, 5xx, 429) raises
  BackendUnavailableError and marks the backend unhealthy for `cooldown_s`, so the router can fail
  over; a 4xx answer is the client's error and surfaces as a 400.
"""

from __future__ import annotations

import os
import time
from typing import Any, AsyncIterator

from gateway.errors import bad_request
from gateway.routing.base import BackendChunk, BackendUnavailableError, BackendUsage, GenerationParams, PreparedPrompt

DEFAULT_COOLDOWN_S = 10.0
DEFAULT_TIMEOUT_S = 600.0


def import_litellm() -> Any:
    """litellm, imported on first use with its model cost map read locally (no network at start)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


class RemoteBackend:
    """One remote OpenAI-compatible server; implements routing.base.Backend."""

    def __init__(
        self,
        name: str,
        model: str,
        api_base: str,
        api_key: str | None = None,
        *,
        weight: float = 1.0,
        report_cached_tokens: bool = False,
        cooldown_s: float = DEFAULT_COOLDOWN_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.name = name
        self.model = model
        self.api_base = api_base
        self.weight = weight
        self.is_reporting_cached_tokens = report_cached_tokens
        self._api_key = api_key or "none"
        self._cooldown_s = cooldown_s
        self._timeout_s = timeout_s
        self._unhealthy_until = 0.0
        self._active: set[str] = set()
        self._aborted: set[str] = set()

    @classmethod
    def from_settings(cls, remote: Any) -> RemoteBackend:
        """Build from a settings.RemoteSettings entry."""
        return cls(
            remote.name,
            remote.model,
            remote.api_base,
            remote.api_key.get_secret_value() if remote.api_key is not None else None,
            weight=remote.weight,
            report_cached_tokens=remote.report_cached_tokens,
        )

    def is_healthy(self) -> bool:
        return time.monotonic() >= self._unhealthy_until

    def mark_unhealthy(self) -> None:
        """Take the backend out of rotation for the cooldown; it is retried afterwards."""
        self._unhealthy_until = time.monotonic() + self._cooldown_s

    def abort(self, request_id: str) -> None:
        """Stop a running stream: its generator ends with finish_reason "abort" at the next chunk."""
        if request_id in self._active:
            self._aborted.add(request_id)

    def request_kwargs(self, prompt: PreparedPrompt, params: GenerationParams) -> dict[str, Any]:
        """The litellm.acompletion arguments for one request (canonical messages, streaming with usage)."""
        kwargs: dict[str, Any] = {
            "model": f"openai/{self.model}",
            "api_base": self.api_base,
            "api_key": self._api_key,
            "messages": [dict(m) for m in prompt.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "timeout": self._timeout_s,
            "num_retries": 0,
        }
        optional = {"seed": params.seed, "stop": list(params.stop) or None, "user": params.user,
                    "response_format": params.response_format}
        if params.tools:
            optional.update(tools=[dict(t) for t in params.tools], tool_choice=params.tool_choice,
                            parallel_tool_calls=params.parallel_tool_calls)
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        return kwargs

    async def stream(
        self, prompt: PreparedPrompt, params: GenerationParams, namespace: str, request_id: str
    ) -> AsyncIterator[BackendChunk]:
        """Yield text deltas, then one final chunk with finish_reason, tool calls and usage.

        Closing this generator early (or `abort`) closes the HTTP response, which cancels the
        request on the remote.
        """
        litellm = import_litellm()
        stream = await self._open(litellm, prompt, params)
        self._active.add(request_id)
        tool_calls = ToolCallAccumulator()
        finish_reason, usage, ttft_s = None, None, None
        started = time.perf_counter()
        try:
            async for chunk in stream:
                if request_id in self._aborted:
                    finish_reason = "abort"
                    break
                usage = getattr(chunk, "usage", None) or usage
                for choice in chunk.choices or ():
                    tool_calls.add(getattr(choice.delta, "tool_calls", None))
                    finish_reason = choice.finish_reason or finish_reason
                    if choice.delta.content:
                        ttft_s = ttft_s if ttft_s is not None else time.perf_counter() - started
                        yield BackendChunk(text=choice.delta.content)
        finally:
            self._active.discard(request_id)
            self._aborted.discard(request_id)
            await stream.aclose()
        yield BackendChunk(
            finish_reason=finish_reason or "stop",
            usage=self.usage_of(usage, prompt, ttft_s, time.perf_counter() - started),
            tool_calls=tool_calls.calls(),
        )

    async def _open(self, litellm: Any, prompt: PreparedPrompt, params: GenerationParams) -> Any:
        """Start the streaming request; map transport/server failures to BackendUnavailableError."""
        try:
            return await litellm.acompletion(**self.request_kwargs(prompt, params))
        except litellm.BadRequestError as exc:
            raise bad_request(f"remote {self.name} rejected the request: {exc}") from exc
        except (litellm.AuthenticationError, litellm.NotFoundError, litellm.PermissionDeniedError) as exc:
            self.mark_unhealthy()
            raise BackendUnavailableError(f"remote {self.name} refused the gateway: {exc}") from exc
        except Exception as exc:  # connection errors, timeouts, 5xx, 429
            self.mark_unhealthy()
            raise BackendUnavailableError(f"remote {self.name} is unavailable: {exc}") from exc

    def usage_of(self, usage: Any, prompt: PreparedPrompt, ttft_s: float | None, total_s: float) -> BackendUsage:
        """BackendUsage from the remote's usage block (prompt size falls back to our own count)."""
        prompt_tokens = getattr(usage, "prompt_tokens", None) or prompt.num_tokens
        completion_tokens = getattr(usage, "completion_tokens", None) or 0
        details = getattr(usage, "prompt_tokens_details", None)
        remote_cached = getattr(details, "cached_tokens", None) or 0
        cached = min(remote_cached, prompt_tokens) if self.is_reporting_cached_tokens else 0
        decode_s = total_s - ttft_s if ttft_s is not None else None
        return BackendUsage(prompt_tokens, cached, completion_tokens, ttft_s=ttft_s, decode_s=decode_s)


class ToolCallAccumulator:
    """Joins streamed tool-call deltas (by index) into complete OpenAI tool_calls."""

    def __init__(self) -> None:
        self._calls: dict[int, dict] = {}

    def add(self, deltas: Any) -> None:
        for delta in deltas or ():
            index = getattr(delta, "index", None) or 0
            call = self._calls.setdefault(index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            call["id"] = getattr(delta, "id", None) or call["id"]
            function = getattr(delta, "function", None)
            if function is not None:
                call["function"]["name"] += getattr(function, "name", None) or ""
                call["function"]["arguments"] += getattr(function, "arguments", None) or ""

    def calls(self) -> tuple[dict, ...]:
        return tuple(self._calls[i] for i in sorted(self._calls))
