"""A real fleet on loopback: three `radixgate serve` nodes (embedded engine each) and an edge
(`serve --no-engine`, affinity routing) in front of them, replaying the agent workload.

Shown: the fleet behind an affinity edge keeps one node's hit rate on the same traffic, and a
random edge (seeded, so the run is reproducible) does clearly worse; killing a node mid-run loses
no request that had not yet streamed a token (they fail over); the edge reports the node down, and
up again once it is restarted. (`radixgate bench cluster` measures every routing mode.)
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from bench.cluster.fleet import Fleet
from bench.cluster.run import run_cluster_bench, run_mode, warm_up
from bench.workloads.agent import generate_workload

pytestmark = pytest.mark.slow

NUM_NODES = 3
NUM_REQUESTS = 12
KILLED = 1
RECOVERY_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def fleet():
    with Fleet.local(num_nodes=NUM_NODES, modes=["affinity", "random"], kv_cache_tokens=16384,
                     edge_env={"RADIXGATE_ROUTING__SEED": "7"}) as started:
        yield started


@pytest.fixture(scope="module")
def rows():
    return generate_workload(NUM_REQUESTS, seed=5)


def node_states(edge) -> dict[str, str]:
    response = httpx.get(f"{edge.url}/admin/backends", headers={"Authorization": f"Bearer {edge.admin_key}"}, timeout=10)
    return {b["name"]: b["state"] for b in response.json()["backends"]}


def test_affinity_keeps_one_nodes_hit_rate_and_random_routing_does_not(fleet, rows):
    result = run_cluster_bench(fleet, rows, modes=["affinity", "random"], max_tokens=2)
    for name, figures in result.items():
        print(f"{name:>8}: hit rate {figures['hit_rate']:.3f} predicted {figures['predicted_hit_rate']} "
              f"requests {figures['requests']} per node {figures.get('per_node_requests')}")
        assert figures["lost"] == 0 and figures["completed"] == NUM_REQUESTS, figures
    single, affinity, random_ = (result[name]["hit_rate"] for name in ("single", "affinity", "random"))
    assert affinity >= single - 0.05, result
    assert random_ <= affinity - 0.05, result
    assert result["affinity"]["predicted_hit_rate"] == pytest.approx(affinity, abs=0.02), result


def test_killing_a_node_mid_run_loses_nothing_unstreamed_and_the_edge_sees_it_leave_and_return(fleet, rows):
    warm_up(fleet, rows)
    edge = fleet.edges["affinity"]
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            state = node_states(edge)[f"node{KILLED}"]
            if not seen or seen[-1] != state:
                seen.append(state)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    killed = threading.Event()

    def kill_after_a_few(num_done: int) -> None:
        if num_done == 3 and not killed.is_set():
            killed.set()
            fleet.kill_node(KILLED)

    try:
        result = run_mode(edge, "affinity", rows, max_tokens=2, during=kill_after_a_few)
        assert killed.is_set()
        assert result["lost"] == 0, result["lost_detail"]
        assert result["completed"] + result["failed_after_first_token"] == NUM_REQUESTS
        fleet.restart_node(KILLED)
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while seen[-1] != "up" and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        watcher.join(timeout=5)
    assert "down" in seen and seen[-1] == "up" and seen.index("down") < len(seen) - 1, seen
