"""EngineConfig: everything the engine is built from, fixed at construction.

The engine never reads the environment; the gateway turns its settings into
one of these. Validation raises ValueError at construction, so a bad config
fails before any weights are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("fair", "lpm", "dfs-weight", "fcfs")
QUANTIZATIONS = ("none", "int8", "int4", "w4a8", "w8a8", "auto")
PREFERENCES = ("speed", "accuracy")


@dataclass(frozen=True)
class EngineConfig:
    """Frozen engine configuration.

    kv_cache_tokens sizes the KV pool when num_pages is None
    (num_pages = kv_cache_tokens // page_size). max_batch_tokens is the
    per-step token budget (decode tokens + prefill chunks; a chunk that would
    leave fewer than max_batch_tokens // 16 tokens takes them too). With
    enable_chunked_prefill off a prompt's remaining prefill runs in one step
    (alone if it exceeds the budget). max_queue bounds the waiting queue;
    a submission past it raises EngineOverloadedError. max_pinned_fraction caps the pages
    all pins hold together (a pin past it raises PinCapacityError), so pins can never take
    the pages running requests need.

    policy orders the waiting queue (engine.policy, engine.fair_queue): "fair"
    shares service equally (or by weight) across fairness keys and takes the
    longest cached prefix first within a key; service is computed tokens plus
    fair_cached_token_cost (0..1, default 0.5) per cached prompt token. Under
    "fair" a key running two fewer requests than another also takes a slot
    from it when every slot is taken (the other key's newest is preempted). max_queue_wait_s
    bounds how long a request waits before it is first scheduled; a request
    may ask for less (submit's queue_timeout_s), never more; past it the
    request leaves the queue holding nothing and ends with QueueTimeoutError.

    quantization: "none" (default), "int8", "int4" (weight-only, CPU), "w4a8" (int4
    weights, generated rows' activations int8 per 32 inputs: llama.cpp's Q4_1 x Q8_1),
    "w8a8" (the same with int8 weights, Q8_0 x Q8_0) or "auto" (the weight-only
    mode the CPU's probe times clearly faster at decode, else "none"; auto never
    quantizes activations).
    prefer: "speed" (default) or "accuracy"; with "accuracy", an auto dtype and
    auto quantization mean the float32 model (engine.kernels.choose_dtype).

    Speculation (engine.speculation): a greedy decode without a grammar, in a step
    that decodes at most speculative_max_batch sequences, feeds up to
    speculative_tokens drafts looked up from its own tokens (the longest
    recurring suffix of at most speculative_ngram tokens) and keeps those the
    model agrees with; the output is the same as without. 0 tokens turns it off.

    Host tier (engine.host_tier), off while both sizes are 0: host_tier_bytes,
    else host_tier_tokens, sizes a shared-memory page store below the radix
    cache. Engines given the same host_tier_name share one store (the first
    creates it); None gives this engine a private one. A holder whose process
    died, or that did not touch the store for host_tier_lease_s seconds, loses
    its references.

    native_kernels: run radixgate's native CPU kernels where they build (False: torch's kernels
    run every row). cache_dir: radixgate's cache directory, GGUF models dequantized under
    cache_dir/models (None: ~/.cache/radixgate). The engine reads no environment: the caller
    (the gateway's settings) decides both.

    kv_events_endpoint: publish the radix cache's KV events (engine/kv_events.py, vLLM's ZMQ format)
    there (None: off); "tcp://*:PORT" binds, "tcp://HOST:PORT" connects to a subscriber that binds.
    kv_events_replay_endpoint: a ROUTER address (bound) that replays buffered batches after a gap.
    """

    model: str = "smollm2-135m"
    device: str = "auto"
    dtype: str | None = None
    quantization: str = "none"
    prefer: str = "speed"
    page_size: int = 16
    num_pages: int | None = None
    kv_cache_tokens: int = 32768
    max_batch_tokens: int = 1024
    max_running: int = 64
    fair_cached_token_cost: float = 0.5
    policy: str = "fair"
    enable_radix_cache: bool = True
    enable_chunked_prefill: bool = True
    enable_dedup: bool = True
    dedup_min_tokens: int = 32
    max_queue: int = 1024
    max_queue_wait_s: float = 60.0
    max_context: int | None = None
    max_pinned_fraction: float = 0.5  # pinned pages, all namespaces together, stay within this share of the pool
    default_namespace: str = "default"
    speculative_tokens: int = 7
    speculative_ngram: int = 3
    speculative_max_batch: int = 4
    host_tier_tokens: int = 0
    host_tier_bytes: int = 0
    host_tier_name: str | None = None
    host_tier_lease_s: float = 60.0
    native_kernels: bool = True
    cache_dir: str | None = None
    kv_events_endpoint: str | None = None
    kv_events_replay_endpoint: str | None = None
    kv_events_topic: str = "kv"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {QUANTIZATIONS}, got {self.quantization!r}")
        if self.prefer not in PREFERENCES:
            raise ValueError(f"prefer must be one of {PREFERENCES}, got {self.prefer!r}")
        for name in ("page_size", "kv_cache_tokens", "max_batch_tokens", "max_running", "max_queue"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.max_queue_wait_s > 0:
            raise ValueError(f"max_queue_wait_s must be > 0, got {self.max_queue_wait_s}")
        if self.num_pages is not None and self.num_pages < 1:
            raise ValueError(f"num_pages must be >= 1, got {self.num_pages}")
        if not 0.0 <= self.fair_cached_token_cost <= 1.0:
            raise ValueError(f"fair_cached_token_cost must be within [0, 1], got {self.fair_cached_token_cost}")
        if not 0.0 <= self.max_pinned_fraction <= 1.0:
            raise ValueError(f"max_pinned_fraction must be within [0, 1], got {self.max_pinned_fraction}")
        for name in ("host_tier_tokens", "host_tier_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.host_tier_lease_s <= 0:
            raise ValueError(f"host_tier_lease_s must be > 0, got {self.host_tier_lease_s}")
        for name in ("speculative_tokens", "speculative_max_batch"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.speculative_ngram < 2:
            raise ValueError(f"speculative_ngram must be >= 2, got {self.speculative_ngram}")
        if self.max_context is not None and self.max_context < 2:
            raise ValueError(f"max_context must be >= 2, got {self.max_context}")

    @property
    def num_kv_pages(self) -> int:
        """Pages in the KV pool: num_pages, or kv_cache_tokens rounded down to pages."""
        if self.num_pages is not None:
            return self.num_pages
        return max(1, self.kv_cache_tokens // self.page_size)

    @property
    def is_host_tier_enabled(self) -> bool:
        return bool(self.host_tier_tokens or self.host_tier_bytes)

    def num_host_tier_pages(self, page_bytes: int) -> int:
        """Host-tier slots: host_tier_bytes // page_bytes, else host_tier_tokens // page_size (at least 1)."""
        if self.host_tier_bytes:
            return max(1, self.host_tier_bytes // max(1, page_bytes))
        return max(1, self.host_tier_tokens // self.page_size)
