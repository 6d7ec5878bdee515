"""radixgate's embedded engine: a paged KV pool, a radix prefix cache, a
continuous-batching scheduler and a Llama-family model runner.

    from engine import Engine, EngineConfig, SamplingParams
    with Engine(EngineConfig()) as engine:
        result = engine.generate_sync(token_ids, SamplingParams(max_tokens=32))
        json_out = engine.generate_sync(token_ids, SamplingParams(max_tokens=64, grammar=Grammar.json_object()))

The public API is what this module exports: the Engine with its config, request parameters, results
(RequestOutput, Usage) and errors; the output constraints (Grammar, ToolSpec, GrammarError); the KV pool
and the radix cache; and resolve_model_dir with model_cache_root. The gateway uses the engine through these
names only.
The model runner's parts (engine.runner, engine.models, engine.forward_batch, engine.sampler,
engine.grammar.compiler, ...) are internals: the benchmarks and the engine's own tests import them
from their modules, and they may change without notice.
"""

from engine.config import EngineConfig
from engine.engine import Engine
from engine.errors import (
    EngineError,
    EngineOverloadedError,
    OutOfPagesError,
    PinCapacityError,
    PrefixNotCachedError,
    PromptTooLongError,
    QueueTimeoutError,
    QuotaExceededError,
    UnbalancedUnlockError,
    UnknownPinError,
)
from engine.grammar import Grammar, GrammarError, ToolSpec
from engine.kernels import is_native_built, native_kernels
from engine.kv_pool import KVPool
from engine.models.gguf_cache import model_cache_root
from engine.models.loader import is_model_cached, resolve_model_dir
from engine.radix_cache import RadixCache
from engine.radix_pins import PrefixPins
from engine.sampling_params import RequestOutput, SamplingParams, Usage

__all__ = [
    "Engine",
    "EngineConfig",
    "SamplingParams",
    "RequestOutput",
    "Usage",
    "Grammar",
    "ToolSpec",
    "GrammarError",
    "KVPool",
    "RadixCache",
    "PrefixPins",  # prompt prefixes a request asks the cache to hold for a time (Engine.submit's prefix_pins)
    "resolve_model_dir",  # a model spec's local HF directory (an edge gateway reads its tokenizer there)
    "model_cache_root",  # where resolve_model_dir keeps dequantized GGUF models, given a cache directory
    # what the first load builds and caches on disk (`radixgate warmup` builds both ahead of time)
    "is_model_cached",
    "native_kernels",
    "is_native_built",
    "EngineError",
    "EngineOverloadedError",
    "QueueTimeoutError",
    "PinCapacityError",
    "OutOfPagesError",
    "PrefixNotCachedError",
    "PromptTooLongError",
    "QuotaExceededError",
    "UnbalancedUnlockError",
    "UnknownPinError",
]
