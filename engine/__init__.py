"""radixgate's embedded engine: a paged KV pool, a radix prefix cache, a
continuous-batching scheduler and a Llama-family model runner.

    from engine import Engine, EngineConfig, SamplingParams
    with Engine(EngineConfig()) as engine:
        result = engine.generate_sync(token_ids, SamplingParams(max_tokens=32))
        json_out = engine.generate_sync(token_ids, SamplingParams(max_tokens=64, grammar=Grammar.json_object()))
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
from engine.forward_batch import ForwardBatch, make_forward_batch
from engine.grammar import Grammar, GrammarCompiler, GrammarError, ToolSpec
from engine.grammar.state import GrammarState
from engine.kernels import is_native_built, native_kernels
from engine.kv_pool import KVPool
from engine.models.llama import ModelShape
from engine.models.loader import ALIASES as MODEL_ALIASES
from engine.models.loader import LoadedModel, is_model_cached, load_model, locate_alias, resolve_model_dir
from engine.radix_cache import RadixCache
from engine.runner import ModelRunner, resolve_device, resolve_dtype
from engine.sampler import Sampler
from engine.sampling_params import RequestOutput, SamplingParams, Usage
from engine.speculation import matching_prefix

__all__ = [
    "Engine",
    "EngineConfig",
    "SamplingParams",
    "Grammar",
    "ToolSpec",
    "GrammarError",
    "Usage",
    "RequestOutput",
    "KVPool",
    "RadixCache",
    # for benches and tools that drive the model runner directly
    "load_model",
    "locate_alias",
    "resolve_model_dir",  # a model spec's local HF directory (an edge gateway reads its tokenizer there)
    # what the first load builds and caches on disk (`radixgate warmup` builds both ahead of time)
    "is_model_cached",
    "native_kernels",
    "is_native_built",
    "MODEL_ALIASES",
    "LoadedModel",
    "ModelShape",
    "ModelRunner",
    "ForwardBatch",
    "GrammarCompiler",
    "GrammarState",
    "Sampler",
    "make_forward_batch",
    "matching_prefix",  # shared token prefix (the verify step's acceptance; the accuracy bench's agreement)
    "resolve_device",
    "resolve_dtype",
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
