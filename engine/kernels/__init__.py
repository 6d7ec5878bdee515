"""Compute kernels behind one seam: the model and the runner import only from here.

    make_linear(weight, bias, quantization)   a Linear: x -> x @ weight.T + bias, one row's bits independent
                                              of its batch; weight-only int8/int4 (and w4a8/w8a8) when asked
    keep_gguf_blocks(path)      a context in which quantized linears keep that GGUF file's own blocks
                                (engine.kernels.cpu.gguf_linear) where it holds their weights exactly
    choose_dtype(device, prefer)              the dtype "auto" stands for on that device
    choose_quantization(dtype, device, prefer)  the weight quantization "auto" stands for there
    make_attention(pool, ...)   an Attention over the paged KV pool
    make_norm(eps, native)      RMSNorm, alone and after a residual add (engine.kernels.norm)
    native_ops(dtype, device, enabled)  radixgate's native CPU kernels for that dtype there (the rotary embedding
                                among them), or None: the model then runs its torch ops
    native_kernels(), is_native_built()   the native build itself (compiled on first use) and whether it is cached

Which kernel runs is decided here, once, at construction: oneDNN-packed linears on a CPU where
oneDNN supports the dtype (engine.kernels.cpu), plain ``F.linear`` elsewhere (engine.kernels.linear);
FlashInfer attention on CUDA when ``flashinfer`` imports (engine.kernels.cuda), the torch paged
attention otherwise, on CPU and CUDA alike (engine.kernels.paged_attention). Weight-only int8/int4
linears run torch's CPU kernels (engine.kernels.cpu.quantized_linear). Nothing is read or timed
at import: the CPU facts and probes run on first use and are cached for the process.

``prefer``: "speed" (the default) lets "auto" take whatever the probes time faster here; "accuracy" makes
"auto" mean the float32 model (float32, no quantization) wherever float32 runs, at whatever speed.
"""

from __future__ import annotations

from typing import Protocol

import torch

from engine.forward_batch import ForwardBatch
from engine.kernels.cpu.dtype_probe import choose_cpu_dtype
from engine.kernels.cpu.gguf_linear import gguf_block_linear, keep_gguf_blocks
from engine.kernels.cpu.native import is_built as is_native_built
from engine.kernels.cpu.native import native_for as native_ops
from engine.kernels.cpu.native import native_kernels
from engine.kernels.cpu.packed_linear import dense_linear
from engine.kernels.cpu.quant_probe import measured_cpu_quantization
from engine.kernels.cpu.quantized_linear import GROUP_SIZE, Int4WeightLinear, Int8WeightLinear, int4_applies
from engine.kernels.norm import RMSNorm, make_norm
from engine.kernels.paged_attention import PagedAttention

__all__ = ["PREFERENCES", "QUANTIZATIONS", "Attention", "Linear", "choose_dtype", "choose_quantization",
           "is_native_built", "keep_gguf_blocks", "make_attention", "make_linear", "make_norm", "native_kernels", "native_ops",
           "RMSNorm"]

PREFERENCES = ("speed", "accuracy")
QUANTIZATIONS = ("none", "int8", "int4", "w4a8", "w8a8")  # and "auto": choose_quantization


class Linear(Protocol):
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(rows, in_features) -> (rows, out_features); each row's result is the same in any batch."""


class Attention(Protocol):
    """``plan`` once per forward (per attention window), ``forward`` once per layer with that plan.
    ``generated_kv_is_shareable``: False when generated tokens' K/V carries other bits than the same tokens
    would get as prompt rows (the radix tree must not hand it to a prompt)."""

    generated_kv_is_shareable: bool

    def plan(self, batch: ForwardBatch, window: int | None, device: torch.device) -> object: ...

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan) -> torch.Tensor:
        """q (T, H, D), k/v (T, KVH, D) -> (T, H * D); writes k/v into the pool at the plan's out_slots first."""


def make_linear(weight: torch.Tensor, bias: torch.Tensor | None = None, quantization: str = "none",
                native: bool = True) -> Linear:
    """A linear layer over ``weight`` (out_features, in_features) in its own dtype and device: packed for
    oneDNN on a CPU that supports the dtype there, ``F.linear`` otherwise; with ``quantization`` "int8" or
    "int4" (CPU only), the weight is stored quantized and activations stay in the weight's dtype; "w4a8" and
    "w8a8" are int4 and int8 whose generated rows are also quantized, to int8 per 32 inputs
    (engine.kernels.cpu.quantized_linear).
    A weight whose in_features the groups of 32 do not divide stays dense; an int4 weight whose outputs are
    not a multiple of 16 (torch's int4 packing) falls back to int8. ``native`` False keeps generated rows
    off radixgate's native CPU kernels (EngineConfig.native_kernels). Inside keep_gguf_blocks, a quantized
    weight that the open GGUF file holds exactly keeps the file's own blocks instead (any quantized mode)."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {QUANTIZATIONS}, got {quantization!r}")
    if quantization != "none" and weight.device.type != "cpu":
        raise ValueError(f"weight-only {quantization} runs on CPU only, not on {weight.device.type}")
    kept = gguf_block_linear(weight, bias, quantization, native)
    if kept is not None:
        return kept
    if quantization in ("int4", "w4a8") and int4_applies(weight):
        return Int4WeightLinear(weight, bias, int8_activations=quantization == "w4a8", native=native)
    if quantization != "none" and weight.shape[1] % GROUP_SIZE == 0:
        return Int8WeightLinear(weight, bias, int8_activations=quantization in ("w4a8", "w8a8"), native=native)
    return dense_linear(weight, bias, by_row=native)


def choose_dtype(device: torch.device, prefer: str = "speed") -> torch.dtype:
    """bfloat16 on CUDA; on a CPU, float32 unless the CPU has native bfloat16 and the probe
    (engine.kernels.cpu.dtype_probe) times bfloat16 linears clearly faster there. float32 on a CPU
    when ``prefer`` is "accuracy"."""
    _check_preference(prefer)
    if device.type != "cpu":
        return torch.bfloat16
    return torch.float32 if prefer == "accuracy" else choose_cpu_dtype()


def choose_quantization(dtype: torch.dtype, device: torch.device, prefer: str = "speed", native: bool = True) -> str:
    """"none" on CUDA or when ``prefer`` is "accuracy"; on a CPU, int8 or int4 where the probe
    (engine.kernels.cpu.quant_probe) times that mode's decode-sized linears clearly faster in ``dtype``,
    built as ``make_linear(..., native=native)`` would build them."""
    _check_preference(prefer)
    if device.type != "cpu" or prefer == "accuracy":
        return "none"
    return measured_cpu_quantization(dtype, torch.get_num_threads(), native)


def _check_preference(prefer: str) -> None:
    if prefer not in PREFERENCES:
        raise ValueError(f"prefer must be one of {PREFERENCES}, got {prefer!r}")


def make_attention(pool, num_heads: int, num_kv_heads: int, head_dim: int, device: torch.device,
                   native: bool = True) -> Attention:
    """FlashInfer on CUDA when ``flashinfer`` imports; the torch paged attention (explicit matmuls over the
    pool, no SDPA) otherwise, its rows on the native CPU kernels where they build and ``native`` is True.
    Both write K/V at the batch's out_slots and read the pool slot-indexed."""
    if device.type == "cuda":
        try:
            from engine.kernels.cuda.flashinfer_attention import FlashInferAttention

            return FlashInferAttention(pool, num_heads, num_kv_heads, head_dim, device)
        except ImportError:
            pass
    return PagedAttention(pool, num_heads, num_kv_heads, head_dim, native=native)
