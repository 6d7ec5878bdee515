"""Hit-rate truth: one workload replayed through the real server twice (raw tenants, then canonical
tenants); what the doctor tells each raw tenant is what canonicalization then delivers.

The raw tenants' figures come from `radixgate doctor --json` (the real CLI on the server's
database); the measured ones from the API's usage of the canonical pass. The test prints the
issue's table with the new figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import httpx
import pytest

from bench.agent.run import GatewayClient, replay
from bench.workloads.agent import generate_workload
from tests.support.server_process import RADIXGATE

pytestmark = pytest.mark.slow

NUM_REQUESTS = int(os.environ.get("RADIXGATE_TEST_REPLAY_REQUESTS", "30"))  # more for a tighter check
MAX_TOKENS = 1
LOG_TIMEOUT_S = 60
HIT_RATE_POINTS = 0.03
SPEEDUP_TOLERANCE = 0.15


def wait_for_requests(server, key: str, num_requests: int) -> None:
    """Until the request log holds the tenant's rows (written in batches, off the hot path)."""
    deadline = time.monotonic() + LOG_TIMEOUT_S
    while time.monotonic() < deadline:
        stats = httpx.get(f"{server.url}/v1/stats", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
        if stats["requests"] >= num_requests:
            return
        time.sleep(0.5)
    raise AssertionError(f"the request log never reached {num_requests} rows")


def doctor_json(server, tenant_name: str) -> dict:
    completed = subprocess.run(
        [str(RADIXGATE), "doctor", "--tenant", tenant_name, "--db", server.db_url, "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    return json.loads(completed.stdout)


def uncached(tally) -> int:
    return tally.prompt_tokens - tally.cached_tokens


def test_raw_tenants_are_told_what_canonicalization_delivers(gateway_server, capsys):
    rows = [{**row, "body": {**row["body"], "max_tokens": MAX_TOKENS}} for row in generate_workload(NUM_REQUESTS, seed=0)]
    client = GatewayClient(gateway_server.base_url, gateway_server.admin_key)
    try:
        raw = replay(client, rows, is_canonical=False)
        canonical = replay(client, rows, is_canonical=True)
    finally:
        client.close()
    assert raw.errors == [] and canonical.errors == []
    lines = [f"| tenant traffic (first {NUM_REQUESTS} requests) | actual (raw order) | canonical counterfactual shown "
             "| measured when canonicalized | speedup if canonicalized shown | measured uncached-token ratio |",
             "|---|---|---|---|---|---|"]
    failures = []
    for tenant, name in raw.tenant_names.items():
        wait_for_requests(gateway_server, raw.tenant_keys[tenant], raw.by_tenant[tenant].requests)
        shown = doctor_json(gateway_server, name)
        measured_rate = canonical.by_tenant[tenant].hit_rate
        measured_ratio = uncached(raw.by_tenant[tenant]) / uncached(canonical.by_tenant[tenant])
        speedup = (shown["canonicalize_speedup"] or {}).get("speedup")
        lines.append(f"| {tenant} | {shown['hit_rate']:.1%} | {shown['canonical_hit_rate']:.1%} | {measured_rate:.1%} "
                     f"| {speedup or 0:.2f}x | {measured_ratio:.2f}x |")
        assert shown["attainable_hit_rate"] == shown["canonical_hit_rate"]
        if abs(shown["canonical_hit_rate"] - measured_rate) > HIT_RATE_POINTS:
            failures.append(f"{tenant}: canonical counterfactual {shown['canonical_hit_rate']:.3f} vs measured {measured_rate:.3f}")
        if speedup is None or abs(speedup / measured_ratio - 1) > SPEEDUP_TOLERANCE:
            failures.append(f"{tenant}: speedup if canonicalized {speedup} vs measured {measured_ratio:.3f}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert failures == []
