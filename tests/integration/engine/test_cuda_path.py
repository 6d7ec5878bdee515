"""The CUDA path on the real default model: logits against transformers on the same device, the radix
cache on vs off, the attention backend (FlashInfer when it imports, the torch paged attention otherwise)
against torch's SDPA, and bfloat16. Skipped without CUDA; nothing here assumes a CPU."""

import pytest
import torch
import torch.nn.functional as F

from engine import Engine, EngineConfig, KVPool, SamplingParams
from engine.forward_batch import make_forward_batch
from engine.models.llama import ModelShape
from engine.runner import ModelRunner
from engine.kernels import make_attention
from engine.models.divergence import compare_logits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

CUDA = torch.device("cuda")
QUESTIONS = ["What is the capital of France?", "Explain how rainbows form.", "Write a haiku about autumn."]
MAX_FLOAT32_LOGIT_DIFF = 2e-3  # cuBLAS and FlashInfer sum in other orders than transformers' eager kernels
MAX_BFLOAT16_KL = 0.05  # nats, against transformers in bfloat16 on the same device


@pytest.fixture(autouse=True)
def exact_float32_matmuls():
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = previous


def chat_ids(tokenizer, question):
    return list(tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                              tokenize=True, return_dict=False))


def cuda_runner(smollm, dtype, num_pages=64):
    shape = ModelShape.from_config(smollm.config)
    pool = KVPool(num_pages, 16, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads,
                  head_dim=shape.head_dim, dtype=dtype, device=CUDA)
    return ModelRunner(smollm, pool, dtype, CUDA)


def last_logits(runner, prompts):
    """One ragged prefill of all prompts on the runner's pool; (len(prompts), vocab) on the CPU."""
    pages = [runner.pool.allocate(-(-len(p) // 16)) for p in prompts]
    try:
        slots = [runner.pool.slots(pg)[: len(p)] for pg, p in zip(pages, prompts)]
        return runner.forward(make_forward_batch(prompts, slots)).cpu()
    finally:
        for pg in pages:
            runner.pool.free(pg)


def hf_last_logits(smollm, dtype, prompts):
    model = smollm.build_hf_model(dtype).to(CUDA)
    with torch.inference_mode():
        return torch.stack([model(torch.tensor([p], device=CUDA)).logits[0, -1].float().cpu() for p in prompts])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_logits_follow_transformers_on_cuda(smollm, dtype):
    prompts = [chat_ids(smollm.tokenizer, q) for q in QUESTIONS]
    runner = cuda_runner(smollm, dtype)
    assert runner.device.type == "cuda" and runner.pool.k_cache[0].is_cuda
    ours, theirs = last_logits(runner, prompts), hf_last_logits(smollm, dtype, prompts)
    if dtype == torch.float32:
        assert (ours - theirs).abs().max() <= MAX_FLOAT32_LOGIT_DIFF
    found = compare_logits(theirs, ours)
    assert found.top1_agreement == 1.0
    assert found.mean_kl <= (1e-5 if dtype == torch.float32 else MAX_BFLOAT16_KL)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_greedy_output_is_the_same_with_the_radix_cache_on_and_off(smollm, dtype):
    shared = "You answer in one short sentence. " * 8
    prompts = [chat_ids(smollm.tokenizer, shared + q) for q in QUESTIONS]
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    outputs = {}
    for is_on in (True, False):
        config = EngineConfig(device="cuda", dtype=dtype, kv_cache_tokens=4096, enable_radix_cache=is_on)
        with Engine(config) as engine:
            assert engine.runner.device.type == "cuda"
            outputs[is_on] = [engine.generate_sync(p, params).output_token_ids for p in prompts]
            cached = engine.generate_sync(prompts[0], params).usage.cached_tokens
            assert (cached > 0) == is_on
    assert outputs[True] == outputs[False]


def sdpa_reference(q, k_cache, v_cache, seq_kv_slots, q_lens, num_heads, num_kv_heads):
    rows, start = [], 0
    for slots, q_len in zip(seq_kv_slots, q_lens):
        keys = k_cache[slots.to(CUDA)].transpose(0, 1).repeat_interleave(num_heads // num_kv_heads, dim=0)
        values = v_cache[slots.to(CUDA)].transpose(0, 1).repeat_interleave(num_heads // num_kv_heads, dim=0)
        queries = q[start : start + q_len].transpose(0, 1)  # (H, q_len, D)
        kv_len = len(slots)
        mask = torch.arange(kv_len, device=CUDA)[None, :] <= torch.arange(kv_len - q_len, kv_len, device=CUDA)[:, None]
        out = F.scaled_dot_product_attention(queries.float(), keys.float(), values.float(), attn_mask=mask)
        rows.append(out.transpose(0, 1).reshape(q_len, -1))
        start += q_len
    return torch.cat(rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_paged_attention_matches_sdpa_over_the_pool(dtype):
    num_heads, num_kv_heads, head_dim, num_pages = 9, 3, 64, 32
    pool = KVPool(num_pages, 16, num_layers=1, num_kv_heads=num_kv_heads, head_dim=head_dim, dtype=dtype,
                  device=CUDA)
    attention = make_attention(pool, num_heads, num_kv_heads, head_dim, CUDA)
    try:
        import flashinfer  # noqa: F401

        expected_backend = "FlashInferAttention"
    except ImportError:
        expected_backend = "PagedAttention"
    assert type(attention).__name__ == expected_backend
    pages = [pool.allocate(4), pool.allocate(3), pool.allocate(2)]
    kv_lens, q_lens = [50, 40, 17], [50, 1, 5]  # a fresh prefill, a decode token, a chunk after a cached prefix
    slots = [pool.slots(pg)[:n] for pg, n in zip(pages, kv_lens)]
    gen = torch.Generator(device=CUDA).manual_seed(0)
    for s, n, q_len in zip(slots, kv_lens, q_lens):  # the cached part of each sequence is already in the pool
        cached = s[: n - q_len].to(CUDA)
        pool.k_cache[0][cached] = torch.randn(len(cached), num_kv_heads, head_dim, generator=gen, device=CUDA).to(dtype)
        pool.v_cache[0][cached] = torch.randn(len(cached), num_kv_heads, head_dim, generator=gen, device=CUDA).to(dtype)
    batch = make_forward_batch([[0] * n for n in q_lens], slots)
    total = sum(q_lens)
    q = torch.randn(total, num_heads, head_dim, generator=gen, device=CUDA).to(dtype)
    k = torch.randn(total, num_kv_heads, head_dim, generator=gen, device=CUDA).to(dtype)
    v = torch.randn(total, num_kv_heads, head_dim, generator=gen, device=CUDA).to(dtype)
    out = attention.forward(0, q, k, v, attention.plan(batch, None, CUDA))
    expected = sdpa_reference(q, pool.k_cache[0], pool.v_cache[0], slots, q_lens, num_heads, num_kv_heads)
    assert out.shape == (total, num_heads * head_dim) and out.is_cuda
    assert (out.float() - expected).abs().max() <= (1e-4 if dtype == torch.float32 else 2e-2)
