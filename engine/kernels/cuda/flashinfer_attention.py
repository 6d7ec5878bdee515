"""Paged attention with FlashInfer on CUDA (imported only when ``flashinfer`` is installed).

Same contract as engine.kernels.paged_attention.PagedAttention (``plan`` once per forward,
``forward`` per layer). The slot-indexed pool is viewed as pages of ONE token,
``(num_slots, 1, num_kv_heads, head_dim)`` in FlashInfer's NHD layout, so a
sequence's page table is simply its slot list: correct for any slot layout the
scheduler hands out. FlashInfer's causal mask is bottom-right aligned, which is
exactly "query i of a q_len chunk sits at position kv_len - q_len + i".
"""

from __future__ import annotations

from dataclasses import dataclass

import flashinfer  # an ImportError here makes engine.kernels.make_attention fall back to PagedAttention
import torch

from engine.forward_batch import ForwardBatch

WORKSPACE_BYTES = 128 * 1024 * 1024


@dataclass
class FlashInferPlan:
    out_slots: torch.Tensor  # (T,) long
    wrapper: object  # a planned flashinfer.BatchPrefillWithPagedKVCacheWrapper


class FlashInferAttention:
    """FlashInfer batch-prefill attention over the pool (decode tokens are prefill chunks of length 1)."""

    def __init__(self, pool, num_heads: int, num_kv_heads: int, head_dim: int, device) -> None:
        self.pool = pool
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.device = torch.device(device)
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device)
        self.wrappers: dict[int | None, object] = {}

    generated_kv_is_shareable = True  # every row, prompt or generated, runs the same kernel

    def _wrapper(self, window: int | None):
        if window not in self.wrappers:
            self.wrappers[window] = flashinfer.BatchPrefillWithPagedKVCacheWrapper(self.workspace, kv_layout="NHD")
        return self.wrappers[window]

    def plan(self, batch: ForwardBatch, window: int | None = None, device=None) -> FlashInferPlan:
        q_lens = torch.tensor([0, *batch.seq_q_lens], dtype=torch.int32)
        kv_lens = torch.tensor([0, *batch.seq_kv_lens], dtype=torch.int32)
        qo_indptr = torch.cumsum(q_lens, 0, dtype=torch.int32).to(self.device)
        kv_indptr = torch.cumsum(kv_lens, 0, dtype=torch.int32).to(self.device)
        kv_indices = torch.cat([s.to(self.device) for s in batch.seq_kv_slots]).to(torch.int32)
        last_page_len = torch.ones(batch.num_seqs, dtype=torch.int32, device=self.device)
        dtype = self.pool.k_cache[0].dtype
        wrapper = self._wrapper(window)
        wrapper.plan(
            qo_indptr, kv_indptr, kv_indices, last_page_len, self.num_heads, self.num_kv_heads, self.head_dim, 1,
            causal=True, window_left=-1 if window is None else window - 1, q_data_type=dtype, kv_data_type=dtype,
        )
        return FlashInferPlan(batch.out_slots.to(self.device), wrapper)

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: FlashInferPlan) -> torch.Tensor:
        """q (T, H, D), k/v (T, KVH, D) -> (T, H * D); writes k/v into the pool at out_slots first."""
        k_cache, v_cache = self.pool.k_cache[layer], self.pool.v_cache[layer]
        k_cache.index_copy_(0, plan.out_slots, k)
        v_cache.index_copy_(0, plan.out_slots, v)
        paged = (k_cache.view(-1, 1, self.num_kv_heads, self.head_dim), v_cache.view(-1, 1, self.num_kv_heads, self.head_dim))
        out = plan.wrapper.run(q.contiguous(), paged)  # (T, H, D)
        return out.reshape(q.shape[0], self.num_heads * self.head_dim)
