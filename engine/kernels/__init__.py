"""Compute kernels behind one seam: the model and the runner import only from here.

    make_linear(weight, bias)   a Linear: x -> x @ weight.T + bias, one row's bits independent of its batch
    choose_dtype(device)        the dtype "auto" stands for on that device
    make_attention(pool, ...)   an Attention over the paged KV pool

Which kernel runs is decided here, once, at construction: oneDNN-packed linears on a CPU where
oneDNN supports the dtype (engine.kernels.cpu), plain ``F.linear`` elsewhere (engine.kernels.linear);
FlashInfer attention on CUDA when ``flashinfer`` imports (engine.kernels.cuda), the torch paged
attention otherwise, on CPU and CUDA alike (engine.kernels.paged_attention). Nothing is read or timed
at import: the CPU facts and probes run on first use and are cached for the process.
"""

from __future__ import annotations

from typing import Protocol

import torch

from engine.forward_batch import ForwardBatch
from engine.kernels.cpu.dtype_probe import choose_cpu_dtype
from engine.kernels.cpu.packed_linear import PackedLinear, packing_applies
from engine.kernels.linear import TorchLinear
from engine.kernels.paged_attention import PagedAttention

__all__ = ["Attention", "Linear", "choose_dtype", "make_attention", "make_linear"]


class Linear(Protocol):
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(rows, in_features) -> (rows, out_features); each row's result is the same in any batch."""


class Attention(Protocol):
    """``plan`` once per forward (per attention window), ``forward`` once per layer with that plan."""

    def plan(self, batch: ForwardBatch, window: int | None, device: torch.device) -> object: ...

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan) -> torch.Tensor:
        """q (T, H, D), k/v (T, KVH, D) -> (T, H * D); writes k/v into the pool at the plan's out_slots first."""


def make_linear(weight: torch.Tensor, bias: torch.Tensor | None = None) -> Linear:
    """A linear layer over ``weight`` (out_features, in_features) in its own dtype and device: packed for
    oneDNN on a CPU that supports the dtype there, ``F.linear`` otherwise."""
    if packing_applies(weight.dtype, weight.device):
        return PackedLinear(weight, bias)
    return TorchLinear(weight, bias)


def choose_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on CUDA; on a CPU, float32 unless the CPU has native bfloat16 and the probe
    (engine.kernels.cpu.dtype_probe) times bfloat16 linears clearly faster there."""
    if device.type != "cpu":
        return torch.bfloat16
    return choose_cpu_dtype()


def make_attention(pool, num_heads: int, num_kv_heads: int, head_dim: int, device: torch.device) -> Attention:
    """FlashInfer on CUDA when ``flashinfer`` imports; the torch paged attention (explicit matmuls over the
    pool, no SDPA) otherwise. Both write K/V at the batch's out_slots and read the pool slot-indexed."""
    if device.type == "cuda":
        try:
            from engine.kernels.cuda.flashinfer_attention import FlashInferAttention

            return FlashInferAttention(pool, num_heads, num_kv_heads, head_dim, device)
        except ImportError:
            pass
    return PagedAttention(pool, num_heads, num_kv_heads, head_dim)
