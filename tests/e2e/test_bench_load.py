"""`radixgate bench load`, briefly, against the session's real server: its invariants hold (no 5xx
but deliberate 503s, every stream ends with usage and [DONE], KV pages balance after each round,
RSS growth under 15%) and it reports per-tenant TTFTs; its timings are not asserted."""

from __future__ import annotations

import pytest

from bench.load.run import TENANTS, run_load_bench

pytestmark = pytest.mark.slow


def test_bench_load_invariants_hold_on_a_short_run(gateway_server):
    result = run_load_bench(gateway_server.url, gateway_server.admin_key, num_clients=4, seconds=3, max_tokens=6)
    assert result["violations"] == []
    for r in result["rounds"]:
        assert r["num_requests"] > 0 and set(r["statuses"]) <= {"200", "429", "503"}
        assert r["pages"]["is_balanced"]
        assert set(r["per_tenant"]) <= {name for name, _, _ in TENANTS}
    assert result["rss_growth"] is not None
