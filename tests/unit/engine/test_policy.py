"""Waiting-queue policies: fcfs keeps arrival order, lpm sorts by cached prefix, dfs-weight clusters branches."""

import pytest

from engine.policy import order_waiting
from engine.request import Request
from engine.sampler import make_generator
from engine.sampling_params import SamplingParams


def request(name: str, tokens: list[int], namespace: str = "n") -> Request:
    return Request(name, tokens, SamplingParams(), namespace, detokenizer=None, generator=make_generator(0),
                   emit=lambda out: None)


A = [1, 1, 1, 1, 2, 2, 2, 2]
B = [3, 3, 3, 3, 4, 4, 4, 4]


def names(reqs):
    return [r.request_id for r in reqs]


def test_fcfs_keeps_arrival_order():
    reqs = [request(str(i), [i] * 8) for i in range(4)]
    assert names(order_waiting("fcfs", reqs, lambda r: 0, 4)) == ["0", "1", "2", "3"]


def test_lpm_puts_longest_cached_prefix_first_and_keeps_ties_in_order():
    reqs = [request("a", A), request("b", B), request("c", A + [9]), request("d", [7] * 8)]
    cached = {"a": 4, "b": 8, "c": 8, "d": 0}
    assert names(order_waiting("lpm", reqs, lambda r: cached[r.request_id], 4)) == ["b", "c", "a", "d"]


def test_dfs_weight_runs_the_heaviest_branch_first_and_keeps_branches_together():
    reqs = [request("b1", B + [1, 2, 3, 4]), request("a1", A + [5, 5, 5, 5]), request("b2", B + [6, 6, 6, 6]),
            request("a2", A + [7, 7, 7, 7]), request("b3", B[:4] + [8, 8, 8, 8])]
    order = names(order_waiting("dfs-weight", reqs, lambda r: 0, 4))
    assert order[:3] == ["b1", "b2", "b3"] and sorted(order[3:]) == ["a1", "a2"]


def test_dfs_weight_orders_namespaces_by_weight():
    reqs = [request("x", A, "small"), request("y1", B, "big"), request("y2", B, "big")]
    assert names(order_waiting("dfs-weight", reqs, lambda r: 0, 4)) == ["y1", "y2", "x"]


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError):
        order_waiting("random", [], lambda r: 0, 4)


def test_dfs_weight_prefers_a_resident_branch_over_a_heavier_cold_one():
    reqs = [request("b1", B + [1] * 4), request("b2", B + [2] * 4), request("a1", A + [5] * 4)]
    cached = {"b1": 0, "b2": 0, "a1": 8}
    order = names(order_waiting("dfs-weight", reqs, lambda r: cached[r.request_id], 4))
    assert order == ["a1", "b1", "b2"]
