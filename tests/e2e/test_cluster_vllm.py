"""An edge gateway in front of two real vLLM CPU servers: the agent workload routed by affinity,
and tenant salts end to end by vLLM's own cached_tokens. Skips (saying why) without a vLLM venv
(RADIXGATE_VLLM_VENV, see tests/support/vllm_server.py)."""

from __future__ import annotations

import pytest

from bench.cluster.fleet import Fleet, Remote
from bench.cluster.run import run_mode
from bench.cluster.salts import salt_check
from bench.workloads.agent import generate_workload
from tests.support.vllm_server import SERVED_NAME, default_model_dir, vllm_python, vllm_server

pytestmark = pytest.mark.slow


def test_edge_routes_onto_vllm_and_keeps_tenants_caches_apart():
    python, model_dir = vllm_python(), default_model_dir()
    with vllm_server(python, model_dir, 0) as first, vllm_server(python, model_dir, 1) as second:
        remotes = [Remote("vllm0", f"{first.url}/v1", kind="vllm", model=SERVED_NAME),
                   Remote("vllm1", f"{second.url}/v1", kind="vllm", model=SERVED_NAME)]
        with Fleet.in_front_of(remotes, ["affinity"]) as fleet:
            rows = [{**r, "body": {**r["body"], "tool_choice": "none"}} if r["body"].get("tools") else r
                    for r in generate_workload(9, seed=2)]
            result = run_mode(fleet.edges["affinity"], "affinity", rows, max_tokens=2)
            assert result["lost"] == 0 and result["completed"] == len(rows)
            assert result["hit_rate"] > 0 and result["predicted_hit_rate"] is not None
            salt_edge = fleet.add_edge("salts", remotes[:1])
            salts = salt_check(salt_edge.url, salt_edge.admin_key)
    print(f"\nvLLM affinity hit rate {result['hit_rate']:.3f}; salts {salts['cached_tokens']}")
    assert salts["apart_share_nothing"] and salts["group_shares"] and salts["same_tenant_hits"]
