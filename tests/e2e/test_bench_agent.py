"""`bench agent` end to end against the real server: both passes, fresh tenants, usage-derived figures."""

from __future__ import annotations

import pytest

from bench.agent.run import run_agent_bench
from bench.workloads.agent import generate_workload

pytestmark = pytest.mark.slow


def test_bench_agent_replays_both_orders_and_reports_the_issue_keys(gateway_server):
    rows = [r for r in generate_workload(60, seed=3) if r["tenant"] == "lexbase"][:6]
    result = run_agent_bench(gateway_server.base_url, gateway_server.admin_key, rows)
    assert result["errors"] == []
    assert result["requests"] == len(rows) and result["prompt_tokens"] > 0
    assert 0.0 <= result["hit_rate_raw"] <= 1.0 and 0.0 < result["hit_rate_canonical"] <= 1.0
    assert result["wall_s_raw"] > 0 and result["wall_s_canonical"] > 0
    assert result["shadow_hit_rate_raw_order"] is not None
    assert result["cached_tokens_canonical"] >= result["cached_tokens_raw"]
