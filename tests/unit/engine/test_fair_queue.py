"""The fair policy (engine.fair_queue): fair across keys on computed tokens, longest cached prefix first within one."""

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.fair_queue import FairQueue
from engine.request import Request
from engine.sampler import make_generator
from engine.sampling_params import SamplingParams


def request(name: str, key: str, num_tokens: int = 8, weight: float = 1.0) -> Request:
    return Request(name, [1 + i % 50 for i in range(num_tokens)], SamplingParams(), "ns", detokenizer=None,
                   generator=make_generator(0), emit=lambda out: None, fairness_key=key, weight=weight)


def names(reqs):
    return [r.request_id for r in reqs]


def test_a_key_that_was_served_less_goes_first_even_when_it_arrived_last():
    queue = FairQueue()
    heavy = [request(f"h{i}", "heavy") for i in range(3)]
    light = request("l0", "light")
    queue.order([*heavy, light], lambda r: 0)  # both active
    queue.charge(heavy[0], 500)
    queue.charge(light, 10)
    assert names(queue.order([*heavy[1:], request("l1", "light")], lambda r: 0)) == ["l1", "h1", "h2"]


def test_a_newcomer_ties_with_the_least_served_key_and_wins_the_tie_over_a_key_with_requests_running():
    queue = FairQueue()
    heavy = [request(f"h{i}", "heavy") for i in range(4)]
    queue.order(heavy, lambda r: 0)
    queue.charge(heavy[0], 500)
    assert names(queue.order([*heavy[1:], request("c0", "cold")], lambda r: 0, [heavy[0]])) == ["c0", "h1", "h2", "h3"]
    assert queue.counter("cold") == queue.counter("heavy")


def test_within_a_key_the_longest_cached_prefix_goes_first_ties_in_arrival_order():
    queue = FairQueue()
    reqs = [request(n, "k", 32) for n in "abcd"]
    cached = {"a": 0, "b": 16, "c": 0, "d": 16}
    assert names(queue.order(reqs, lambda r: cached[r.request_id])) == ["b", "d", "a", "c"]


def test_keys_interleave_by_the_uncached_tokens_each_request_costs():
    queue = FairQueue()
    warm = [request(f"w{i}", "warm", 40) for i in range(4)]  # 36 of 40 cached: costs 4 each
    cold = [request(f"c{i}", "cold", 12) for i in range(2)]  # costs 12 each
    cached = {r.request_id: 36 for r in warm} | {r.request_id: 0 for r in cold}
    # warm 0, cold 0 tie -> warm (arrived first); then cold 0 < warm 4; warm 4, 8 < cold 12; at 12 each, cold
    # wins the tie (fewer of its requests ahead)
    assert names(queue.order([*warm, *cold], lambda r: cached[r.request_id])) == ["w0", "c0", "w1", "w2", "c1", "w3"]


def test_a_newcomer_starts_at_the_smallest_active_counter_not_at_zero():
    queue = FairQueue()
    a, b = request("a", "A"), request("b", "B")
    queue.order([a, b], lambda r: 0)
    queue.charge(a, 100)
    queue.charge(b, 300)
    queue.order([a, b], lambda r: 0)
    queue.order([a, b, request("c", "C")], lambda r: 0)
    assert queue.counter("C") == 100  # idle time banks no credit


def test_an_idle_engine_forgets_every_counter():
    queue = FairQueue()
    a = request("a", "A")
    queue.order([a], lambda r: 0)
    queue.charge(a, 1000)
    queue.order([], lambda r: 0)
    queue.order([request("b", "B")], lambda r: 0)
    assert queue.counter("A") == 0.0


def test_weights_share_computed_tokens_in_proportion():
    queue = FairQueue()
    waiting = [request(f"a{i}", "A", weight=2.0) for i in range(300)] + [request(f"b{i}", "B") for i in range(300)]
    served = {"A": 0, "B": 0}
    for _ in range(300):
        first = queue.order(waiting, lambda r: 0)[0]
        waiting.remove(first)
        queue.charge(first, first.num_tokens)
        served[first.fairness_key] += first.num_tokens
    assert served["A"] == 2 * served["B"]


# ---- properties ---------------------------------------------------------
key_st = st.sampled_from("ABCD")
req_st = st.tuples(key_st, st.integers(1, 12), st.integers(0, 11))  # key, cost (uncached tokens), cached tokens


@settings(max_examples=60, deadline=None)
@given(st.lists(req_st, min_size=1, max_size=30), st.dictionaries(key_st, st.integers(0, 50)),
       st.lists(key_st, max_size=2))
