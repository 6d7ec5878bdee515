"""`radixgate warmup` on the real default model into an empty cache folder: the first run dequantizes it,
a second run (a fresh process, as `make test` then `make serve` would start) finds both steps cached and
rebuilds nothing."""

from __future__ import annotations

import subprocess

import pytest
from typer.testing import CliRunner

from gateway.cli import app
from tests.support.server_process import RADIXGATE


@pytest.mark.slow
def test_second_warmup_finds_the_kernels_and_the_model_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("RADIXGATE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("RADIXGATE_ENGINE__MODEL", raising=False)
    first = CliRunner().invoke(app, ["warmup"])
    assert first.exit_code == 0, first.output
    assert "dequantizing model smollm2-135m ... done in" in first.output
    (weights,) = tmp_path.glob("models/*/model.safetensors")
    built_at = weights.stat().st_mtime_ns

    second = subprocess.run([str(RADIXGATE), "warmup"], capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "native kernels: cached" in second.stdout
    assert f"model smollm2-135m: cached at {weights.parent}" in second.stdout
    assert "compiling" not in second.stdout and "dequantizing" not in second.stdout
    assert weights.stat().st_mtime_ns == built_at
