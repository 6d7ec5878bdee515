"""Paged attention's matmul groups (the path without native kernels, and of windowed layers): the
shared-prefix ("cascade") path is exact, and every query's output is bit-for-bit the same whatever batch,
bucket, piece or cascade it is attended in. (The native chunk kernel: test_chunk_attention.py.)"""

from types import SimpleNamespace

import pytest
import torch

from engine.forward_batch import make_forward_batch
from engine.kernels.attention_plan import BLOCK, MAX_PIECE, length_bucket
from engine.kernels.paged_attention import SCAN_MAX_ELEMENTS, PagedAttention, block_sum, tile_rows

KVH, G, D, NUM_SLOTS = 3, 3, 16, 4096


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


def attend(pool, q, seq_kv_slots, q_lens):
    """Run the attention of one layer over the pool as it is (the new K/V are re-written unchanged)."""
    batch = make_forward_batch([[0] * n for n in q_lens], seq_kv_slots)
    attention = PagedAttention(pool, KVH * G, KVH, D, native=False)  # the matmul groups (no native kernels)
    plan = attention.plan(batch)
    k_new = pool.k_cache[0][batch.out_slots].clone()
    v_new = pool.v_cache[0][batch.out_slots].clone()
    return attention.forward(0, q.to(pool.k_cache[0].dtype), k_new, v_new, plan), plan


@pytest.mark.parametrize("q_lens", [[1, 1, 1, 1], [1, 3, 2, 1], [40, 40, 33]])
def test_shared_prefix_is_attended_once_and_exactly(q_lens):
    pool = make_pool(torch.float32)
    shared = list(range(100, 400))  # 300 slots every sequence starts with: two whole blocks shared
    own = [list(range(500 + 100 * i, 500 + 100 * i + max(q, 7 + 5 * i))) for i, q in enumerate(q_lens)]
    seq_kv_slots = [shared + tail for tail in own]
    q = torch.randn(sum(q_lens), KVH * G, D, generator=torch.Generator().manual_seed(1))
    out, plan = attend(pool, q, seq_kv_slots, q_lens)
    (group,) = plan.groups if len(set(n.bit_length() for n in q_lens)) == 1 else plan.groups[:1]
    assert group.num_shared_blocks == 2  # 2 * BLOCK of the 300 shared slots
    assert group.shared_start == 100 and group.shared_rows is None  # one run of slots: read as a view
    expected = reference(pool, q, [torch.tensor(s) for s in seq_kv_slots], q_lens)
    assert torch.allclose(out.double(), expected, atol=1e-5)


def test_sequences_without_a_common_prefix_take_the_plain_path():
    pool = make_pool(torch.float32)
    seq_kv_slots = [list(range(0, 300)), list(range(400, 700))]
    _, plan = attend(pool, torch.randn(2, KVH * G, D), seq_kv_slots, [1, 1])
    assert [(g.shared_rows, g.num_shared_blocks) for g in plan.groups] == [(None, 0)]


