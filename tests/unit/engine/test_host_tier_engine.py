"""The host tier under a real scheduler and KV pool, with the fake runner (which keeps each token's
id and position in the KV pool, so a page loaded into the wrong place changes the output)."""

import os

import pytest
from tests.support.fake_runner import FakeRunner, reference_greedy

from engine import Engine, EngineConfig, SamplingParams
from engine.host_tier.copy_policy import CopyPolicy

PAGE_SIZE = 4


class AlwaysLoad(CopyPolicy):
    """Loads every host hit. The measured policy compares the copy with the fake runner's prefill, which costs
    next to nothing, so under a loaded machine it sometimes (rightly) recomputes; this test is about the
    load path, and the decision has tests of its own (tests/unit/engine/test_copy_policy.py)."""

    def should_load(self, num_pages: int) -> bool:
        self.num_loads_chosen += 1
        return True


def make(num_pages: int, **overrides) -> Engine:
    config = EngineConfig(model="fake", page_size=PAGE_SIZE, num_pages=num_pages, **overrides)
    return Engine(config, runner=FakeRunner(num_pages, PAGE_SIZE)).start()


def prompts() -> list[list[int]]:
    """Three 32-token prefixes, each asked twice; the device pool holds about one of them."""
    prefixes = [[(7 * k + j) % 97 + 1 for j in range(32)] for k in range(3)]
    return [prefix + [50 + turn] for turn in range(2) for prefix in prefixes]


def run(engine: Engine, requests) -> list:
    return [engine.generate_sync(p, SamplingParams(max_tokens=4, ignore_eos=True)) for p in requests]


@pytest.mark.parametrize("host_tier_tokens", [0, 512])
def test_a_small_device_cache_gets_its_evicted_prefixes_back_from_the_host(host_tier_tokens):
    engine = make(16, host_tier_tokens=host_tier_tokens)
    if host_tier_tokens:
        engine._core.host_tier.policy = AlwaysLoad(PAGE_SIZE)
    try:
        outputs = run(engine, prompts())
        stats = engine.stats()
    finally:
        engine.shutdown()
        engine.close()
    assert [o.output_token_ids for o in outputs] == [reference_greedy(p, 4) for p in prompts()]
    second_turn = [o.usage for o in outputs[3:]]
    if host_tier_tokens:
        assert all(u.cached_tokens == 32 and u.host_cached_tokens == 32 for u in second_turn), second_turn
        tier = stats["host_tier"]
        assert tier["hit_tokens"] == 96 and tier["loads"] == 3 and tier["written_pages"] >= 16
        assert tier["bytes_copied"] > 0 and tier["evicted_pages"] == 0
    else:
        assert all(u.cached_tokens == 0 and u.host_cached_tokens == 0 for u in second_turn), second_turn
        assert stats["host_tier"] is None


def test_engines_sharing_a_named_store_hit_on_each_others_prefixes():
    name = f"rgtest{os.getpid()}share"
    first = make(16, host_tier_tokens=512, host_tier_name=name)
    second = make(16, host_tier_tokens=512, host_tier_name=name)
    try:
        prompt = prompts()[0]
        run(first, [prompt])
        first.flush_cache()  # its device tree goes to the shared host tier
        [output] = run(second, [prompt[:-1] + [77]])
    finally:
        for engine in (second, first):
            engine.shutdown()
            engine.close()
    assert output.usage.host_cached_tokens == 32 and output.usage.cached_tokens == 32
    assert output.output_token_ids == reference_greedy(prompt[:-1] + [77], 4)


def test_a_pinned_prefix_is_written_through_to_the_host_at_once():
    engine = make(32, host_tier_tokens=512)
    try:
        engine.pin_future("default", prompts()[0][:32]).result(timeout=30)
        tier = engine.stats()["host_tier"]
    finally:
        engine.shutdown()
        engine.close()
    assert tier["used_pages"] == 8 and tier["written_pages"] == 8


def test_a_full_host_tier_drops_writes_instead_of_blocking():
    engine = make(16, host_tier_tokens=8)  # two host pages: a 32-token path never fits
    try:
        outputs = run(engine, prompts())
        tier = engine.stats()["host_tier"]
    finally:
        engine.shutdown()
        engine.close()
    assert [o.output_token_ids for o in outputs] == [reference_greedy(p, 4) for p in prompts()]
    assert tier["dropped_writes"] > 0 and tier["hit_tokens"] == 0
