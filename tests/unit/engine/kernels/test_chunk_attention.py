"""The native attention of prompt rows (chunk_attention.cpp): close to a float64 reference, each row's bits
independent of the rows around it (alone, in any chunk of its prompt, behind a cached prefix, one thread or
two), bad inputs refused, and PagedAttention sending every prompt row there (the matmul groups only for
windowed layers)."""

from types import SimpleNamespace

import pytest
import torch

from engine.forward_batch import make_forward_batch
from engine.kernels.cpu.native import native_kernels
from engine.kernels.paged_attention import PagedAttention

KVH, G, D, NUM_SLOTS = 3, 3, 64, 8192
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2}  # bfloat16: probabilities and output rounded to it


@pytest.fixture(scope="module")
def native():
    module = native_kernels()
    assert module is not None, "the native CPU kernels must build where the tests run (a C++ compiler is needed)"
    if not module.has_chunk_attention:
        pytest.skip("this CPU has neither AVX2 + FMA nor AVX-512: prompt rows take the matmul groups")
    return module


def make_pool(dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return SimpleNamespace(k_cache=[torch.randn(NUM_SLOTS, KVH, D, generator=gen).to(dtype)],
                           v_cache=[torch.randn(NUM_SLOTS, KVH, D, generator=gen).to(dtype)])


def reference_row(pool, q_row, slots):
    keys = pool.k_cache[0][slots].double().repeat_interleave(G, dim=1)  # (L, H, D)
    values = pool.v_cache[0][slots].double().repeat_interleave(G, dim=1)
    scores = torch.einsum("hd,lhd->hl", q_row.double(), keys) * D**-0.5
    return torch.einsum("hl,lhd->hd", scores.softmax(-1), values).reshape(-1)


def attend(native, pool, q, seq_slots: list[torch.Tensor], rows: list[tuple[int, int]]):
    """rows: (sequence, keys visible) per query row."""
    begins = torch.tensor([0] + [len(s) for s in seq_slots[:-1]]).cumsum(0)
    return native.chunk_attention(q, pool.k_cache[0], pool.v_cache[0], torch.cat(seq_slots), begins,
                                   torch.tensor([s for s, _ in rows]), torch.tensor([e for _, e in rows]), D**-0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rows_match_a_float64_reference_and_keep_their_bits_alone_and_on_one_thread(native, dtype):
    pool = make_pool(dtype)
    gen = torch.Generator().manual_seed(1)
    perm = torch.randperm(NUM_SLOTS, generator=gen)
    seqs = [perm[:700], perm[700:1230], perm[1230:1233]]
    # a causal chunk in the middle of a prompt (positions 240..339: across a 256-key chunk edge), a suffix of
    # 40 rows, a 3-token prompt; 65+ rows of one sequence span two tiles
    rows = [(0, e) for e in range(241, 341)] + [(1, e) for e in range(491, 531)] + [(2, e) for e in (1, 2, 3)]
    q = torch.randn(len(rows), KVH * G, D, generator=gen).to(dtype)
    out = attend(native, pool, q, seqs, rows)
    assert out.shape == (len(rows), KVH * G * D) and out.dtype == dtype
    for n in (0, 15, 16, 99, 100, 139, 140, 142):
        s, e = rows[n]
        assert torch.allclose(out[n].double(), reference_row(pool, q[n], seqs[s][:e]), atol=TOLERANCE[dtype], rtol=0)
        alone = attend(native, pool, q[n : n + 1], [seqs[s]], [(0, e)])
        assert torch.equal(alone[0], out[n]), n
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(attend(native, pool, q, seqs, rows), out)
    finally:
        torch.set_num_threads(threads)


def test_a_prompt_gets_the_same_bits_whole_in_chunks_and_behind_its_cached_prefix(native):
    """What the radix cache relies on: a prompt's rows computed in one go, in two chunks, or as a suffix after
    another request computed the prefix (with the prefix's slots elsewhere in the pool) match bit for bit."""
    dtype = torch.bfloat16
    pool = make_pool(dtype)
    gen = torch.Generator().manual_seed(2)
    slots = torch.randperm(NUM_SLOTS, generator=gen)[:600]
    q = torch.randn(600, KVH * G, D, generator=gen).to(dtype)
    whole = attend(native, pool, q, [slots], [(0, e) for e in range(1, 601)])
    first = attend(native, pool, q[:300], [slots[:300]], [(0, e) for e in range(1, 301)])
    second = attend(native, pool, q[300:], [slots], [(0, e) for e in range(301, 601)])
    assert torch.equal(torch.cat([first, second]), whole)
    # two suffixes behind one shared prefix, in one call
    other = torch.cat([slots[:512], torch.randperm(NUM_SLOTS, generator=gen)[:88] + 0])
    both = attend(native, pool, torch.cat([q[512:], q[512:]]), [slots, other],
                  [(0, e) for e in range(513, 601)] + [(1, e) for e in range(513, 601)])
    assert torch.equal(both[:88], whole[512:])


@pytest.mark.parametrize("seqs, rows, message", [
    ([0, 1], [5], "one \\(sequence, end\\) per query row"),
    ([0], [0], "has no keys"),
    ([0], [9], "overruns the slots"),
    ([3], [1], "names no sequence"),
])
def test_bad_rows_are_refused(native, seqs, rows, message):
    pool = make_pool(torch.float32)
    q = torch.zeros(1, KVH * G, D)
    with pytest.raises(RuntimeError, match=message):
        native.chunk_attention(q, pool.k_cache[0], pool.v_cache[0], torch.arange(8), torch.tensor([0]),
                                torch.tensor(seqs), torch.tensor(rows), 0.125)


def test_rows_of_a_sequence_out_of_position_order_are_refused(native):
    pool = make_pool(torch.float32)
    with pytest.raises(RuntimeError, match="position order"):
        native.chunk_attention(torch.zeros(2, KVH * G, D), pool.k_cache[0], pool.v_cache[0], torch.arange(8),
                                torch.tensor([0]), torch.tensor([0, 0]), torch.tensor([5, 4]), 0.125)


def test_paged_attention_sends_every_row_to_the_kernel_and_windowed_layers_elsewhere(native):
    pool = make_pool(torch.bfloat16)
    attention = PagedAttention(pool, KVH * G, KVH, D)
    assert attention.by_chunks
    batch = make_forward_batch([[0] * 20, [0]], [list(range(100, 140)), list(range(300, 350))])
    batch.seq_is_generated = [False, True]
    plan = attention.plan(batch)
    assert plan.groups == [] and plan.generated is None and len(plan.rows.ends) == 21  # every row, in order
    assert plan.rows.ends.tolist() == [*range(21, 41), 50] and plan.rows.seqs.tolist() == [0] * 20 + [1]
    q = torch.randn(21, KVH * G, D).to(torch.bfloat16)
    out = attention.forward(0, q, pool.k_cache[0][batch.out_slots].clone(), pool.v_cache[0][batch.out_slots].clone(),
                            plan)
    assert torch.equal(out[:20], attend(native, pool, q[:20], [torch.arange(100, 140)], [(0, e) for e in range(21, 41)]))
    assert torch.equal(out[20:], attend(native, pool, q[20:], [torch.arange(300, 350)], [(0, 50)]))
    windowed = attention.plan(batch, window=8)
    assert windowed.rows is None and len(windowed.groups) == 1 and windowed.generated.token_index.tolist() == [20]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_rows_sharing_a_prefix_get_their_bits_alone_at_any_batch_and_thread_count(native, dtype):
    """The cascade: decode rows of many sequences over one cached prefix share each chunk's layout (and, with
    few tiles, a row's chunks spread over the threads); every row still gets the bits it gets alone, on one
    thread, and stays close to the reference. Sequences diverge at different points: inside a chunk, at a
    chunk edge, or not at all (the same slots as another, as after a fork)."""
    pool = make_pool(dtype)
    gen = torch.Generator().manual_seed(4)
    perm = torch.randperm(NUM_SLOTS, generator=gen)
    prefix = perm[:1100]
    own = iter(perm[1100:].split(60))
    seqs = [torch.cat([prefix[:n], next(own)]) for n in (1100, 1100, 1024, 1000, 600, 1100, 1100, 255, 1100)]
    seqs[6] = seqs[5]  # a fork: the same slots as the one before
    short = torch.cat([prefix[:30], next(own)[:5]])  # shorter than a chunk: tiled alone
    seqs.append(short)
    # one decode row per sequence, one sequence with 3 verify rows, the short one
    rows = [(s, len(seqs[s])) for s in range(9)] + [(1, len(seqs[1]) - 2), (1, len(seqs[1]) - 1), (9, len(short))]
    rows.sort()  # a sequence's rows together, in position order
    q = torch.randn(len(rows), KVH * G, D, generator=gen).to(dtype)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # every tile whole on the calling thread, chunk after chunk
        one_thread = attend(native, pool, q, seqs, rows)
        torch.set_num_threads(2)  # a lone row: its chunks as tasks on both threads, merged afterwards
        together = attend(native, pool, q, seqs, rows)
        alone = [attend(native, pool, q[n : n + 1], [seqs[s]], [(0, e)]) for n, (s, e) in enumerate(rows)]
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one_thread, together)
    for n, (s, e) in enumerate(rows):
        assert torch.equal(alone[n][0], together[n]), n
        assert torch.allclose(together[n].double(), reference_row(pool, q[n], seqs[s][:e]), atol=TOLERANCE[dtype],
                              rtol=0), n
    # the same rows among many more (more tiles than threads: no chunk tasks), in another order
    extra = [torch.cat([prefix, next(own)]) for _ in range(12)]
    crowd_rows = [(s, len(extra[s])) for s in range(12)] + [(s + 12, e) for s, e in rows]
    crowd_q = torch.cat([torch.randn(12, KVH * G, D, generator=gen).to(dtype), q])
    crowd = attend(native, pool, crowd_q, extra + seqs, crowd_rows)
    assert torch.equal(crowd[12:], together)


@pytest.mark.parametrize("bad_slot", [-1, NUM_SLOTS])
def test_a_slot_outside_the_pool_is_refused(native, bad_slot):
    pool = make_pool(torch.float32)
    slots = torch.arange(8)
    slots[5] = bad_slot
    with pytest.raises(RuntimeError, match="outside the pool"):
        native.chunk_attention(torch.zeros(1, KVH * G, D), pool.k_cache[0], pool.v_cache[0], slots,
                                torch.tensor([0]), torch.tensor([0]), torch.tensor([8]), 0.125)
