"""Routing policies: affinity (sticky keys, cold keys to the least-loaded node, bounded load), the
baselines, overload and down nodes skipped, and the failover node."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gateway.routing.affinity import rank
from gateway.routing.policy import RoutingPolicy

NAMES = ["n0", "n1", "n2"]
UP = [True, True, True]


def order(policy: RoutingPolicy, key: str, loads=(0, 0, 0), admits=UP) -> list[int]:
    return policy.order(key, NAMES, admits=list(admits), loads=list(loads))


def test_idle_fleet_affinity_is_the_rendezvous_choice_and_sticks():
    policy = RoutingPolicy("affinity")
    for key in ("a", "b", "c", "d"):
        assert order(policy, key)[0] == rank(key, NAMES)[0]
        assert order(policy, key, loads=(5, 5, 5))[0] == rank(key, NAMES)[0]


def test_cold_key_goes_to_the_least_loaded_node_then_stays_there():
    policy = RoutingPolicy("affinity", epsilon=10.0)
    key = "cold"
    loads = [100, 100, 100]
    loads[rank(key, NAMES)[-1]] = 0
    chosen = order(policy, key, loads=loads)[0]
    assert chosen == rank(key, NAMES)[-1]
    assert order(policy, key, loads=(50, 50, 50))[0] == chosen


def test_bounded_load_moves_an_overloaded_sticky_key_to_its_next_ranked_node():
    policy = RoutingPolicy("affinity", epsilon=0.5, spill_floor_tokens=0)
    key = "hot"
    first = order(policy, key)[0]
    loads = [0, 0, 0]
    loads[first] = 1000
    moved = order(policy, key, loads=loads)[0]
    assert moved != first and moved == [i for i in rank(key, NAMES) if i != first][0]
    assert order(policy, key)[0] == first  # back once its load falls


def test_no_sticky_key_moves_while_its_node_is_under_the_spill_floor():
    policy = RoutingPolicy("affinity", epsilon=0.5, spill_floor_tokens=4000)
    key = "shared-node"
    first = order(policy, key)[0]
    loads = [0, 0, 0]
    loads[first] = 3999  # far over (1 + epsilon) x the mean, under the floor: the prefix stays put
    assert order(policy, key, loads=loads)[0] == first
    loads[first] = 4000
    assert order(policy, key, loads=loads)[0] != first


def test_down_and_overloaded_nodes_are_skipped_and_the_failover_is_the_least_loaded_other():
    policy = RoutingPolicy("least_load", overload_tokens=500)
    assert order(policy, "k", loads=(600, 10, 20)) == [1, 2]
    assert order(policy, "k", loads=(0, 10, 20), admits=(False, True, True)) == [1, 2]
    assert order(policy, "k", admits=(False, False, False)) == []
    assert order(policy, "k", loads=(600, 700, 800))[0] == 0  # all over: the threshold moves nothing


def test_round_robin_cycles_and_random_spreads():
    rr = RoutingPolicy("round_robin")
    assert [order(rr, "same")[0] for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    rnd = RoutingPolicy("random", rng=random.Random(7))
    assert len(Counter(order(rnd, "same")[0] for _ in range(60))) == 3


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown routing mode"):
        RoutingPolicy("sticky")


def test_precise_goes_where_the_prefix_really_is_within_the_bounded_load():
    policy = RoutingPolicy("precise", epsilon=0.5, spill_floor_tokens=0)
    key = "k"
    sticky = rank(key, NAMES)[0]
    holder = (sticky + 1) % 3
    cached = [0, 0, 0]
    cached[holder] = 64
    assert policy.order(key, NAMES, admits=UP, loads=[0, 0, 0], cached=cached)[0] == holder
    # the key now follows the cache: with nothing cached anywhere it stays on the holder
    assert policy.order(key, NAMES, admits=UP, loads=[0, 0, 0], cached=[0, 0, 0])[0] == holder
    # the most cached tokens win; equal figures go to the less loaded node
    assert policy.order(key, NAMES, admits=UP, loads=[0, 10, 0], cached=[32, 96, 96])[0] == 2
    # an overloaded holder is passed over for a node under the bound (the load rule stays)
    loads = [0, 0, 0]
    loads[holder] = 1000
    assert policy.order(key, NAMES, admits=UP, loads=loads, cached=cached, num_tokens=10)[0] != holder
    # a down holder is never chosen
    admits = [True, True, True]
    admits[holder] = False
    assert policy.order(key, NAMES, admits=admits, loads=[0, 0, 0], cached=cached)[0] != holder


def test_precise_without_any_cached_prefix_is_affinity():
    precise, affinity = RoutingPolicy("precise"), RoutingPolicy("affinity")
    for key in ("a", "b", "c", "d", "e"):
        assert precise.order(key, NAMES, admits=UP, loads=[0, 0, 0], cached=[0, 0, 0]) == order(affinity, key)
