"""Paged attention over the KV pool in plain torch (CPU, or CUDA without FlashInfer).

The pool stores K and V slot-indexed, ``(num_slots, num_kv_heads, head_dim)``
per layer. Each forward first builds one ``AttentionPlan`` from the
ForwardBatch (engine.kernels.attention_plan: groups, index tensors, masks,
shared by all layers); then every layer calls ``PagedAttention.forward``, which
writes the new K/V at ``out_slots`` and attends each group.

One group is a few matmuls, however many sequences it holds:
  * scores: queries times the group's own keys, plus, when the group shares a
    cached prefix, queries of all its sequences times the prefix keys in ONE
    matmul (the prefix gathered once, not once per sequence);
  * one softmax over [prefix | own] keys (float32 inside), so the cascade is exact;
  * values block by block (``BLOCK`` key positions from position 0), the
    block products summed in block order into one accumulator (block_sum).
Grouped-query attention without copying K/V: the ``G`` query heads of one kv
head are extra query rows of that kv head, ``(KVH, B, G * max_q, D)``; K/V are
gathered head-major straight from the pool (a shared prefix whose slots are one
run is read as a strided view, with no copy). Sequences are attended a tile at a
time (``tile_rows`` query rows, sized by the L2 cache at construction) so that
their scores stay in cache.

Batch invariance. A query's output depends only on its own query and keys,
never on the batch around it: its scores are dot products over ``head_dim``;
padded and hidden keys get probability exactly 0; and its values are summed
over the same blocks in the same order whether it runs alone, batched,
in a piece of a long chunk or under a shared-prefix cascade (matmuls always
see at least two rows: one-row products take another kernel). So greedy
output with the radix cache on equals output with it off, bit for bit, in
bfloat16. In float32, MKL rounds products of 1-3 rows differently from larger
ones (a lone decode token is G rows; under a cascade its prefix is scored with
the group's), so there the last bit may still move. The attention is written as
explicit matmuls rather than torch's SDPA so that this block order, and hence
the invariance, is this module's to keep.

Where the native CPU kernels build with vectors (AVX2 or AVX-512) and the layer
has no sliding window, every row instead runs on the chunk kernel
(``chunk_attention.cpp``): rows a tile at a time over 256-key chunks of their
slots (a chunk's keys laid out once for the tile: the rows of one prompt, or
the decode rows of many sequences that share a cached prefix), each row with its
own float32 softmax per chunk, the chunks merged in order. A row gets the same
bits alone, in any chunk of its prompt, behind any cached prefix and at any
batch size. Elsewhere (windowed layers, head dims that are not a multiple of
16, no vectors) the rows of generated tokens run on the decode kernel
(``decode_attention.cpp``, each row alone in float32) and prompt rows on the
matmul groups above.

Generated rows' bits differ from what a prompt row would give the same token
(their linears are the native row products, engine.kernels.row_split), so with
a native kernel such K/V must never stand in for a prompt's:
``generated_kv_is_shareable`` is then False and the radix tree keeps only
prompt tokens (engine.cache_manager).
"""

from __future__ import annotations

import torch

from engine.forward_batch import ForwardBatch
from engine.kernels.attention_plan import BLOCK, AttentionGroup, AttentionPlan, plan_attention
from engine.kernels.cpu.cpu_info import l2_cache_bytes
from engine.kernels.cpu.native import native_for

__all__ = ["AttentionPlan", "PagedAttention"]


