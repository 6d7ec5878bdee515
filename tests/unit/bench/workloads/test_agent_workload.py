"""The generated agent/RAG workload has the shared workload's shape, and the canonicalizer recovers
what each style scrambled."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from bench.workloads.agent import STYLES, generate_workload, load_workload, write_workload
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
