"""Must-show: greedy output equals transformers generate, whatever the cache, chunking, batching or preemption."""

import threading

import pytest
from tests.support.greedy_prompts import NUM_REFERENCE_TOKENS

from engine import SamplingParams

pytestmark = pytest.mark.slow
GREEDY = SamplingParams(max_tokens=NUM_REFERENCE_TOKENS)


def generate_together(engine, prompts, params=GREEDY):
    """Submit all prompts at once; the final outputs in order."""
    finals, done = {}, threading.Event()

    def emit_for(i):
        def emit(out):
            if out.is_finished:
                finals[i] = out
                if len(finals) == len(prompts):
                    done.set()
        return emit

    for i, prompt in enumerate(prompts):
        engine.submit(prompt, params, emit_for(i))
    assert done.wait(600)
    assert all(f.error is None for f in finals.values())
    return [finals[i] for i in range(len(prompts))]


def test_greedy_alone_matches_transformers_generate(make_engine, chat_prompts, hf_greedy):
    assert all(len(expected) == NUM_REFERENCE_TOKENS for expected in hf_greedy)
    engine = make_engine(enable_radix_cache=False, enable_chunked_prefill=False)
    for prompt, expected in zip(chat_prompts, hf_greedy):
        assert engine.generate_sync(prompt, GREEDY).output_token_ids == expected


@pytest.mark.parametrize("overrides", [
    {"enable_radix_cache": True},
    {"enable_radix_cache": False},
    {"max_batch_tokens": 16},
    {"enable_chunked_prefill": False},
], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_greedy_batched_matches_transformers_generate(make_engine, chat_prompts, hf_greedy, overrides):
    engine = make_engine(**overrides)
    finals = generate_together(engine, chat_prompts)
    assert [f.output_token_ids for f in finals] == hf_greedy


def test_greedy_with_a_warm_radix_cache_matches(make_engine, chat_prompts, hf_greedy):
    engine = make_engine(max_batch_tokens=24)
    generate_together(engine, chat_prompts)
    warm = generate_together(engine, chat_prompts)
    assert all(f.usage.cached_tokens > 0 for f in warm)
    assert [f.output_token_ids for f in warm] == hf_greedy


def test_greedy_after_a_forced_preemption_matches(make_engine, chat_prompts, hf_greedy):
    # 5 prompts of ~35 tokens + 32 new need ~25 pages of 16; 14 pages force preemptions during decode
    engine = make_engine(num_pages=14, page_size=16)
    finals = generate_together(engine, chat_prompts)
    assert engine.stats()["num_preemptions"] > 0
    assert [f.output_token_ids for f in finals] == hf_greedy