def test_long_chunks_are_cut_into_pieces_that_match_the_reference():
    pool = make_pool(torch.float32)
    q_lens = [2 * MAX_PIECE + 37, 1]
    seq_kv_slots = [list(range(0, 100 + q_lens[0])), list(range(1000, 1050))]
    q = torch.randn(sum(q_lens), KVH * G, D, generator=torch.Generator().manual_seed(2))
    out, plan = attend(pool, q, seq_kv_slots, q_lens)
    assert len(plan.groups) == 1 + 3  # the decode token's bucket, then three pieces of the long chunk
    expected = reference(pool, q, [torch.tensor(s) for s in seq_kv_slots], q_lens)
    assert torch.allclose(out.double(), expected, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_each_query_gets_the_same_bits_in_any_batch(dtype):
    """Alone, batched with strangers, under a cascade, or as part of a long chunk: identical output.

    Bit for bit in bfloat16 (the engine's default): its matmul kernels round every row the same
    way at any batch size. float32 matmuls pick kernels by shape, so there only the last bit may move.
    """
    same = torch.equal if dtype == torch.bfloat16 else lambda a, b: torch.allclose(a, b, rtol=0, atol=1e-6)
    pool = make_pool(dtype)
    shared = list(range(0, 3 * BLOCK + 50))  # a cached document every sequence below starts with
    gen = torch.Generator().manual_seed(3)
    sequences = [  # (kv slots, new tokens)
        (shared + list(range(1000, 1046)), 46),  # a question's prefill
        (shared + list(range(1100, 1170)), 1),  # decoding after its question
        (shared + list(range(1200, 1263)), 1),
        (list(range(2000, 2300)), 1),  # a stranger with no shared prefix
        (shared + list(range(1300, 1300 + MAX_PIECE + 80)), MAX_PIECE + 80),  # a long chunk, cut in pieces
        (shared + list(range(1700, 1703)), 3),
    ]
    queries = [torch.randn(q_len, KVH * G, D, generator=gen) for _, q_len in sequences]
    alone = [attend(pool, q, [slots], [q_len])[0] for q, (slots, q_len) in zip(queries, sequences)]
    for order in ([0, 1, 2, 3, 4, 5], [5, 2, 1], [1, 2], [4, 0], [3, 1, 2, 0]):
        together, _ = attend(pool, torch.cat([queries[i] for i in order]), [sequences[i][0] for i in order],
                             [sequences[i][1] for i in order])
        expected = torch.cat([alone[i] for i in order])
        assert same(together, expected), f"batch {order} changed some query's output"
    # the long chunk's last 80 queries alone (its first MAX_PIECE+... tokens already cached) give the same bits
    slots, q_len = sequences[4]
    tail, _ = attend(pool, queries[4][-80:], [slots], [80])
    assert same(tail, alone[4][-80:])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_block_sum_has_the_bits_of_adding_block_after_block(dtype):
    """Both paths (one scan for few rows, an add per block for many) are the running sum, in float32 for
    bfloat16 products and in float64 for float32 ones."""
    gen = torch.Generator().manual_seed(5)
    for num_blocks in (1, 2, 3, 15, 16, 17, 40):
        for num_seqs in (1, 5, SCAN_MAX_ELEMENTS // (KVH * G * D) + 1, 40):
            scale = torch.rand(KVH, num_seqs, num_blocks, 1, 1, generator=gen) ** 8  # spread the magnitudes
            parts = (torch.randn(KVH, num_seqs, num_blocks, G, D, generator=gen) * scale).to(dtype)
            running = parts[:, :, 0].to(torch.float64 if dtype == torch.float32 else torch.float32)
            for block in range(1, num_blocks):
                running += parts[:, :, block]
            assert torch.equal(block_sum(parts), running.to(dtype)), (num_blocks, num_seqs)


def test_a_short_decode_batched_with_a_long_one_keeps_its_bits():
    """Alone, and padded to the 22 blocks of the sequence beside it: the same bits."""
    pool = make_pool(torch.bfloat16)
    gen = torch.Generator().manual_seed(9)
    short, long = list(range(0, 1200)), list(range(1200, 1200 + 21 * BLOCK + 40))
    q = torch.randn(2, KVH * G, D, generator=gen)
    alone = torch.cat([attend(pool, q[:1], [short], [1])[0], attend(pool, q[1:], [long], [1])[0]])
    together, plan = attend(pool, q, [short, long], [1, 1])
    assert plan.groups[0].num_own_blocks == 22
    assert torch.equal(together, alone)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_scattered_shared_prefix_is_gathered_and_gives_the_bits_of_a_contiguous_one(dtype):
    """The same K/V laid out as one run of slots (read as a view) or as shuffled pages (gathered)."""
    pool = make_pool(dtype)
    length, page = 2 * BLOCK + 40, 16
    run = list(range(0, length))
    pages = torch.randperm(length // page + 1, generator=torch.Generator().manual_seed(4)).tolist()
    scattered = [3000 + p * page + j for p in pages for j in range(page)][:length]
    for cache in (pool.k_cache[0], pool.v_cache[0]):
        cache[scattered] = cache[run]
    own = [list(range(600 + 100 * i, 600 + 100 * i + 9)) for i in range(3)]
    q_lens = [1, 1, 1]
    q = torch.randn(3, KVH * G, D, generator=torch.Generator().manual_seed(5))
    out_run, plan_run = attend(pool, q, [run + tail for tail in own], q_lens)
    out_scattered, plan_scattered = attend(pool, q, [scattered + tail for tail in own], q_lens)
    assert plan_run.groups[0].shared_start == 0 and plan_scattered.groups[0].shared_start is None
    assert plan_scattered.groups[0].shared_rows is not None and plan_scattered.groups[0].num_shared_blocks == 2
    assert torch.equal(out_run, out_scattered)


def test_short_units_double_up_to_16_queries_then_grow_by_16():
    lengths = [1, 2, 3, 5, 9, 16, 17, 33, 46, 48, 49, 64]
    assert [length_bucket(n) for n in lengths] == [1, 2, 4, 8, 16, 16, 32, 48, 48, 48, 64, 64]


@pytest.mark.parametrize(("l2_bytes", "expected"), [(None, 384), (1 << 20, 384), (2 << 20, 768), (512 << 10, 256),
                                                    (1280 << 10, 448), (64 << 20, 1536)])
def test_tiles_hold_384_query_rows_per_mib_of_l2(l2_bytes, expected):
    assert tile_rows(l2_bytes) == expected
