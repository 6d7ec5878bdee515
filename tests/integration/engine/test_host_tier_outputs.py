"""Greedy outputs with the host KV tier on and off are identical (real SmolLM2-135M, fp32), on small
slices of the RAG and agent workloads under a device pool that holds one prompt at a time — so with
the tier on the second request of each prefix copies it back from the host, and with it off recomputes it."""

import json

import pytest

from engine import Engine, EngineConfig, SamplingParams
from bench.policy.prompts import agent_requests
from bench.workloads.agent import generate_workload
from tests.support.paths import REPO_ROOT

PREFIX_TOKENS = 160
NUM_PAGES, PAGE_SIZE = 16, 16  # 256 tokens: one prompt and its outputs, never two


def prompts(tokenizer) -> list[tuple[str, list[int]]]:
    """RAG, agent, RAG, agent: each pair shares a PREFIX_TOKENS prefix and ends differently."""
    rag = json.loads((REPO_ROOT.parent / "shared" / "workloads" / "rag_workload.json").read_text())
    rag_prefix = rag["prefix_ids"][:PREFIX_TOKENS]
    rag_prompts = [rag_prefix + r["input_ids"][-r["n_suffix_tokens"]:] for r in rag["requests"][:2]]
    rows = [row for row in generate_workload(40, seed=3) if row["tenant"] == "acme-support"][:2]
    agent = [r.token_ids for r in agent_requests(tokenizer, rows)]
    agent_prompts = [agent[0][:PREFIX_TOKENS] + agent[i][-24:] for i in range(2)]
    return [("default", rag_prompts[0]), ("acme", agent_prompts[0]), ("default", rag_prompts[1]),
            ("acme", agent_prompts[1])]


def run(runner, requests, host_tier_tokens: int):
    config = EngineConfig(dtype="float32", device="cpu", page_size=PAGE_SIZE, num_pages=NUM_PAGES,
                          host_tier_tokens=host_tier_tokens)
    engine = Engine(config, runner=runner).start()
    try:
        outputs = [engine.generate_sync(tokens, SamplingParams(max_tokens=4), namespace=ns) for ns, tokens in requests]
        engine.shutdown()
        engine.flush_cache()
        assert engine.pool.num_free_pages == engine.pool.num_pages, "pages leaked"
    finally:
        engine.shutdown()
        engine.close()
    return outputs


@pytest.mark.slow
def test_greedy_outputs_are_identical_with_the_host_tier_on_and_off(smollm, runners):
    runner = runners(NUM_PAGES, PAGE_SIZE)
    requests = prompts(smollm.tokenizer)
    assert all(len(tokens) + 4 <= NUM_PAGES * PAGE_SIZE < 2 * len(tokens) for _, tokens in requests)
    off = run(runner, requests, 0)
    on = run(runner, requests, 4096)
    assert [o.output_token_ids for o in on] == [o.output_token_ids for o in off]
    assert all(o.usage.host_cached_tokens == 0 for o in off)
    assert all(o.usage.cached_tokens == o.usage.host_cached_tokens >= PREFIX_TOKENS for o in on[2:]), on[2:]
    assert sum(o.usage.computed_prefill_tokens for o in on) < sum(o.usage.computed_prefill_tokens for o in off)
