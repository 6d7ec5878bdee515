"""Must-show: on the real SmolLM2 (fp32), prompt-lookup speculation accepts drafts on text that repeats its
context and gives the same greedy tokens as plain decoding, alone and batched."""

import pytest
from tests.integration.engine.test_engine_greedy import generate_together

from engine import SamplingParams

pytestmark = pytest.mark.slow

QUOTE = ("The radix cache keeps the KV of every prompt prefix it has computed, page by page, so that the "
         "next request which starts with the same tokens skips their prefill.")
PROMPTS = [
    f"Repeat this sentence word for word, twice: {QUOTE}",
    "Count from 1 to 25, separated by commas.",
]
PARAMS = SamplingParams(max_tokens=48)
OWN_POOL = 520  # pages: a runner (and KV pool) apart from the default one the plain engine runs on


@pytest.fixture(scope="module")
def prompts(smollm):
    from bench.workloads.chat_template import render_chat

    return [render_chat(smollm.tokenizer, [{"role": "user", "content": p}]) for p in PROMPTS]


def test_drafts_are_accepted_and_the_tokens_are_those_of_plain_decoding(make_engine, prompts):
    plain = make_engine(speculative_tokens=0)
    fast = make_engine(num_pages=OWN_POOL, speculative_tokens=7)
    expected = [plain.generate_sync(p, PARAMS).output_token_ids for p in prompts]
    assert [fast.generate_sync(p, PARAMS).output_token_ids for p in prompts] == expected
    stats = fast.stats()["speculation"]
    assert stats["accepted_tokens"] >= 16, stats  # counting and quoting repeat the context
    assert fast.stats()["num_steps"] < plain.stats()["num_steps"]


def test_two_speculating_requests_batched_keep_their_tokens(make_engine, prompts):
    plain = make_engine(speculative_tokens=0)
    expected = [plain.generate_sync(p, PARAMS).output_token_ids for p in prompts]
    fast = make_engine(num_pages=OWN_POOL, speculative_tokens=7)
    finals = generate_together(fast, prompts, PARAMS)
    assert [f.output_token_ids for f in finals] == expected
    assert fast.stats()["speculation"]["accepted_tokens"] > 0
