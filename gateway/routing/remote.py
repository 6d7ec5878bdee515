"""Remote OpenAI-compatible engines (SGLang, vLLM, another radixgate) reached through litellm.

A RemoteBackend sends the canonical-order chat messages (`PreparedPrompt.messages`), so the
remote's own prefix cache sees the same stable prefixes the embedded engine would.

Invariants:
- Tenants stay apart on the remote: a remote that takes one (`kind` radixgate, vLLM, SGLang) gets
  the gateway's `cache_salt` for the caller's cache namespace (routing/salt.py), never a
  client-supplied one (the request is built from the prepared prompt, not from the client's body).
- `usage.cached_tokens` is the remote's figure only when the remote keeps tenants apart (it took
  the salt, or `report_cached_tokens` declares it); otherwise, and when the remote reports none,
  it is None ("unknown"), never a guess: a shared remote cache would turn it into an oracle.
- A failure before the first output (connection refused, timeout, 5xx, 429, an error event or a
  dropped connection mid-stream) raises BackendUnavailableError and marks the backend down
  (routing/health.py), so the router can fail over; after the first output it raises
  BackendStreamError. A 4xx answer is the client's error: BackendRejectedError, a 400. Messages the
  client sees are our own: no upstream name, URL or text (those go to the server log).
"""

from __future__ import annotations

import logging
import time
from typing import Any, AsyncIterator

from gateway.routing.backend import (
    BackendChunk, BackendStreamError, BackendUnavailableError, BackendUsage, GenerationParams, OutputFormat, PreparedPrompt,
    ToolChoice,
)
from gateway.routing.health import BackendHealth

log = logging.getLogger("gateway.routing")

DEFAULT_COOLDOWN_S = 10.0
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
HEALTH_PATHS = {"radixgate": "/healthz"}
LOAD_PATHS = {"radixgate": "/v1/load", "vllm": "/metrics", "sglang": "/metrics"}


class BackendRejectedError(Exception):
    """The remote answered 4xx: the request's parameters are the client's error (a 400, code
    backend_rejected, gateway/errors.py). Its message is ours, never upstream text."""


def import_litellm() -> Any:
    """litellm, imported on first use. Its model cost map is read locally (no network at start) when the
    process owner set LITELLM_LOCAL_MODEL_COST_MAP first: `radixgate serve` does (gateway/cli/serve.py)."""
    import litellm

    return litellm


