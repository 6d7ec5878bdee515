"""A vLLM CPU OpenAI server in its own venv (never a dependency), for the fleet tests.

RADIXGATE_VLLM_VENV names the venv (made by ../shared/bench/setup_vllm_cpu.sh); without it the
tests that need vLLM skip and say why. The model is the default one's HF directory, the
safetensors cache radixgate writes under ~/.cache/radixgate/models/.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from gateway.bench.server import free_port

VENV_ENV = "RADIXGATE_VLLM_VENV"
SERVED_NAME = "smollm2"
START_TIMEOUT_S = 600


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


class VllmServer:
    def __init__(self, python: Path, model_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = Path(tempfile.mkstemp(prefix="vllm-", suffix=".log")[1])
        self.command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
                        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(self.port),
                        "--max-model-len", "4096", "--dtype", "bfloat16",
                        "--enable-prefix-caching", "--enable-prompt-tokens-details"]
        self.env = {**os.environ, "OMP_NUM_THREADS": "2", "VLLM_CPU_KVCACHE_SPACE": "1"}
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> VllmServer:
        with open(self.log, "w") as out:
            self._process = subprocess.Popen(self.command, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self._process.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.__exit__()
        raise TimeoutError(f"vLLM did not become healthy: {self.log.read_text()[-3000:]}")

    def __exit__(self, *exc_info) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
