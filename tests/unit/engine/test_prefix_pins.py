"""A request's prefix_pins (engine.PrefixPins): the engine leases each prompt prefix once it is computed,
a flood then cannot evict it until its time is up, a quota or cap that refuses it leaves the request
served (the prefix ordinary cache), and nothing leaks (conftest checks the pool after each test)."""

import pytest

from engine import PrefixPins, SamplingParams

PROMPT = list(range(1, 11))  # 10 tokens: 2 full pages of 4, then a tail


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(engine, prompt, pins=None, namespace="t"):
    return engine.generate_sync(prompt, SamplingParams(max_tokens=1), namespace=namespace, prefix_pins=pins,
                                timeout=30)


def flood(engine, num_prompts=6, namespace="t"):
    for i in range(num_prompts):
        run(engine, [50 + i] * 14, namespace=namespace)


def test_a_leased_prefix_survives_a_flood_until_its_ttl_then_the_next_flood_evicts_it(make_engine):
    engine = make_engine(num_pages=12, page_size=4)
    engine.cache.clock = clock = Clock()
    first = run(engine, PROMPT, PrefixPins(((9, 60.0),)))  # 9 rounds down to 8
    assert first.usage.cached_tokens == 0
    assert engine.stats()["cache"]["pinned_tokens"] == 8
    run(engine, [90] + PROMPT[1:])  # an unmarked prompt of the same size
    flood(engine)
    assert run(engine, PROMPT).usage.cached_tokens == 8  # the leased prefix is still there
    assert run(engine, [90] + PROMPT[1:]).usage.cached_tokens == 0  # the unmarked one was evicted
    clock.now = 59.0  # the hit above refreshed it at 0 (the clock stood still): it ends at 60
    assert engine.stats()["cache"]["num_pins"] == 1
    clock.now = 60.0
    flood(engine)
    assert engine.stats()["cache"]["num_pins"] == 0 and engine.stats()["cache"]["pinned_tokens"] == 0
    assert run(engine, PROMPT).usage.cached_tokens == 0


def test_a_cached_prefix_is_leased_at_admission_and_a_later_request_extends_its_leases(make_engine):
    engine = make_engine(num_pages=32, page_size=4)
    engine.cache.clock = clock = Clock()
    run(engine, PROMPT)
    second = run(engine, PROMPT, PrefixPins(((4, 30.0), (8, 30.0))))
    assert second.usage.cached_tokens == 8
    assert engine.stats()["cache"]["num_pins"] == 2 and engine.stats()["cache"]["pinned_tokens"] == 8
    clock.now = 20.0
    run(engine, PROMPT, PrefixPins(((8, 30.0),)))  # extends the 8-token pin; its match refreshes both
    clock.now = 49.0
    stats = engine.stats()["cache"]
    assert stats["num_pins"] == 2 and stats["pinned_tokens"] == 8
    clock.now = 50.0
    assert engine.stats()["cache"]["num_pins"] == 0


@pytest.mark.parametrize("pins, cap", [
    (PrefixPins(((8, 60.0),), quota_namespace="t", quota_tokens=4), None),
    (PrefixPins(((8, 60.0),)), 1),
])
def test_a_lease_past_the_quota_or_the_cap_leaves_the_request_served_and_the_prefix_unpinned(make_engine, pins, cap):
    engine = make_engine(num_pages=32, page_size=4)
    engine.set_pin_capacity(cap)
    out = run(engine, PROMPT, pins, namespace="t|salt:s")
    assert out.finish_reason == "length" and len(out.output_token_ids) == 1
    stats = engine.stats()["cache"]
    assert stats["num_pins"] == 0 and stats["pinned_tokens"] == 0
    assert run(engine, PROMPT, namespace="t|salt:s").usage.cached_tokens == 8  # still cached as any other prefix


def test_prefixes_outside_the_prompt_or_without_a_ttl_are_refused_at_submit(make_engine):
    engine = make_engine()
    with pytest.raises(ValueError, match="outside the prompt"):
        run(engine, PROMPT, PrefixPins(((11, 60.0),)))
    with pytest.raises(ValueError, match="ttl_s > 0"):
        run(engine, PROMPT, PrefixPins(((8, 0.0),)))