def test_order_is_a_permutation_with_each_key_in_longest_prefix_order(specs, charges, running_keys):
    queue = FairQueue()
    waiting = [request(str(i), key, cost + cached) for i, (key, cost, cached) in enumerate(specs)]
    cached = {str(i): c for i, (_, _, c) in enumerate(specs)}
    running = [request(f"r{k}", k) for k in running_keys]
    queue.order(waiting + running, lambda r: 0)
    for key, amount in charges.items():
        queue.charge(request("x", key), amount)
    ordered = queue.order(waiting, lambda r: cached.get(r.request_id, 0), running)
    assert sorted(names(ordered)) == sorted(names(waiting))  # work conservation: nothing dropped or doubled
    for key in "ABCD":
        mine = [r for r in ordered if r.fairness_key == key]
        lengths = [(-cached[r.request_id], int(r.request_id)) for r in mine]
        assert lengths == sorted(lengths)


@settings(max_examples=60, deadline=None)
@given(st.lists(req_st, min_size=1, max_size=40))
def test_no_key_waits_more_than_a_bounded_number_of_admissions(specs):
    """All requests queued at once, one admitted per round and charged its cost: while key k waits,
    every other key is admitted at most (max cost + 1) times before k's next turn."""
    queue = FairQueue()
    waiting = [request(str(i), key, cost + cached) for i, (key, cost, cached) in enumerate(specs)]
    cached = {str(i): c for i, (_, _, c) in enumerate(specs)}
    max_cost = max(cost for _, cost, _ in specs)
    num_keys = len({key for key, _, _ in specs})
    since_served = {key: 0 for key, _, _ in specs}
    while waiting:
        first = queue.order(waiting, lambda r: cached[r.request_id])[0]
        waiting.remove(first)
        queue.charge(first, first.num_tokens - cached[first.request_id])
        for key in since_served:
            since_served[key] = 0 if key == first.fairness_key else since_served[key] + 1
        waiting_keys = {r.fairness_key for r in waiting}
        assert all(since_served[k] <= (num_keys - 1) * (max_cost + 1) for k in waiting_keys)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), req_st), min_size=1, max_size=40))
def test_while_a_key_waits_no_other_key_is_admitted_more_than_max_cost_plus_one_times(arrivals):
    """Arrivals over time (keys go idle and come back), one admission per round, each charged its cost."""
    queue = FairQueue()
    pending = sorted(((t, i, spec) for i, (t, spec) in enumerate(arrivals)), key=lambda x: (x[0], x[1]))
    max_cost = max(cost for _, (_, cost, _) in arrivals)
    waiting: list[Request] = []
    cached: dict[str, int] = {}
    admitted_since: dict[str, dict[str, int]] = {}  # waiting key -> admissions of each other key since it last led
    round_index = 0
    while pending or waiting:
        while pending and pending[0][0] <= round_index:
            _, i, (key, cost, num_cached) = pending.pop(0)
            admitted_since.setdefault(key, {})
            waiting.append(request(str(i), key, cost + num_cached))
            cached[str(i)] = num_cached
        round_index += 1
        first = queue.order(waiting, lambda r: cached[r.request_id])[0] if waiting else None
        if first is None:
            continue
        waiting.remove(first)
        queue.charge(first, first.num_tokens - cached[first.request_id])
        admitted_since[first.fairness_key] = {}
        for key, others in admitted_since.items():
            if key != first.fairness_key:
                others[first.fairness_key] = others.get(first.fairness_key, 0) + 1
                assert others[first.fairness_key] <= max_cost + 1
        still_waiting = {r.fairness_key for r in waiting}
        admitted_since = {k: v for k, v in admitted_since.items() if k in still_waiting}


def test_cached_prompt_tokens_cost_their_fraction_so_an_all_hit_flood_is_not_counted_idle():
    queue = FairQueue(cached_token_cost=0.5)
    hits = [request(f"h{i}", "hits", num_tokens=300) for i in range(3)]
    cold = request("c0", "cold", num_tokens=60)
    cached = {id(r): 296 for r in hits} | {id(cold): 0}
    queue.order([*hits, cold], lambda r: cached[id(r)])
    queue.charge_cached(hits[0], 296)
    queue.charge(hits[0], 4 + 8)  # its uncached tail and 8 decoded tokens
    queue.charge(cold, 60 + 4)
    assert queue.counter("hits") == 0.5 * 296 + 12 > queue.counter("cold")
    assert names(queue.order([*hits[1:], request("c1", "cold", num_tokens=60)], lambda r: cached.get(id(r), 0)))[0] == "c1"
    assert FairQueue().counter("x") == 0.0 and FairQueue(0.0).cached_token_cost == 0.0