class RemoteBackend:
    """One remote OpenAI-compatible server; implements routing.backend.Backend."""

    def __init__(
        self,
        name: str,
        model: str,
        api_base: str,
        api_key: str | None = None,
        *,
        weight: float = 1.0,
        kind: str = "openai",
        salter: Any = None,
        report_cached_tokens: bool = False,
        cooldown_s: float = DEFAULT_COOLDOWN_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        health_path: str | None = None,
        load_path: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.api_base = api_base.rstrip("/")
        self.weight = weight
        self.kind = kind
        self.salter = salter  # a routing.salt.CacheSalter, or None: send no cache_salt
        self.is_reporting_cached_tokens = report_cached_tokens or salter is not None
        self.health = BackendHealth(name, cooldown_s)
        self.health_url = self.root_url + (health_path or HEALTH_PATHS.get(kind, "/health"))
        load_path = load_path or LOAD_PATHS.get(kind)
        self.load_url = self.root_url + load_path if load_path else None
        self._api_key = api_key or "none"
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._active: set[str] = set()
        self._aborted: set[str] = set()

    @classmethod
    def from_settings(cls, remote: Any, salter: Any = None) -> RemoteBackend:
        """Build from a settings.RemoteSettings entry; `salter` is used only if the remote takes a salt."""
        return cls(
            remote.name,
            remote.model,
            remote.api_base,
            remote.api_key.get_secret_value() if remote.api_key is not None else None,
            weight=remote.weight,
            kind=remote.kind,
            salter=salter if remote.takes_cache_salt else None,
            report_cached_tokens=remote.report_cached_tokens,
            cooldown_s=remote.cooldown_s,
            timeout_s=remote.timeout_s,
            connect_timeout_s=remote.connect_timeout_s,
            health_path=remote.health_path,
            load_path=remote.load_path,
        )

    @property
    def root_url(self) -> str:
        """The server's root: api_base without its trailing /v1."""
        return self.api_base.removesuffix("/v1")

    @property
    def api_key(self) -> str:
        return self._api_key

    def is_healthy(self) -> bool:
        return self.health.admits()

    def mark_unhealthy(self, reason: str = "request failed") -> None:
        """Take the backend out of rotation for the cooldown; then one request probes it."""
        self.health.record_failure(reason)

    def abort(self, request_id: str) -> None:
        """Stop a running stream: its generator ends with finish_reason "abort" at the next chunk."""
        if request_id in self._active:
            self._aborted.add(request_id)

    def request_kwargs(self, prompt: PreparedPrompt, params: GenerationParams, namespace: str | None = None) -> dict[str, Any]:
        """The litellm.acompletion arguments for one request (canonical messages, streaming with usage,
        the caller's cache salt when this remote takes one)."""
        import httpx

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
            "timeout": httpx.Timeout(self._timeout_s, connect=self._connect_timeout_s),
            "num_retries": 0,
        }
        optional = {"seed": params.seed, "stop": list(params.stop) or None, "user": params.user,
                    "response_format": openai_response_format(params.output)}
        if params.tools:
            optional.update(tools=[dict(t) for t in params.tools], tool_choice=openai_tool_choice(params.tool_choice),
                            parallel_tool_calls=params.parallel_tool_calls)
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        extra_body = {"top_k": params.top_k} if params.top_k else {}  # vLLM's and SGLang's sampling extra
        if self.salter is not None and namespace is not None:
            extra_body["cache_salt"] = self.salter.salt(namespace)
        if extra_body:
            kwargs["extra_body"] = extra_body
        return kwargs

    async def stream(
        self, prompt: PreparedPrompt, params: GenerationParams, namespace: str, request_id: str
    ) -> AsyncIterator[BackendChunk]:
        """Yield text deltas, then one final chunk with finish_reason, tool calls and usage.

        Closing this generator early (or `abort`) closes the HTTP response, which cancels the
        request on the remote.
        """
        litellm = import_litellm()
        started = time.perf_counter()
        stream = await self._open(litellm, prompt, params, namespace)
        self._active.add(request_id)
        tool_calls = ToolCallAccumulator()
        finish_reason, usage, ttft_s = None, None, None
        try:
            async for chunk in self._chunks(stream, lambda: ttft_s is not None):
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
        self.health.record_success()
        yield BackendChunk(
            finish_reason=finish_reason or "stop",
            usage=self.usage_of(usage, prompt, ttft_s, time.perf_counter() - started),
            tool_calls=tool_calls.calls(),
        )

    async def _chunks(self, stream: Any, is_started) -> AsyncIterator[Any]:
        """The upstream's chunks; a failure while reading is BackendUnavailableError before our first
        output (the router may retry elsewhere), BackendStreamError after it."""
        iterator = stream.__aiter__()
        while True:
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except Exception as exc:
                self.mark_unhealthy(f"stream broke: {type(exc).__name__}")
                log.warning("remote %s failed mid-stream: %r", self.name, exc)
                if is_started():
                    raise BackendStreamError("The model backend failed while streaming the answer.") from exc
                raise BackendUnavailableError("The model backend failed before answering.") from exc
            yield chunk

    async def _open(self, litellm: Any, prompt: PreparedPrompt, params: GenerationParams, namespace: str) -> Any:
        """Start the streaming request; map transport/server failures to BackendUnavailableError."""
        try:
            return await litellm.acompletion(**self.request_kwargs(prompt, params, namespace))
        except litellm.BadRequestError as exc:
            log.info("remote %s rejected a request: %s", self.name, exc)
            raise BackendRejectedError("The model backend rejected the request's parameters.") from exc
        except (litellm.AuthenticationError, litellm.NotFoundError, litellm.PermissionDeniedError) as exc:
            self.mark_unhealthy(f"refused the gateway: {type(exc).__name__}")
            log.warning("remote %s refused the gateway: %s", self.name, exc)
            raise BackendUnavailableError("The model backend refused the gateway.") from exc
        except Exception as exc:  # connection errors, timeouts, 5xx, 429
            self.mark_unhealthy(f"unavailable: {type(exc).__name__}")
            log.warning("remote %s is unavailable: %s", self.name, exc)
            raise BackendUnavailableError("The model backend is unavailable.") from exc

    def usage_of(self, usage: Any, prompt: PreparedPrompt, ttft_s: float | None, total_s: float) -> BackendUsage:
        """BackendUsage from the remote's usage block (prompt size falls back to our own count)."""
        prompt_tokens = getattr(usage, "prompt_tokens", None) or prompt.num_tokens
        completion_tokens = getattr(usage, "completion_tokens", None) or 0
        details = getattr(usage, "prompt_tokens_details", None)
        remote_cached = getattr(details, "cached_tokens", None)
        trusted = self.is_reporting_cached_tokens and remote_cached is not None
        cached = min(int(remote_cached), prompt_tokens) if trusted else None
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


def openai_response_format(output: OutputFormat | None) -> dict | None:
    """The output constraint as OpenAI's `response_format` (what a remote's chat endpoint reads)."""
    if output is None:
        return None
    if output.kind != "json_schema":
        return {"type": output.kind}
    spec = {"name": output.name, "schema": output.schema, "strict": output.strict, "description": output.description}
    return {"type": "json_schema", "json_schema": {key: value for key, value in spec.items() if value is not None}}


def openai_tool_choice(choice: ToolChoice | None) -> str | dict | None:
    """The tool choice as OpenAI's `tool_choice`."""
    if choice is None or choice.mode != "function":
        return None if choice is None else choice.mode
    return {"type": "function", "function": {"name": choice.name}}
