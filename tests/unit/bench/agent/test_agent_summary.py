"""The agent bench's summary computes token-weighted hit rates and ratios from the two passes."""

from bench.agent.run import RunResult, summarize


def test_summary_reports_token_weighted_hit_rates_and_ratios():
    raw, canonical = RunResult(is_canonical=False, wall_s=20.0), RunResult(is_canonical=True, wall_s=10.0)
    for prompt, cached in ((100, 0), (300, 100)):
        raw.total.add(prompt, cached)
        raw.by_tenant["t"].add(prompt, cached)
    for prompt, cached in ((100, 0), (300, 280)):
        canonical.total.add(prompt, cached)
        canonical.by_tenant["t"].add(prompt, cached)
    result = summarize(raw, canonical, 0.2)
    assert (result["hit_rate_raw"], result["hit_rate_canonical"]) == (0.25, 0.7)
    assert result["hit_rate_ratio"] == 2.8 and result["wall_speedup"] == 2.0
    assert result["requests"] == 2 and result["prompt_tokens"] == 400
    assert {"requests", "hit_rate_raw", "hit_rate_canonical", "prompt_tokens", "wall_s_raw", "wall_s_canonical"} <= set(result)
