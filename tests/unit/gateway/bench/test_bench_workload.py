"""The generated agent/RAG workload has the shared workload's shape, and the canonicalizer recovers
what each style scrambled; the bench summary computes token-weighted hit rates."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from gateway.bench.agent.run import RunResult, summarize
from gateway.bench.workloads.agent import STYLES, generate_workload, load_workload, write_workload
from gateway.canonicalize import canonicalize


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return generate_workload(300, seed=0)


def test_generated_workload_has_the_shared_shape(rows):
    assert len(rows) == 300
    assert {r["tenant"] for r in rows} == {"acme-support", "lexbase", "devpilot"}
    assert set(Counter(r["style"] for r in rows)) == set(STYLES)
    for row in rows:
        assert set(row) == {"id", "tenant", "style", "body", "canonical"}
        assert row["body"]["messages"][-1]["role"] == "user" and row["body"]["max_tokens"] == 8
        assert set(row["canonical"]) == {"system", "tools", "context", "history", "dynamic", "question"}


def test_generation_is_seeded(rows):
    assert generate_workload(300, seed=0) == rows
    assert generate_workload(300, seed=1) != rows


def test_canonicalizer_recovers_every_styles_static_sections(rows):
    for row in rows:
        sections = canonicalize(row["body"])
        expected = row["canonical"]
        assert sections.system == expected["system"], (row["id"], row["style"])
        assert [d.id for d in sections.context] == expected["context"], (row["id"], row["style"])
        assert [t["function"]["name"] for t in sections.tools] == sorted(t["function"]["name"] for t in expected["tools"])
        assert sections.question.strip() == expected["question"]


def test_workload_round_trips_through_jsonl(rows, tmp_path):
    path = tmp_path / "w.jsonl"
    write_workload(rows[:5], path)
    assert load_workload(path) == json.loads(json.dumps(rows[:5]))


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
