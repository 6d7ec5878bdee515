"""radixgate's embedded engine: a paged KV pool, a radix prefix cache, a
continuous-batching scheduler and a Llama-family model runner.

    from engine import Engine, EngineConfig, SamplingParams
    with Engine(EngineConfig()) as engine:
        result = engine.generate_sync(token_ids, SamplingParams(max_tokens=32))
"""

from engine.config import EngineConfig
from engine.engine import Engine
from engine.errors import (
    EngineError,
    EngineOverloadedError,
    OutOfPagesError,
    PrefixNotCachedError,
    PromptTooLongError,
    QuotaExceededError,
    UnbalancedUnlockError,
    UnknownPinError,
)
from engine.kv_pool import KVPool
from engine.radix_cache import RadixCache
from engine.sampling_params import RequestOutput, SamplingParams, Usage

__all__ = [
    "Engine",
    "EngineConfig",
    "SamplingParams",
    "Usage",
    "RequestOutput",
    "KVPool",
    "RadixCache",
    "EngineError",
    "EngineOverloadedError",
    "OutOfPagesError",
    "PrefixNotCachedError",
    "PromptTooLongError",
    "QuotaExceededError",
    "UnbalancedUnlockError",
    "UnknownPinError",
]
