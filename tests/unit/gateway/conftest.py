"""Fixtures for the canonicalizer and template tests: the shared agent/RAG workload
(the real SmolLM2 tokenizer fixture is in tests/unit/conftest.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import REPO_ROOT


@pytest.fixture(scope="session")
def agent_rag_rows(shared_dir) -> list[dict]:
    path = shared_dir / "workloads" / "agent_rag_300.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def registry():
    from gateway.prompt_templates import TemplateRegistry

    return TemplateRegistry(REPO_ROOT / "templates")
