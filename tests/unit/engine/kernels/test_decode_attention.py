"""The native decode kernel (generated rows where the chunk kernel does not serve: windowed layers, head dims
that are not a multiple of 16): close to a float64 reference, each row's bits independent of the batch and
the thread count, bad inputs refused; and mixed batches giving every row its bits alone on either path."""

from types import SimpleNamespace

import pytest
import torch

from engine.forward_batch import make_forward_batch
from engine.kernels.cpu.native import native_kernels
from engine.kernels.paged_attention import PagedAttention

KVH, G, NUM_SLOTS = 3, 3, 4096
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}  # bfloat16: the output's own rounding, a few ulp


@pytest.fixture(scope="module")
def native():
    module = native_kernels()
    assert module is not None, "the native CPU kernels must build where the tests run (a C++ compiler is needed)"
    return module


def make_pool(dtype, d, seed=0):
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(NUM_SLOTS, KVH, d, generator=gen).to(dtype)
    v = torch.randn(NUM_SLOTS, KVH, d, generator=gen).to(dtype)
    return SimpleNamespace(k_cache=[k], v_cache=[v])


def reference_row(pool, q_row, slots):
    """One query row (H, D) over keys at ``slots``, float64."""
    d = q_row.shape[-1]
    keys = pool.k_cache[0][slots].double().repeat_interleave(G, dim=1)  # (L, H, D)
    values = pool.v_cache[0][slots].double().repeat_interleave(G, dim=1)
    scores = torch.einsum("hd,lhd->hl", q_row.double(), keys) * d**-0.5
    return torch.einsum("hl,lhd->hd", scores.softmax(-1), values).reshape(-1)


def run(native, pool, q, slots, spans):
    begins = torch.tensor([b for b, _ in spans])
    ends = torch.tensor([e for _, e in spans])
    d = q.shape[-1]
    return native.decode_attention(q, pool.k_cache[0], pool.v_cache[0], slots, begins, ends, d**-0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 24])  # 24: the portable path (not a multiple of 16 lanes)
