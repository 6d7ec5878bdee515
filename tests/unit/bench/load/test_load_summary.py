"""bench load's bookkeeping: round summaries, the page balance and the invariants it reports."""

from __future__ import annotations

from bench.load.run import RoundResult, page_balance, violations


def engine_stats(free: int, evictable_tokens: int, pinned_tokens: int) -> dict:
    return {"pool": {"num_pages": 10, "page_size": 16, "num_free_pages": free},
            "cache": {"evictable_tokens": evictable_tokens, "pinned_tokens": pinned_tokens}}


def test_round_summary_counts_503_share_other_5xx_and_incomplete_streams():
    result = RoundResult(seconds=2.0)
    result.add("agent", 200, 0.1, True, 5)
    result.add("agent", 200, 0.3, False, 5)
    result.add("rag", 503, None, False, 0)
    result.add("rag", 500, None, False, 0)
    summary = result.summary()
    assert summary["statuses"] == {"200": 2, "500": 1, "503": 1}
    assert (summary["share_503"], summary["num_5xx_not_503"], summary["num_incomplete_streams"]) == (0.25, 1, 1)
    assert summary["per_tenant"] == {"agent": {"num": 2, "ttft_p50_s": 0.2, "ttft_p99_s": 0.3}}
    assert summary["requests_per_s"] == 2.0


def test_pages_balance_only_when_free_evictable_and_pinned_cover_the_pool():
    assert page_balance(engine_stats(6, 48, 16))["is_balanced"]
    assert not page_balance(engine_stats(5, 48, 16))["is_balanced"]  # one page held by nobody
    assert page_balance(None) is None


def test_violations_name_each_broken_invariant():
    good = {**RoundResult(seconds=1.0).summary(), "num_requests": 3, "pages": page_balance(engine_stats(6, 48, 16))}
    bad = {**good, "num_5xx_not_503": 2, "num_incomplete_streams": 1, "pages": page_balance(engine_stats(5, 48, 16))}
    assert violations({"rounds": [good, good], "rss_growth": 0.05}) == []
    found = violations({"rounds": [good, bad], "rss_growth": 0.2})
    assert len(found) == 4 and all("round 2" in f for f in found[:3]) and "RSS grew" in found[3]
