"""ModelRunner: one forward of a ragged ForwardBatch over the paged KV pool -> last-token logits.

The runner owns the model weights (laid out once, in ``dtype`` on ``device``)
and an attention backend bound to the pool (both chosen by engine.kernels). It
never allocates pool pages:
the caller (the scheduler) decides the slots and passes them in the batch::

    runner = ModelRunner.from_spec("smollm2-135m", dtype="float32", num_pages=1024, page_size=16)
    pages = runner.pool.allocate(2)                       # 32 slots
    slots = runner.pool.slots(pages)[: len(prompt)]       # or p * page_size + j by hand
    logits = runner.forward(make_forward_batch([prompt], [slots]))   # (1, vocab) float32
    # next step: the new token's slot is appended to the sequence's slots
    logits = runner.forward(make_forward_batch([[next_id]], [all_slots_including_the_new_one]))

dtype: None/"auto" is engine.kernels.choose_dtype(device): bfloat16 on CUDA; on
a CPU, bfloat16 only where the CPU has it natively and its linears time clearly
faster than float32's there. Correctness tests and output-equality checks
against transformers pass ``dtype="float32"``.

quantization: "none" (the default), "int8", "int4" (weight-only, CPU; see
engine.kernels.cpu.quantized_linear; a model loaded from a GGUF file keeps the file's own quantized
blocks, engine.kernels.cpu.gguf_linear), "w4a8"/"w8a8" (int4/int8 weights, generated rows'
activations int8), or "auto": engine.kernels.choose_quantization (weight-only modes only),
the mode whose decode-sized linears time clearly faster on this CPU, else "none".
prefer: "speed" (default) or "accuracy"; with "accuracy", "auto" means float32 and
no quantization. Whenever "auto" lands anywhere but the float32 model, the runner
logs how far its logits are from the float32 model's on a probe text
(engine.models.divergence), beside the speed the kernel probes logged.
"""

from __future__ import annotations

import logging
import os

import torch

from engine.kernels.row_split import RowSplit
from engine.forward_batch import ForwardBatch
from engine.kernels import QUANTIZATIONS, choose_dtype, choose_quantization, keep_gguf_blocks, make_attention
from engine.models.llama import LlamaModel, ModelShape

