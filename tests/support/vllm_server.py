"""A vLLM CPU OpenAI server in its own venv (never a dependency), for the fleet tests.

RADIXGATE_VLLM_VENV names the venv (made by ../shared/bench/setup_vllm_cpu.sh); without it the
tests that need vLLM skip and say why. The model is the default one's HF directory, the
safetensors cache radixgate writes under ~/.cache/radixgate/models/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


VENV_ENV = "RADIXGATE_VLLM_VENV"
SERVED_NAME = "smollm2"


def vllm_python() -> Path:
    venv = os.environ.get(VENV_ENV)
    if not venv:
        pytest.skip(f"no vLLM venv configured: set {VENV_ENV} to a venv made by ../shared/bench/setup_vllm_cpu.sh")
    python = Path(venv) / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"{VENV_ENV}={venv} has no bin/python")
    return python


def default_model_dir() -> Path:
    from engine import resolve_model_dir

    return resolve_model_dir("smollm2-135m", None)[0]


def vllm_server(python: Path, model_dir: Path, index: int = 0):
    """The bench's vLLM server (bench/http_peers.py) as the fleet tests start it: bfloat16,
    1 GB of KV; the tests run two side by side, so server `index` gets half the cores, its own half;
    a context manager whose `url` has no /v1."""
    from bench.cluster.fleet import threads_per_node
    from bench.http_peers import VllmServer

    per_server = threads_per_node(2)
    first = index * per_server % (os.cpu_count() or 1)
    cores = str(first) if per_server == 1 else f"{first}-{first + per_server - 1}"
    return VllmServer(str(python), model_dir, SERVED_NAME, dtype="bfloat16", num_threads=per_server,
                      kv_cache_gb=1, cpu_bind=cores)
