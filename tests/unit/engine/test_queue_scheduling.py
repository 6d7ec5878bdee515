"""The waiting queue over a fake runner: the fair policy across fairness keys, and the queue deadline."""

import pytest
from tests.support.fake_runner import FakeRunner, reference_greedy

from engine import Engine, EngineConfig, QueueTimeoutError, SamplingParams

SHARED = [5 + i % 40 for i in range(24)]


def new_engine(**overrides) -> Engine:
    """A stopped engine: what is submitted before start() is all waiting at the first step."""
    config = EngineConfig(model="fake", page_size=4, num_pages=128, **overrides)
    return Engine(config, runner=FakeRunner(128, 4))


def finish_order(policy: str) -> list[str]:
    """Warm the flood's prefix, queue six flood requests then one cold one, run one at a time."""
    engine = new_engine(policy=policy, max_running=1)
    engine.start()
    engine.generate_sync(SHARED + [1], SamplingParams(max_tokens=1), fairness_key="flood", timeout=30)
    engine.shutdown()
    order: list[str] = []

    def emit_for(name):
        def emit(out):
            if out.is_finished:
                order.append(name)
                if len(order) == 7:
                    engine.shutdown()
        return emit

    for i in range(6):
        engine.submit(SHARED + [60 + i, 61], SamplingParams(max_tokens=4), emit_for(f"flood{i}"), fairness_key="flood")
    engine.submit([90, 91, 92, 93, 94], SamplingParams(max_tokens=4), emit_for("cold"), fairness_key="cold")
    engine.run_here()
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_pages, "pages leaked"
    return order


def test_the_fair_policy_serves_a_cold_key_behind_at_most_one_request_of_a_queued_flood():
    assert finish_order("fcfs").index("cold") == 6
    assert finish_order("lpm").index("cold") == 6  # the flood's cached prefix always wins
    assert finish_order("fair").index("cold") <= 1


def test_a_request_past_its_queue_deadline_ends_with_queue_timeout_and_holds_nothing():
    engine = new_engine(max_running=1).start()
    try:
        long_one = [1, 2, 3, 4, 5]
        finals = []
        engine.submit(long_one, SamplingParams(max_tokens=60), lambda out: out.is_finished and finals.append(out))
        with pytest.raises(QueueTimeoutError):
            engine.generate_sync([7, 8, 9, 10, 11, 12], SamplingParams(max_tokens=4), queue_timeout_s=0.001, timeout=30)
        assert engine.generate_sync(long_one, SamplingParams(max_tokens=2), timeout=30).error is None
        assert finals[0].output_token_ids == reference_greedy(long_one, 60)
        assert engine.stats()["num_queue_timeouts"] == 1
    finally:
        engine.shutdown()
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_pages, "pages leaked"


def test_a_request_may_shorten_its_queue_wait_but_never_lengthen_it():
    engine = new_engine(max_queue_wait_s=5.0)
    core = engine._core
    params = SamplingParams()
    longer = core.make_request("a", [1, 2], params, "n", lambda out: None, queue_timeout_s=1e6)
    shorter = core.make_request("b", [1, 2], params, "n", lambda out: None, queue_timeout_s=0.5)
    internal = core.make_request("c", [1, 2], params, "n", lambda out: None, is_counted=False)
    assert longer.queue_deadline_s - longer.arrival_s == 5.0
    assert shorter.queue_deadline_s - shorter.arrival_s == 0.5
    assert internal.queue_deadline_s is None  # pin prefills never time out


def test_only_requests_never_scheduled_expire():
    engine = new_engine(max_queue_wait_s=1.0)
    scheduler = engine._core.scheduler
    outputs = []
    preempted = engine._core.make_request("p", [1, 2, 3], SamplingParams(), "n", outputs.append)
    preempted.num_cached_tokens = 0  # it ran once, then was preempted back into the queue
    fresh = engine._core.make_request("f", [1, 2, 3], SamplingParams(), "n", outputs.append)
    scheduler.waiting.extend([preempted, fresh])
    scheduler.expire_waiting(fresh.arrival_s + 0.5)
    assert list(scheduler.waiting) == [preempted, fresh]
    scheduler.expire_waiting(fresh.arrival_s + 1.0)
    assert list(scheduler.waiting) == [preempted]
    assert [(o.request_id, type(o.error)) for o in outputs] == [("f", QueueTimeoutError)]


def test_weights_and_queue_timeouts_are_validated_at_submit():
    engine = new_engine()
    with pytest.raises(ValueError):
        engine.submit([1, 2], SamplingParams(), lambda out: None, weight=0)
    with pytest.raises(ValueError):
        engine.submit([1, 2], SamplingParams(), lambda out: None, queue_timeout_s=0)



def finish_order_with_full_slots(policy: str) -> tuple[list[str], dict]:
    """Two flood requests take both slots and decode 40 tokens each; a cold request arrives with their
    first token. Checks every output against the unbatched reference and the pages; returns the finish
    order and the engine's stats."""
    engine = new_engine(policy=policy, max_running=2)
    order: list[str] = []
    floods = {f"flood{i}": SHARED + [60 + i, 61] for i in range(2)}
    cold = [90, 91, 92, 93, 94]
    finals: dict = {}

    def emit_for(name):
        def emit(out):
            if name != "cold" and "cold" not in finals:  # a flood's first token: both run; the cold one comes
                finals["cold"] = None
                engine.submit(cold, SamplingParams(max_tokens=2), emit_for("cold"), fairness_key="cold")
            if out.is_finished:
                order.append(name)
                finals[name] = out
                if len(order) == 3:
                    engine.shutdown()
        return emit

    for name, prompt in floods.items():
        engine.submit(prompt, SamplingParams(max_tokens=40), emit_for(name), fairness_key="flood")
    engine.run_here()
    assert finals["cold"].output_token_ids == reference_greedy(cold, 2)
    for name, prompt in floods.items():
        assert finals[name].output_token_ids == reference_greedy(prompt, 40), f"{name} changed by preemption"
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_pages, "pages leaked"
    return order, engine.stats()


def test_the_fair_policy_frees_a_slot_for_a_key_that_runs_nothing_and_the_preempted_request_resumes_exactly():
    order, stats = finish_order_with_full_slots("fair")
    assert order[0] == "cold" and stats["num_preemptions"] == 1
    order, stats = finish_order_with_full_slots("lpm")  # without slot sharing the cold one waits for a flood
    assert order.index("cold") >= 1 and stats["num_preemptions"] == 0


def test_slots_move_only_from_a_key_running_two_more_and_never_straight_back():
    engine = new_engine(policy="fair", max_running=3)
    scheduler = engine._core.scheduler
    made = {}

    def request(rid, key):
        made[rid] = engine._core.make_request(rid, [1, 2, 3, len(made)], SamplingParams(), "n", lambda out: None,
                                              fairness_key=key)
        return made[rid]

    scheduler.running.extend([request("a1", "a"), request("a2", "a"), request("b1", "b")])
    scheduler.waiting.append(request("b2", "b"))
    scheduler.share_slots()  # a runs 2, b runs 1: one apart, nothing moves
    assert [r.request_id for r in scheduler.running] == ["a1", "a2", "b1"]
    scheduler.waiting.append(request("c1", "c"))
    for req in scheduler.running:  # share_slots releases through the cache: give them nothing to release
        req.pages = []
    scheduler.share_slots()  # c runs none, a runs 2: a's newest yields
    assert [r.request_id for r in scheduler.running] == ["a1", "b1"]
    assert scheduler.waiting[0].request_id == "a2"
