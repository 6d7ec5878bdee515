"""bench fairness's verdict: the fair policy's cold TTFT ratio and its hit-rate gap to lpm, against the issue's bounds."""

from bench.fairness.run import verdict


def row(ratio: float, hit_rate: float) -> dict:
    return {"ttft_p50_ratio": ratio, "flood": {"hit_rate": hit_rate}}


def test_the_verdict_holds_only_within_3x_ttft_and_5_points_of_lpms_hit_rate():
    assert verdict({"lpm": row(40.0, 0.90), "fair": row(2.5, 0.86)})["holds"]
    assert not verdict({"lpm": row(40.0, 0.90), "fair": row(3.5, 0.90)})["holds"]
    assert not verdict({"lpm": row(40.0, 0.90), "fair": row(1.0, 0.84)})["holds"]
    assert verdict({"fcfs": row(9.0, 0.9)}) == {}  # nothing to compare without lpm and fair
