"""Prompt-lookup speculation: what is drafted, what is accepted, and that the engine's output and pages are
exactly what plain decoding gives (over a fake runner whose next token depends on the last two tokens)."""

import functools
import threading

import numpy as np
import pytest
from tests.support.fake_runner import CyclingFakeRunner, reference_greedy_of_last_two

from engine import Engine, EngineConfig, SamplingParams
from engine.forward_batch import make_forward_batch
from engine.speculation import matching_prefix, propose


def drafted(tokens, num_draft=4, max_ngram=3):
    return propose(np.array(tokens), num_draft, max_ngram).tolist()


def test_the_tokens_after_the_latest_earlier_occurrence_of_the_suffix_are_proposed():
    assert drafted([1, 2, 3, 9, 8, 7, 6, 5, 1, 2, 3]) == [9, 8, 7, 6]
    assert drafted([5, 6, 7, 0, 5, 6, 8, 0, 5, 6]) == [8, 0, 5, 6]  # the latest of two occurrences
    assert drafted([1, 2, 3, 9, 9, 4, 2, 3, 7, 7, 1, 2, 3], num_draft=2) == [9, 9]  # 3-gram before a later 2-gram
    assert drafted([4, 2, 3, 7, 7, 1, 2, 3], num_draft=2) == [7, 7]  # then the 2-gram
    assert drafted([1, 2, 3, 4, 5, 3]) == []  # one recurring token is not enough
    assert drafted([1, 2, 3, 1, 2], num_draft=10) == [3, 1, 2]  # up to the end, no further
    assert drafted([7]) == [] and drafted([]) == []


def test_drafts_are_accepted_up_to_the_first_disagreement():
    assert matching_prefix([4, 5, 6], [4, 5, 6, 7]) == 3
    assert matching_prefix([4, 5, 6], [4, 9, 6, 7]) == 1
    assert matching_prefix([4, 5, 6], [0, 5, 6, 7]) == 0


def test_a_forward_batch_returns_logits_for_each_sequences_last_tokens():
    batch = make_forward_batch([[1, 2, 3], [4], [5, 6]], [[0, 1, 2], [3], [4, 5]], logit_rows=[0, 2],
                               num_logit_tokens=[3, 1])
    batch.validate()
    assert batch.last_token_indices() == [0, 1, 2, 5]
    with pytest.raises(ValueError, match="num_logit_tokens"):
        make_forward_batch([[1, 2]], [[0, 1]], num_logit_tokens=[3]).validate()


@pytest.fixture
def make_engine(make_engine):
    """Engines over CyclingFakeRunner (conftest's make_engine checks their pages)."""
    return functools.partial(make_engine, runner_class=CyclingFakeRunner)


PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]


@pytest.mark.parametrize("max_tokens", [1, 2, 5, 9, 40])
def test_speculative_greedy_output_equals_plain_decoding_in_fewer_forwards(make_engine, max_tokens):
    plain = make_engine(speculative_tokens=0)
    fast = make_engine(speculative_tokens=7)
    expected = reference_greedy_of_last_two(PROMPT, max_tokens)
    assert plain.generate_sync(PROMPT, SamplingParams(max_tokens=max_tokens)).output_token_ids == expected
    out = fast.generate_sync(PROMPT, SamplingParams(max_tokens=max_tokens))
    assert out.output_token_ids == expected and out.usage.completion_tokens == max_tokens
    assert out.finish_reason == "length"
    if max_tokens == 40:
        stats = fast.stats()["speculation"]
        assert stats["accepted_tokens"] > 20 and stats["draft_tokens"] >= stats["accepted_tokens"]
        assert fast.runner.num_forwards < plain.runner.num_forwards / 2


def test_a_stop_token_inside_the_accepted_drafts_ends_the_output_where_plain_decoding_does(make_engine):
    prompt = PROMPT + reference_greedy_of_last_two(PROMPT, 32)  # two turns of the cycle: drafts hit at once
    expected = reference_greedy_of_last_two(prompt, 40)
    index = next(i for i in range(2, 8) if expected[i] not in expected[:i])  # first seen mid-way through a draft
    params = SamplingParams(max_tokens=40, stop_token_ids=[expected[index]])
    plain = make_engine(speculative_tokens=0).generate_sync(prompt, params)
    fast_engine = make_engine(speculative_tokens=7)
    fast = fast_engine.generate_sync(prompt, params)
    assert fast.output_token_ids == plain.output_token_ids == expected[: index + 1]
    assert fast.finish_reason == plain.finish_reason == "stop"
    stats = fast_engine.stats()["speculation"]
    assert stats["verify_steps"] == 1 and stats["accepted_tokens"] == 7  # one step, cut short by the stop token


def test_the_radix_cache_keeps_only_verified_tokens(make_engine):
    """A repeat of prompt + output is served from the tree and still decodes the reference."""
    engine = make_engine(speculative_tokens=7)
    first = engine.generate_sync(PROMPT, SamplingParams(max_tokens=30))
    again_prompt = PROMPT + first.output_token_ids
    again = engine.generate_sync(again_prompt, SamplingParams(max_tokens=12))
    assert again.usage.cached_tokens >= len(PROMPT)
    assert again.output_token_ids == reference_greedy_of_last_two(again_prompt, 12)


def test_sampling_requests_do_not_speculate(make_engine):
    engine = make_engine(speculative_tokens=7)
    engine.generate_sync(PROMPT, SamplingParams(max_tokens=30, temperature=0.8, seed=1))
    assert engine.stats()["speculation"]["draft_tokens"] == 0


def test_a_decode_batch_wider_than_speculative_max_batch_does_not_speculate():
    """Three requests queued before the step thread starts are admitted together and decode together."""
    engine = Engine(EngineConfig(model="fake", page_size=4, num_pages=256, speculative_max_batch=2),
                    runner=CyclingFakeRunner(256, 4))
    finals, done = {}, threading.Event()

    def emit_for(i):
        def emit(out):
            if out.is_finished:
                finals[i] = out
                if len(finals) == 3:
                    done.set()
        return emit

    for i in range(3):
        engine.submit(PROMPT, SamplingParams(max_tokens=30), emit_for(i))
    engine.start()
    try:
        assert done.wait(60)
        assert [finals[i].output_token_ids for i in range(3)] == [reference_greedy_of_last_two(PROMPT, 30)] * 3
        assert engine.stats()["speculation"]["draft_tokens"] == 0
    finally:
        engine.shutdown()
