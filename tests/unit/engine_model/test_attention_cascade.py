"""The shared-prefix ("cascade") path of batched attention equals plain per-sequence attention."""

from types import SimpleNamespace

import pytest
import torch

from engine.attention import PagedAttention
from engine.forward_batch import make_forward_batch

KVH, G, D, NUM_SLOTS = 3, 3, 16, 1024


def make_pool(dtype):
    gen = torch.Generator().manual_seed(0)
    k = torch.randn(NUM_SLOTS, KVH, D, generator=gen).to(dtype)
    v = torch.randn(NUM_SLOTS, KVH, D, generator=gen).to(dtype)
    return SimpleNamespace(k_cache=[k], v_cache=[v])


def reference(pool, q, seq_kv_slots, q_lens):
    """Per-sequence causal softmax attention in float64 over already-written K/V."""
    rows, start = [], 0
    for slots, q_len in zip(seq_kv_slots, q_lens):
        keys = pool.k_cache[0][slots].double().repeat_interleave(G, dim=1)  # (kv, H, D)
        values = pool.v_cache[0][slots].double().repeat_interleave(G, dim=1)
        qs = q[start : start + q_len].double()  # (q_len, H, D)
        scores = torch.einsum("qhd,khd->hqk", qs, keys) * D**-0.5
        kv_len = len(slots)
        q_pos = torch.arange(kv_len - q_len, kv_len)[:, None]
        scores = scores.masked_fill(torch.arange(kv_len)[None, :] > q_pos, float("-inf"))
        rows.append(torch.einsum("hqk,khd->qhd", scores.softmax(-1), values).reshape(q_len, -1))
        start += q_len
    return torch.cat(rows)


@pytest.mark.parametrize("q_lens", [[1, 1, 1, 1], [1, 3, 2, 1]])
def test_shared_prefix_is_attended_once_and_exactly(q_lens):
    pool = make_pool(torch.float32)
    shared = list(range(100, 300))  # 200 slots every sequence starts with
    own = [list(range(400 + 50 * i, 400 + 50 * i + 7 + 5 * i)) for i in range(len(q_lens))]
    seq_kv_slots = [shared + tail for tail in own]
    batch = make_forward_batch([[0] * n for n in q_lens], seq_kv_slots)
    attention = PagedAttention(pool, KVH * G, KVH, D)
    plan = attention.plan(batch)
    assert plan.batched.prefix_slots is not None and plan.batched.prefix_slots.numel() == 200
    q = torch.randn(sum(q_lens), KVH * G, D, generator=torch.Generator().manual_seed(1))
    k_new = pool.k_cache[0][batch.out_slots].clone()  # re-write what is there: attention reads the pool
    v_new = pool.v_cache[0][batch.out_slots].clone()
    out = attention.forward(0, q, k_new, v_new, plan)
    expected = reference(pool, q, [torch.tensor(s) for s in seq_kv_slots], q_lens)
    assert torch.allclose(out.double(), expected, atol=1e-5)


def test_sequences_without_a_common_prefix_take_the_plain_path():
    pool = make_pool(torch.float32)
    seq_kv_slots = [list(range(0, 120)), list(range(200, 320))]
    plan = PagedAttention(pool, KVH * G, KVH, D).plan(make_forward_batch([[0], [0]], seq_kv_slots))
    assert plan.batched.prefix_slots is None