def tile_rows(l2_bytes: int | None) -> int:
    """Query rows (per kv head) attended at a time, so that their scores stay in L2: 384 per MiB of L2,
    rounded down to a multiple of 64, within 256-1536; 384 where the size is unknown."""
    if not l2_bytes:
        return 384
    return max(256, min(1536, 384 * l2_bytes // (1024 * 1024) // 64 * 64))


SCAN_MAX_ELEMENTS = 4096  # per block: up to here one cumsum beats an add per block (2-core Zen 4, see docs/)


def block_sum(parts: torch.Tensor) -> torch.Tensor:
    """(KVH, b, n, rows, D) per-block products -> their sum over the n blocks in block order, cast back to the
    products' dtype: (KVH, b, rows, D).

    The sum runs block after block into one accumulator, float32 for bfloat16/float16 products and float64
    for float32 ones (torch's CPU cumsum accumulates them so), rounded once at the end. So a row's sum does
    not depend on the rows or the trailing all-zero (padded) blocks it is batched with, and both paths give
    the same bits: with few rows per block the whole sum is ONE cumsum (a sequential scan over the dimension
    that rounds only what it stores; a decode step at batch 1 over 1,800 keys had 15 adds per layer), with
    many it is an add per block (cumsum would write every partial sum).
    """
    num_blocks = parts.shape[2]
    if num_blocks == 1:  # the sum of one block is that block (widening and rounding back changes no bit)
        return parts.select(2, 0)
    if (parts.device.type == "cpu" and parts.numel() // num_blocks <= SCAN_MAX_ELEMENTS
            and parts.dtype in (torch.bfloat16, torch.float16, torch.float32)):
        return torch.cumsum(parts, dim=2).select(2, -1)
    acc = parts[:, :, 0].to(accumulator_dtype(parts))
    for block in range(1, num_blocks):
        acc += parts[:, :, block]
    return acc.to(parts.dtype)


def accumulator_dtype(parts: torch.Tensor) -> torch.dtype:
    """float64 for float32 products on CPU (cumsum's accumulator there), float32 otherwise."""
    return torch.float64 if parts.dtype == torch.float32 and parts.device.type == "cpu" else torch.float32


class PagedAttention:
    """Attention over a slot-indexed KV pool; ``plan`` once per forward, ``forward`` per layer."""

    def __init__(self, pool, num_heads: int, num_kv_heads: int, head_dim: int, native: bool = True) -> None:
        """``native``: run rows on the native CPU kernels where they build (CPU pools of float32 or bfloat16
        only)."""
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
        self.pool = pool
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.group_size = num_heads // num_kv_heads
        self.scale = head_dim**-0.5
        self.tile_rows = tile_rows(l2_cache_bytes())  # sysfs is read on the first construction only
        k0 = pool.k_cache[0]
        self.native = native_for(k0.dtype, k0.device) if native else None
        self.by_chunks = (self.native is not None and getattr(self.native, "has_chunk_attention", False)
                          and head_dim % 16 == 0)

    @property
    def generated_kv_is_shareable(self) -> bool:
        """True when a generated token's K/V has the bits a prompt row would give it (no native kernel)."""
        return self.native is None

    def plan(self, batch: ForwardBatch, window: int | None = None, device="cpu") -> AttentionPlan:
        return plan_attention(batch, self.num_kv_heads, self.group_size, window, self.pool.k_cache[0].dtype, device,
                              by_row=self.native is not None, by_chunks=self.by_chunks)

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: AttentionPlan) -> torch.Tensor:
        """q (T, H, D), k/v (T, KVH, D) in the pool's dtype -> (T, H * D); writes k/v into the pool at out_slots."""
        k_cache, v_cache = self.pool.k_cache[layer], self.pool.v_cache[layer]
        k_cache.index_copy_(0, plan.out_slots, k)
        v_cache.index_copy_(0, plan.out_slots, v)
        if not plan.groups:  # every row on the native kernels
            parts = self._by_row_parts(q, k_cache, v_cache, plan)
            if len(parts) == 1 and parts[0][0] is None:
                return parts[0][1]
        else:
            if plan.generated is None and len(plan.groups) == 1 and plan.groups[0].out_index is None:
                return self._attend(q, k_cache, v_cache, plan.groups[0])
            parts = self._by_row_parts(q, k_cache, v_cache, plan)
            parts += [(group.out_index if group.out_index is not None else slice(None),
                       self._attend(q, k_cache, v_cache, group)) for group in plan.groups]
        out = q.new_empty(plan.num_tokens, self.num_heads * self.head_dim)
        for index, rows_out in parts:
            out[index] = rows_out
        return out

    def _by_row_parts(self, q, k_cache, v_cache, plan: AttentionPlan) -> list[tuple[torch.Tensor | None, torch.Tensor]]:
        """(token index or None for all, output rows) of the rows that the plan gives the native kernels: every
        row to the chunk kernel, or the generated rows to the decode kernel."""
        parts = []
        if plan.generated is not None:
            rows = plan.generated
            q_rows = q if rows.token_index is None else q.index_select(0, rows.token_index)
            parts.append((rows.token_index, self.native.decode_attention(q_rows, k_cache, v_cache, rows.slots,
                                                                         rows.begins, rows.ends, self.scale)))
        if plan.rows is not None:  # every row, in order
            rows = plan.rows
            parts.append((None, self.native.chunk_attention(q, k_cache, v_cache, rows.slots, rows.seq_begins,
                                                            rows.seqs, rows.ends, self.scale)))
        return parts

    @staticmethod
    def gather_rows(cache: torch.Tensor, rows: torch.Tensor, shape: tuple) -> torch.Tensor:
        """Head-major rows of a pool layer (see engine.kernels.attention_plan.head_major_rows) -> ``shape``."""
        return cache.view(-1, cache.shape[-1]).index_select(0, rows).view(shape)

    def _attend(self, q, k_cache, v_cache, group: AttentionGroup) -> torch.Tensor:
        b, max_q, kvh, g, d = group.num_seqs, group.max_q, self.num_kv_heads, self.group_size, self.head_dim
        rows = g * max_q
        q_rows = q if group.token_index is None else q.index_select(0, group.token_index)
        # (B*max_q, H, D) -> (KVH, B, G*max_q, D); the scale is folded into q (exact for a power of two)
        q_rows = q_rows.view(b, max_q, kvh, g, d).permute(2, 0, 3, 1, 4).reshape(kvh, b, rows, d) * self.scale
        own_shape = (kvh, b, group.num_own_blocks * BLOCK, d)
        own_keys = self.gather_rows(k_cache, group.own_rows, own_shape).transpose(2, 3)  # (KVH, B, D, Lo)
        own_values = self.gather_rows(v_cache, group.own_rows, own_shape).view(kvh, b, -1, BLOCK, d)
        shared = self._shared_kv(k_cache, v_cache, group) if group.num_shared_blocks else None
        step = max(1, self.tile_rows // rows)
        if shared is not None and step < b:  # several tiles read the prefix: lay it out once, not once per tile
            shared = (shared[0].contiguous(), shared[1].contiguous())
        if step >= b:  # one tile: no slicing (a batch-1 decode step runs this once per layer)
            return self._rows_out(self._attend_tile(q_rows, own_keys, own_values, group.mask, shared), group)
        tiles = []
        for lo in range(0, b, step):  # a few sequences at a time: their scores stay in cache
            hi = min(b, lo + step)
            mask = group.mask[lo:hi] if group.mask is not None else None
            tiles.append(self._attend_tile(q_rows[:, lo:hi], own_keys[:, lo:hi], own_values[:, lo:hi], mask, shared))
        return self._rows_out(torch.cat(tiles, dim=1), group)

    def _shared_kv(self, k_cache, v_cache, group: AttentionGroup) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys (KVH, D, Ls) and values (KVH, S, BLOCK, D) of the shared blocks: a strided view of the pool
        when their slots are one run (no copy; the matmuls give the same bits), else gathered."""
        kvh, d, length = self.num_kv_heads, self.head_dim, group.num_shared_blocks * BLOCK
        if group.shared_start is not None:
            run = slice(group.shared_start, group.shared_start + length)
            return k_cache[run].permute(1, 2, 0), v_cache[run].permute(1, 0, 2).view(kvh, -1, BLOCK, d)
        shape = (kvh, length, d)
        keys = self.gather_rows(k_cache, group.shared_rows, shape).transpose(1, 2)
        return keys, self.gather_rows(v_cache, group.shared_rows, shape).view(kvh, -1, BLOCK, d)

    @staticmethod
    def _attend_tile(q_rows, own_keys, own_values, mask, shared) -> torch.Tensor:
        """One softmax over [shared | own] keys, then values block by block, summed in block order.

        q_rows (KVH, b, rows, D); own keys (KVH, b, D, Lo) and values (KVH, b, n_own, BLOCK, D); mask
        (b, rows, Lo) or None; shared = (keys (KVH, D, Ls), values (KVH, S, BLOCK, D)) or None.
        Returns (KVH, b, rows, D) in the dtype of the values.
        """
        kvh, b, rows, d = q_rows.shape
        scores = torch.matmul(q_rows, own_keys)  # (KVH, b, rows, Lo)
        if mask is not None:
            scores.add_(mask)
        num_shared = 0
        if shared is not None:  # every sequence of the tile against the shared prefix: one matmul
            num_shared = shared[1].shape[1]
            prefix_scores = torch.matmul(q_rows.reshape(kvh, b * rows, d), shared[0]).view(kvh, b, rows, -1)
            scores = torch.cat([prefix_scores, scores], dim=-1)
        probs = scores.softmax(dim=-1)  # (KVH, b, rows, L): float32 inside, exact zeros where hidden
        own = probs[..., num_shared * BLOCK :].reshape(kvh, b, rows, -1, BLOCK).transpose(2, 3)
        parts = torch.matmul(own, own_values)  # (KVH, b, n_own, rows, D): one product per block
        if num_shared:  # block s of the prefix probabilities is a strided view of probs: no copy
            width = probs.shape[-1]
            prefix_parts = probs.new_empty(kvh, num_shared, b * rows, d)
            for head in range(kvh):
                torch.bmm(probs[head].as_strided((num_shared, b * rows, BLOCK), (BLOCK, width, 1)), shared[1][head],
                          out=prefix_parts[head])
            parts = torch.cat([prefix_parts.view(kvh, num_shared, b, rows, d).transpose(1, 2), parts], dim=2)
        return block_sum(parts)

    def _rows_out(self, out: torch.Tensor, group: AttentionGroup) -> torch.Tensor:
        """(KVH, B, G*max_q, D) -> the group's real token rows, (num_group_tokens, H*D)."""
        b, max_q, kvh, g, d = group.num_seqs, group.max_q, self.num_kv_heads, self.group_size, self.head_dim
        out = out.view(kvh, b, g, max_q, d).permute(1, 3, 0, 2, 4).reshape(b * max_q, kvh * g * d)
        return out if group.row_index is None else out.index_select(0, group.row_index)
