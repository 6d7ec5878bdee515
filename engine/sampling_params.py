"""SamplingParams, Usage and RequestOutput: what a caller passes in and gets back."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.grammar.spec import Grammar


@dataclass
class SamplingParams:
    """How to pick tokens and when to stop.

    temperature == 0 means greedy (argmax). top_k == 0 and top_p == 1.0 mean
    "no filter". seed makes sampling reproducible per request (same seed, same
    prompt, same output). stop strings are matched on the decoded text and
    trimmed from it; stop_token_ids and EOS end the request without adding
    their text. max_tokens == 0 only prefills (used by pins). grammar
    constrains the output (engine.grammar): each token is drawn from the
    grammar's mask, and a completed grammar ends the request with the
    grammar's finish_reason.
    """

    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    grammar: Grammar | None = None

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in (self.stop or []) if s]
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1


@dataclass(frozen=True)
class Usage:
    """Per-request accounting, sent with the final output.

    cached_tokens: prompt tokens served from the cache at admission, device and
    host tier together; host_cached_tokens: of those, the ones copied in from
    the host tier (so device hits = cached_tokens - host_cached_tokens).
    computed_prefill_tokens: tokens the model actually prefilled for this
    request (recomputation after a preemption included).
    ttft_s: submission to first token; decode_s: first token to finish.
    """

    prompt_tokens: int
    cached_tokens: int
    computed_prefill_tokens: int
    completion_tokens: int
    ttft_s: float
    decode_s: float
    host_cached_tokens: int = 0


@dataclass
class RequestOutput:
    """One streamed step of a request: new token ids and their text delta.

    finish_reason is None until the last output ("stop", "length", "abort", or
    the grammar's own, e.g. "tool_calls");
    usage and the full text/token ids are set on the last output only. error
    is set (and finish_reason == "abort") when the engine failed this request.
    """

    request_id: str
    token_ids: list[int]
    text: str
    finish_reason: str | None = None
    usage: Usage | None = None
    output_token_ids: list[int] | None = None
    output_text: str | None = None
    error: BaseException | None = None
    stop_sequence: str | None = None  # on the last output: the stop string that ended the request, if one did

    @property
    def is_finished(self) -> bool:
        return self.finish_reason is not None