logger = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = {"llama", "mistral", "qwen2", "smollm", "smollm2"}


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device, prefer: str = "speed") -> torch.dtype:
    """A torch dtype, or its name ("float32"/"fp32", "bfloat16"/"bf16", "float16"/"fp16"); None/"auto" ->
    engine.kernels.choose_dtype(device, prefer). Raises ValueError for any other name."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == "auto":
        return choose_dtype(device, prefer)
    names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if dtype not in names:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(names)}")
    return names[dtype]


def resolve_quantization(quantization: str | None, dtype: torch.dtype, device: torch.device,
                         prefer: str = "speed", native: bool = True) -> str:
    """"none", "int8", "int4", "w4a8" or "w8a8"; None means "none", "auto" -> engine.kernels.choose_quantization.
    Raises ValueError for any other name."""
    if quantization is None:
        return "none"
    if quantization == "auto":
        return choose_quantization(dtype, device, prefer, native)
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; choose one of {[*QUANTIZATIONS, 'auto']}")
    return quantization


class ModelRunner:
    """``forward(batch)`` writes the new tokens' K/V into ``pool`` and returns float32 logits."""

    def __init__(self, loaded_model, pool, dtype: str | torch.dtype | None = None, device=None,
                 quantization: str | None = None, prefer: str = "speed", native: bool = True) -> None:
        """``native`` False keeps every kernel on torch's ops (EngineConfig.native_kernels)."""
        config = loaded_model.config
        if config.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"model_type {config.model_type!r} is not a Llama-family model")
        self.loaded_model = loaded_model
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device, prefer)
        self.quantization = resolve_quantization(quantization, self.dtype, self.device, prefer, native)
        self.native = native
        self.pool = pool
        # a quantized model read from a GGUF file keeps the file's own blocks (engine.kernels.cpu.gguf_linear)
        gguf_path = getattr(loaded_model, "gguf_path", None) if self.quantization != "none" else None
        with keep_gguf_blocks(gguf_path):
            self.model = LlamaModel(config, loaded_model.state_dict, self.dtype, self.device, self.quantization,
                                    native)
        self.shape = self.model.shape
        self.attention = make_attention(pool, self.shape.num_heads, self.shape.num_kv_heads, self.shape.head_dim,
                                        self.device, native)
        self._check_pool(pool)
        is_auto = dtype in (None, "auto") or quantization == "auto"
        if is_auto and (self.dtype != torch.float32 or self.quantization != "none"):
            self._log_divergence()

    def _log_divergence(self) -> None:
        """Log the divergence of this runner's logits from a float32 runner's (built for the probe, then
        dropped) on engine.models.divergence's probe text."""
        from engine.kv_pool import KVPool
        from engine.models.divergence import divergence, probe_token_ids

        token_ids = probe_token_ids(self.tokenizer)
        s = self.shape
        pool = KVPool(-(-len(token_ids) // self.pool.page_size), self.pool.page_size, num_layers=s.num_layers,
                      num_kv_heads=s.num_kv_heads, head_dim=s.head_dim, dtype=torch.float32, device=self.device)
        reference = ModelRunner(self.loaded_model, pool, torch.float32, self.device, native=self.native)
        found = divergence(reference, self, token_ids)
        logger.info("auto precision %s/%s: logits %.4f nats (mean KL) from the float32 model's on a probe text, "
                    "same top token at %.0f%% of positions (prefer='accuracy' runs the float32 model)",
                    str(self.dtype).removeprefix("torch."), self.quantization, found.mean_kl,
                    100 * found.top1_agreement)

    def _check_pool(self, pool) -> None:
        k0 = pool.k_cache[0] if len(pool.k_cache) else None
        if len(pool.k_cache) != self.shape.num_layers or k0 is None:
            raise ValueError(f"pool has {len(pool.k_cache)} layers, model has {self.shape.num_layers}")
        if tuple(k0.shape[1:]) != (self.shape.num_kv_heads, self.shape.head_dim):
            raise ValueError(f"pool kv shape {tuple(k0.shape[1:])} != ({self.shape.num_kv_heads}, {self.shape.head_dim})")
        if k0.dtype != self.dtype or k0.device.type != self.device.type:
            raise ValueError(f"pool holds {k0.dtype} on {k0.device}, the model runs {self.dtype} on {self.device}")

    @property
    def generated_kv_is_shareable(self) -> bool:
        return self.attention.generated_kv_is_shareable

    @property
    def tokenizer(self):
        return self.loaded_model.tokenizer

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch) -> torch.Tensor:
        """float32 logits (len(batch.last_token_indices()), vocab): each selected sequence's last new token (its last
        ``num_logit_tokens`` tokens where the batch gives them)."""
        device = self.device
        plans_by_window = {w: self.attention.plan(batch, w, device) for w in set(self.model.windows)}
        plans = [plans_by_window[w] for w in self.model.windows]
        logit_tokens = batch.last_token_indices()
        logit_index = torch.tensor(logit_tokens, dtype=torch.long, device=device)
        rows = logit_rows = None
        if batch.seq_is_generated is not None and any(batch.seq_is_generated):
            is_generated = [flag for q_len, flag in zip(batch.seq_q_lens, batch.seq_is_generated) for _ in range(q_len)]
            rows = RowSplit.of(is_generated, device)
            logit_rows = RowSplit.of([is_generated[t] for t in logit_tokens], device)
        return self.model.forward(batch.input_ids.to(device), batch.positions.to(device), self.attention, plans,
                                  logit_index, rows, logit_rows)

    @classmethod
    def from_spec(
        cls,
        model_spec: str = "smollm2-135m",
        dtype: str | torch.dtype | None = None,
        device=None,
        num_pages: int = 4096,
        page_size: int = 16,
        cache_dir: str | os.PathLike | None = None,
        quantization: str | None = None,
        prefer: str = "speed",
        native: bool = True,
    ) -> "ModelRunner":
        """Load ``model_spec`` (see engine.models.loader) and build a runner with a fresh KVPool (``.pool``);
        ``cache_dir`` is the GGUF cache root (engine.models.gguf_cache.model_cache_root)."""
        from engine.kv_pool import KVPool
        from engine.models.loader import load_model

        loaded = load_model(model_spec, cache_dir=cache_dir)
        device = resolve_device(device)
        pool_dtype = resolve_dtype(dtype, device, prefer)
        shape = ModelShape.from_config(loaded.config)
        pool = KVPool(num_pages, page_size, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads,
                      head_dim=shape.head_dim, dtype=pool_dtype, device=device)
        return cls(loaded, pool, dtype if dtype in (None, "auto") else pool_dtype, device, quantization, prefer, native)
