"""Scheduler + Engine over a fake runner: KV bookkeeping, batching, dedup, preemption, aborts, errors."""

import random
import threading

import pytest
from tests.support.fake_runner import POISON_TOKEN, FakeRunner, reference_greedy

from engine import EngineOverloadedError, PromptTooLongError, SamplingParams

SHARED = [7, 3, 9, 1, 4, 4, 2, 8, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]


def prompts(num: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [SHARED[: rng.randint(0, len(SHARED))] + [rng.randint(1, 99) for _ in range(rng.randint(1, 9))]
            for _ in range(num)]


def run_all(engine, batch: list[list[int]], max_tokens: int = 6) -> list:
    """Submit everything at once; return the final outputs in order."""
    finals, done = {}, threading.Event()

    def emit_for(i):
        def emit(out):
            if out.is_finished:
                finals[i] = out
                if len(finals) == len(batch):
                    done.set()
        return emit

    for i, prompt in enumerate(batch):
        engine.submit(prompt, SamplingParams(max_tokens=max_tokens), emit_for(i))
    assert done.wait(30)
    return [finals[i] for i in range(len(batch))]


@pytest.mark.parametrize("overrides", [
    {},
    {"enable_radix_cache": False},
    {"max_batch_tokens": 5},
    {"enable_chunked_prefill": False, "max_batch_tokens": 8},
    {"policy": "fcfs"},
    {"policy": "lpm"},
    {"policy": "dfs-weight"},
    {"max_running": 2},
], ids=str)
def test_batched_outputs_equal_the_unbatched_reference(make_engine, overrides):
    engine = make_engine(**overrides)
    batch = prompts(24)
    for prompt, final in zip(batch, run_all(engine, batch)):
        assert final.output_token_ids == reference_greedy(prompt, 6)
        assert final.finish_reason == "length" and final.error is None


def test_preemption_keeps_outputs_exact_and_pages_balanced(make_engine):
    engine = make_engine(num_pages=24, page_size=4)
    batch = prompts(12, seed=3)
    finals = run_all(engine, batch, max_tokens=20)
    assert engine.stats()["num_preemptions"] > 0
    for prompt, final in zip(batch, finals):
        assert final.output_token_ids == reference_greedy(prompt, 20)


def test_cold_group_computes_a_shared_prefix_once(make_engine):
    engine = make_engine(page_size=4, dedup_min_tokens=4)
    prefix = list(range(1, 41))
    batch = [prefix + [50 + i, 60 + i] for i in range(8)]
    finals = run_all(engine, batch, max_tokens=2)
    computed = sum(f.usage.computed_prefill_tokens for f in finals)
    assert computed == 42 + 7 * 2  # one producer computes 40+2; the others only their 2-token suffix
    assert sorted(f.usage.cached_tokens for f in finals) == [0] + [40] * 7


@pytest.mark.parametrize(("prompt_len", "prefill_steps"), [(33, [33]), (34, [34]), (35, [32, 3]), (64, [32, 32])])
def test_a_chunk_that_would_leave_a_short_remainder_takes_it(make_engine, prompt_len, prefill_steps):
    """Budget 32: a remainder of up to 32 // 16 = 2 tokens rides along instead of costing a step of its own."""
    engine = make_engine(max_batch_tokens=32)
    prompt = [1 + i % 90 for i in range(prompt_len)]
    (final,) = run_all(engine, [prompt], max_tokens=3)
    assert final.output_token_ids == reference_greedy(prompt, 3)
    assert engine.runner.token_counts == prefill_steps + [1, 1]  # then two decode steps


def test_second_request_reuses_the_cached_prefix(make_engine):
    engine = make_engine(page_size=4)
    prompt = list(range(1, 30))
    first = engine.generate_sync(prompt, SamplingParams(max_tokens=3))
    second = engine.generate_sync(prompt, SamplingParams(max_tokens=3))
    assert first.output_token_ids == second.output_token_ids == reference_greedy(prompt, 3)
    assert first.usage.cached_tokens == 0 and second.usage.cached_tokens == 28
    assert second.usage.computed_prefill_tokens == 1


class PrivateReplyRunner(FakeRunner):
    """A runner whose generated tokens' K/V has other bits than the same tokens as prompt rows (the native
    decode kernel's case); it records which sequences each forward marks generated."""

    def __init__(self, num_pages: int, page_size: int) -> None:
        super().__init__(num_pages, page_size)
        self.generated_kv_is_shareable = False
        self.generated_flags: list[list[bool]] = []

    def forward(self, batch):
        self.generated_flags.append(list(batch.seq_is_generated))
        return super().forward(batch)


@pytest.mark.parametrize("runner_class, cached", [(FakeRunner, 36), (PrivateReplyRunner, 28)])
def test_a_reply_is_reused_only_where_generated_kv_is_shareable(make_engine, runner_class, cached):
    engine = make_engine(page_size=4, runner_class=runner_class)
    prompt = list(range(1, 30))  # 29 tokens: 7 whole pages
    first = engine.generate_sync(prompt, SamplingParams(max_tokens=8))
    follow_up = prompt + first.output_token_ids + [5, 6]
    second = engine.generate_sync(follow_up, SamplingParams(max_tokens=2))
    # shareable: the prompt and the 7 fed replies (36 tokens, 9 pages); otherwise the prompt's 7 pages only
    assert second.usage.cached_tokens == cached
    assert second.output_token_ids == reference_greedy(follow_up, 2)
    if runner_class is PrivateReplyRunner:
        assert engine.runner.generated_flags[0] == [False]  # the prompt
        assert all(flags == [True] for flags in engine.runner.generated_flags[1:8])  # its 7 decode steps


def test_namespaces_do_not_share_cache(make_engine):
    engine = make_engine(page_size=4)
    prompt = list(range(1, 30))
    engine.generate_sync(prompt, SamplingParams(max_tokens=2), namespace="a")
    other = engine.generate_sync(prompt, SamplingParams(max_tokens=2), namespace="b")
    assert other.usage.cached_tokens == 0


def test_random_run_with_aborts_leaks_no_pages(make_engine):
    engine = make_engine(num_pages=64, page_size=4, max_batch_tokens=16)
    rng = random.Random(1)
    finals, done = [], threading.Event()
    lock = threading.Lock()

    def emit(out):
        if out.is_finished:
            with lock:
                finals.append(out)
                if len(finals) == 200:
                    done.set()

    for i, prompt in enumerate(prompts(200, seed=5)):
        request_id = engine.submit(prompt, SamplingParams(max_tokens=rng.randint(1, 8)), emit)
        if rng.random() < 0.3:
            engine.abort(request_id)
    assert done.wait(60)
    assert any(f.finish_reason == "abort" for f in finals) and any(f.finish_reason == "length" for f in finals)
    # the fixture checks free pages == all pages after flushing the tree


def test_a_failing_request_fails_alone_and_the_loop_goes_on(make_engine):
    engine = make_engine()
    good, bad = [1, 2, 3, 4, 5], [1, 2, POISON_TOKEN]
    finals = run_all(engine, [good, bad, good + [6]], max_tokens=3)
    assert "poisoned" in str(finals[1].error) and finals[1].finish_reason == "abort"
    assert finals[0].output_token_ids == reference_greedy(good, 3) and finals[0].error is None
    assert finals[2].output_token_ids == reference_greedy(good + [6], 3)
    with pytest.raises(Exception, match="poisoned"):
        engine.generate_sync(bad, SamplingParams(max_tokens=2))
    assert engine.generate_sync([1, 2, 3], SamplingParams(max_tokens=2)).output_token_ids == reference_greedy([1, 2, 3], 2)


def test_prompt_too_long_and_empty_prompt_are_rejected(make_engine):
    engine = make_engine(max_context=32)
    with pytest.raises(PromptTooLongError):
        engine.generate_sync(list(range(1, 30)), SamplingParams(max_tokens=8))
    with pytest.raises(ValueError):
        engine.generate_sync([], SamplingParams(max_tokens=8))


def test_a_full_waiting_queue_raises_overloaded(make_engine):
    engine = make_engine(max_queue=3)
    engine.shutdown()  # nothing drains the queue now
    for _ in range(3):
        engine.submit([1, 2, 3], SamplingParams(max_tokens=1), lambda out: None)
    with pytest.raises(EngineOverloadedError):
        engine.submit([1, 2, 3], SamplingParams(max_tokens=1), lambda out: None)


def test_stop_token_ids_end_the_request(make_engine):
    engine = make_engine()
    prompt = [5, 6, 7]
    expected = reference_greedy(prompt, 6)
    final = engine.generate_sync(prompt, SamplingParams(max_tokens=6, stop_token_ids=[expected[2]]))
    assert final.finish_reason == "stop" and final.output_token_ids == expected[: expected.index(expected[2]) + 1]


async def test_async_generate_streams_tokens_then_usage(make_engine):
    engine = make_engine()
    outs = [out async for out in engine.generate([4, 5, 6], SamplingParams(max_tokens=4))]
    assert [t for out in outs for t in out.token_ids] == reference_greedy([4, 5, 6], 4)
    assert outs[-1].usage.completion_tokens == 4 and all(o.usage is None for o in outs[:-1])


async def test_pin_prefills_then_pins_and_unpin_releases(make_engine):
    engine = make_engine(page_size=4)
    pin_id = await engine.pin("t", list(range(1, 18)))
    assert engine.pin_info(pin_id)["tokens"] == 16
    final = engine.generate_sync(list(range(1, 18)) + [40], SamplingParams(max_tokens=1), namespace="t")
    assert final.usage.cached_tokens == 16
    engine.unpin(pin_id)
