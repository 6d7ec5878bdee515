"""EmbeddedBackend: the in-process engine behind the Backend protocol.

The engine's radix cache is keyed by the namespace it is given, so
`usage.cached_tokens` is by construction a hit inside the caller's own cache
domain. Leaving the stream early (client disconnect, cancellation) aborts the
engine request, which frees its pages and unlocks its cached prefix.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, AsyncIterator

from gateway.routing.backend import BackendChunk, BackendUsage, GenerationParams, PreparedPrompt

if TYPE_CHECKING:
    from engine import Engine

log = logging.getLogger(__name__)


class EmbeddedBackend:
    """Adapts `engine.Engine.generate` to `Backend.stream`."""

    holds_cache_pins = True  # params.cache_pins are leased in the engine (remotes have no such attribute)

    def __init__(self, engine: Engine, name: str = "embedded") -> None:
        self.engine = engine
        self.name = name

    @property
    def model_id(self) -> str:
        return self.engine.model_id

    def is_healthy(self) -> bool:
        """In-process: healthy while the app runs (asking the engine would wait for its step lock)."""
        return True

    def abort(self, request_id: str) -> None:
        self.engine.abort(request_id)

    def check_grammar(self, grammar) -> None:
        """Compile `grammar` into the engine's grammar cache now (GrammarError if it does not compile), so
        `stream`, on the event loop, only copies the cached matcher."""
        self.engine.compile_grammar(grammar)

    async def stream(
        self, prompt: PreparedPrompt, params: GenerationParams, namespace: str, request_id: str
    ) -> AsyncIterator[BackendChunk]:
        """Yield text deltas, then one final chunk with finish_reason and usage; abort on early exit.

        The request joins the engine's fair queue as params.tenant; nothing is yielded before the
        engine's first output, so an error raised while it waits (QueueTimeoutError) precedes any byte."""
        sampling = to_sampling_params(params)
        is_finished = False
        try:
            outputs = self.engine.generate(list(prompt.token_ids), sampling, namespace=namespace, request_id=request_id,
                                           fairness_key=params.tenant, weight=params.tenant_weight,
                                           queue_timeout_s=params.queue_timeout_s,
                                           prefix_pins=to_prefix_pins(params))
            prefix = prompt.assistant_prefix
            async for out in outputs:
                error = getattr(out, "error", None)
                if error is not None:
                    is_finished = True
                    raise error
                if prefix:  # held back until the engine answers, so a queue timeout still comes before any byte
                    yield BackendChunk(text=prefix)
                    prefix = ""
                if out.finish_reason is None:
                    if out.text or out.token_ids:
                        yield BackendChunk(text=out.text, token_ids=tuple(out.token_ids))
                    continue
                is_finished = True
                yield BackendChunk(
                    text=out.text, token_ids=tuple(out.token_ids), finish_reason=out.finish_reason, usage=to_usage(out.usage),
                    stop_sequence=getattr(out, "stop_sequence", None),
                )
                return
        finally:
            if not is_finished:
                log.info("aborting engine request %s (stream closed early)", request_id)
                self.engine.abort(request_id)


def to_sampling_params(params: GenerationParams):
    from engine import SamplingParams

    return SamplingParams(
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        seed=params.seed,
        stop=list(params.stop),
        grammar=params.grammar,
    )


def to_prefix_pins(params: GenerationParams):
    """The engine's PrefixPins for params.cache_pins (None without any)."""
    if not params.cache_pins:
        return None
    from engine import PrefixPins

    quota_namespace, quota_tokens = params.pin_quota or (None, None)
    return PrefixPins(params.cache_pins, quota_namespace, quota_tokens)


def to_usage(usage) -> BackendUsage | None:
    if usage is None:
        return None
    return BackendUsage(
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
        completion_tokens=usage.completion_tokens,
        ttft_s=usage.ttft_s,
        decode_s=usage.decode_s,
        host_cached_tokens=usage.host_cached_tokens,
    )