def test_rows_match_a_float64_reference(native, dtype, d):
    pool = make_pool(dtype, d)
    gen = torch.Generator().manual_seed(1)
    slots = torch.randperm(NUM_SLOTS, generator=gen)[:2000]
    spans = [(0, 1), (0, 37), (0, 256), (0, 257), (0, 2000), (100, 1900)]  # 1, a chunk, chunk + 1, many
    q = torch.randn(len(spans), KVH * G, d, generator=gen).to(dtype)
    out = run(native, pool, q, slots, spans)
    assert out.shape == (len(spans), KVH * G * d) and out.dtype == dtype
    for n, (b, e) in enumerate(spans):
        expected = reference_row(pool, q[n], slots[b:e])
        assert torch.allclose(out[n].double(), expected, atol=TOLERANCE[dtype], rtol=0), (n, b, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_rows_bits_do_not_depend_on_its_batch_or_the_threads(native, dtype):
    pool = make_pool(dtype, 64)
    gen = torch.Generator().manual_seed(2)
    slots = torch.randperm(NUM_SLOTS, generator=gen)[:1500]
    spans = [(0, 1500), (0, 9), (700, 1300), (0, 300)]
    q = torch.randn(len(spans), KVH * G, 64, generator=gen).to(dtype)
    together = run(native, pool, q, slots, spans)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = [run(native, pool, q[n : n + 1], slots, [span]) for n, span in enumerate(spans)]
    finally:
        torch.set_num_threads(threads)
    for n in range(len(spans)):
        assert torch.equal(together[n : n + 1], alone[n]), n
    # a strided q (a view into the fused q/k projection, as the model passes it) gives the same bits
    wide = torch.zeros(len(spans), KVH * G + KVH, 64, dtype=dtype)
    wide[:, : KVH * G] = q
    assert torch.equal(run(native, pool, wide[:, : KVH * G], slots, spans), together)


@pytest.mark.parametrize("spans, slots, message", [
    ([(0, 0)], [1, 2], "no keys"),
    ([(1, 3)], [1, 2], "overruns"),
    ([(0, 2)], [1, NUM_SLOTS], "outside the pool"),
    ([(0, 2)], [-1, 2], "outside the pool"),
])
def test_bad_rows_are_refused(native, spans, slots, message):
    pool = make_pool(torch.float32, 64)
    with pytest.raises(RuntimeError, match=message):
        run(native, pool, torch.zeros(1, KVH * G, 64), torch.tensor(slots), spans)


@pytest.mark.parametrize("d", [64, 24])
def test_a_mixed_batch_gives_each_row_its_bits_alone(native, d):
    """Every row takes the chunk kernel where head_dim is a multiple of 16 (64); otherwise (24) generated rows
    (decode and verify) take the decode kernel and prompt rows the matmul groups. Either way each row's bits
    equal those it gets alone, and every row stays close to the reference."""
    dtype = torch.bfloat16
    pool = make_pool(dtype, d)
    attention = PagedAttention(pool, KVH * G, KVH, d)
    assert attention.native is not None and not attention.generated_kv_is_shareable
    seqs = [list(range(0, 300)), list(range(400, 420)), list(range(500, 900)), list(range(1000, 1003))]
    q_lens, is_generated = [1, 20, 3, 3], [True, False, True, False]  # decode, prompt, verify, short prompt
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(sum(q_lens), KVH * G, d, generator=gen).to(dtype)

    def attend(indices):
        batch = make_forward_batch([[0] * q_lens[i] for i in indices], [seqs[i] for i in indices])
        batch.seq_is_generated = [is_generated[i] for i in indices]
        plan = attention.plan(batch)
        starts = [sum(q_lens[:i]) for i in indices]
        rows = torch.cat([q[s : s + q_lens[i]] for s, i in zip(starts, indices)])
        k_new, v_new = pool.k_cache[0][batch.out_slots].clone(), pool.v_cache[0][batch.out_slots].clone()
        return attention.forward(0, rows, k_new, v_new, plan), plan

    together, plan = attend([0, 1, 2, 3])
    if d == 64:
        assert plan.generated is None and plan.groups == [] and len(plan.rows.ends) == sum(q_lens)  # every row
        assert plan.rows.ends.tolist() == [300, *range(1, 21), 398, 399, 400, 1, 2, 3]  # verify rows: causal
    else:
        assert plan.rows is None and len(plan.groups) == 2  # the 20-row prompt and the 3-row one
        assert plan.generated.token_index.tolist() == [0, 21, 22, 23]
        assert plan.generated.ends.tolist() == [300, 300 + 398, 300 + 399, 300 + 400]
    row = 0
    for i in range(4):
        alone, _ = attend([i])
        assert torch.equal(together[row : row + q_lens[i]], alone), i
        for r in range(q_lens[i]):
            visible = torch.tensor(seqs[i][: len(seqs[i]) - q_lens[i] + r + 1])
            expected = reference_row(pool, q[row + r], visible)
            assert torch.allclose(alone[r].double(), expected, atol=3e-2, rtol=0), (i, r)
        row += q_lens[i]


def test_a_window_limits_the_keys_of_generated_rows(native):
    pool = make_pool(torch.float32, 64)
    attention = PagedAttention(pool, KVH * G, KVH, 64)
    batch = make_forward_batch([[0, 0]], [list(range(50))], is_generated=True)
    plan = attention.plan(batch, window=10)
    assert plan.groups == [] and plan.generated.token_index is None
    assert plan.generated.begins.tolist() == [39, 40] and plan.generated.ends.tolist() == [49, 50]


def test_without_the_native_kernel_every_row_takes_the_matmul_path():
    pool = make_pool(torch.float32, 64)
    attention = PagedAttention(pool, KVH * G, KVH, 64, native=False)
    assert attention.generated_kv_is_shareable
    plan = attention.plan(make_forward_batch([[0]], [list(range(50))], is_generated=True))
    assert plan.generated is None and len(plan.groups) == 1
