"""The rag and policy benches on small generated workloads with the real model: their claims hold."""

import pytest

from engine import EngineConfig
from bench.policy.prompts import agent_requests
from bench.policy.run import run_policy_bench
from bench.rag.run import run_rag_bench
from bench.workloads.agent import generate_workload
from bench.workloads.rag import generate_rag_workload

pytestmark = pytest.mark.slow


def test_rag_bench_computes_the_shared_prefix_once_with_identical_outputs(smollm, runners):
    workload = generate_rag_workload(smollm.tokenizer, num_requests=6, system_tokens=240, document_tokens=120,
                                     max_new_tokens=4)
    runner = runners(256, 16)
    config = EngineConfig(model="smollm2-135m", dtype="float32", page_size=16, max_batch_tokens=512)
    result = run_rag_bench(runner, config, workload)
    assert result["requests"] == 6 and result["outputs_identical"]
    assert result["prefill_tokens_off"] == sum(len(p) for p in workload.prompts)
    # one producer computes the prefix; the five others only their own suffixes (page-aligned)
    assert result["prefill_tokens_on"] <= result["prefill_tokens_off"] - 5 * (workload.num_prefix_tokens - 16)
    assert result["cached_tokens_on"] >= 5 * (workload.num_prefix_tokens - 16)


def test_rag_bench_outputs_are_identical_in_bfloat16_too(smollm):
    """bfloat16 (the default where the CPU has it): batch-invariant attention keeps cache-on answers equal to
    cache-off ones. A small random Llama over SmolLM2's tokenizer keeps this cheap on CPUs that only emulate
    bfloat16 (their kernels round rows alike anyway; native AVX512-BF16 kernels are the ones that do not);
    its near-flat logits make any changed bit likely to change a greedy token."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from engine import KVPool
    from engine.models.llama import ModelShape
    from engine.models.loader import LoadedModel
    from engine.runner import ModelRunner

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(smollm.tokenizer), hidden_size=192, intermediate_size=256,
                         num_hidden_layers=3, num_attention_heads=3, num_key_value_heads=1,
                         max_position_embeddings=2048, tie_word_embeddings=True)
    weights = dict(AutoModelForCausalLM.from_config(config, dtype=torch.float32).state_dict())
    model = LoadedModel(config, weights, smollm.tokenizer, "random-llama", 2048, [0])
    shape = ModelShape.from_config(config)
    pool = KVPool(256, 16, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim,
                  dtype=torch.bfloat16)
    runner = ModelRunner(model, pool, torch.bfloat16, "cpu")
    workload = generate_rag_workload(smollm.tokenizer, num_requests=8, system_tokens=500, document_tokens=500,
                                     max_new_tokens=8)
    engine_config = EngineConfig(model="random-llama", dtype="bfloat16", page_size=16, max_batch_tokens=256)
    for serial in (False, True):
        result = run_rag_bench(runner, engine_config, workload, serial=serial)
        assert result["outputs_identical"], f"serial={serial}"  # cache on, off, and on without speculation
        assert result["without_speculation"] is not None
        assert result["prefill_tokens_on"] < result["prefill_tokens_off"]


def test_policy_bench_reports_every_policy_under_a_small_kv_budget(smollm, runners):
    rows = [{**row, "body": {**row["body"], "max_tokens": 2}} for row in generate_workload(5)]  # prefill is the work
    requests = agent_requests(smollm.tokenizer, rows)
    runner = runners(96, 16)  # 1,536 tokens: room for the longest request, far less than the distinct prefixes
    config = EngineConfig(model="smollm2-135m", dtype="float32", page_size=16, max_running=4)
    result = run_policy_bench(runner, config, requests)
    assert set(result["policies"]) == {"fcfs", "lpm", "dfs-weight", "fair"}
    assert result["kv_budget_tokens"] == 1536 and result["unique_prompt_tokens"] > 1536
    for summary in result["policies"].values():
        assert 0 <= summary["hit_rate"] < 1 and summary["wall_s"] > 0


def test_decode_grammar_bench_keeps_the_grammar_in_force_on_every_step(runners):
    from bench.decode.grammar import run_grammar_bench

    result = run_grammar_bench(runners(64, 16), [2], num_tokens=6, prompt_len=8, repeat=1)
    (row,) = result["results"]
    assert row["batch"] == 2 and row["free_tok_s"] > 0 and row["json_tok_s"] > 0
    assert row["ratio"] == row["json_tok_s"] / row["free_tok_s"]
