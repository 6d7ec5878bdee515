"""bench fairness on a tiny generated workload with the real model: every pass balances its pages and
reports the cold tenant's TTFT alone and under a warm flood, and the flood's prefixes are hits."""

import pytest

from engine import EngineConfig
from bench.fairness.run import run_fairness_bench
from bench.fairness.workload import generate_workload

pytestmark = pytest.mark.slow


def test_fairness_bench_reports_both_modes_per_policy_with_warm_flood_hits(smollm, runners):
    workload = generate_workload(smollm.tokenizer, num_cold=2, cold_words=8, prefix_words=60, num_flood_prompts=4,
                                 flood_concurrency=3, flood_max_tokens=2, cold_max_tokens=1, cold_gap_s=0.02)
    config = EngineConfig(model="smollm2-135m", dtype="float32", page_size=16, num_pages=256, max_running=2,
                          max_queue_wait_s=3600.0)
    result = run_fairness_bench(runners(256, 16), config, workload, policies=("fcfs", "fair"))
    assert set(result["policies"]) == {"fcfs", "fair"}
    for row in result["policies"].values():
        assert row["alone"]["flood_requests"] == 0 and row["flood"]["flood_requests"] == 4  # every flood prompt, once
        assert row["alone"]["hit_rate"] < 0.2 < row["flood"]["hit_rate"]  # cold prompts miss; the flood's hit
        assert 0 < row["alone"]["cold_ttft_p50_ms"] <= row["alone"]["cold_ttft_p99_ms"]
