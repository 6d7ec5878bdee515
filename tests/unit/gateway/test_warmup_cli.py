"""`radixgate warmup` on stand-in engine functions: a step reports "cached" when the engine finds its cache and
a timing when it had to build, calls the engine's own build either way, and names a model it cannot cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import engine
from gateway.cli import app


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    """Stands in for the engine's builds: nothing cached; each call is recorded."""
    seen: list[str] = []
    monkeypatch.setattr(engine, "is_native_built", lambda: False)
    monkeypatch.setattr(engine, "native_kernels", lambda: seen.append("native") or object())
    monkeypatch.setattr(engine, "is_model_cached", lambda spec, cache_root=None: False)

    def resolve(spec, cache_root):
        seen.append(spec)
        return Path("/cache") / spec, spec

    monkeypatch.setattr(engine, "resolve_model_dir", resolve)
    return seen


def test_warmup_builds_both_and_times_each_step(calls):
    result = CliRunner().invoke(app, ["warmup", "--model", "tiny"])
    assert result.exit_code == 0, result.output
    assert calls == ["native", "tiny"]
    assert "compiling native kernels ... done in" in result.output
    assert "dequantizing model tiny ... done in" in result.output


def test_warmup_reports_cached_steps_without_a_build_line(calls, monkeypatch):
    monkeypatch.setattr(engine, "is_native_built", lambda: True)
    monkeypatch.setattr(engine, "is_model_cached", lambda spec, cache_root=None: True)
    result = CliRunner().invoke(app, ["warmup", "--model", "tiny"])
    assert result.exit_code == 0, result.output
    assert "native kernels: cached" in result.output and "model tiny: cached at /cache/tiny" in result.output
    assert "compiling" not in result.output and "dequantizing" not in result.output


def test_warmup_takes_the_model_from_the_engine_settings(calls):
    result = CliRunner().invoke(app, ["warmup"], env={"RADIXGATE_ENGINE__MODEL": "from-env"})
    assert result.exit_code == 0, result.output
    assert calls == ["native", "from-env"]


def test_warmup_goes_on_without_native_kernels_the_engine_could_not_build(calls, monkeypatch):
    monkeypatch.setattr(engine, "native_kernels", lambda: None)
    result = CliRunner().invoke(app, ["warmup", "--model", "tiny"])
    assert result.exit_code == 0, result.output
    assert "native kernels: not available" in result.output and calls == ["tiny"]


def test_warmup_names_a_model_it_cannot_cache(calls, monkeypatch):
    def missing(spec, cache_root):
        raise FileNotFoundError(f"model path {spec!r} does not exist")

    monkeypatch.setattr(engine, "resolve_model_dir", missing)
    result = CliRunner().invoke(app, ["warmup", "--model", "/no/such.gguf"])
    assert result.exit_code == 2
    assert "cannot cache model '/no/such.gguf'" in result.output


def test_warmup_follows_the_engine_settings_for_the_cache_and_the_native_switch(calls, monkeypatch, tmp_path):
    roots = []
    monkeypatch.setattr(engine, "is_model_cached", lambda spec, cache_root=None: roots.append(cache_root) or False)
    env = {"RADIXGATE_NATIVE_KERNELS": "0", "RADIXGATE_CACHE_DIR": str(tmp_path)}
    result = CliRunner().invoke(app, ["warmup", "--model", "tiny"], env=env)
    assert result.exit_code == 0, result.output
    assert calls == ["tiny"] and "native kernels: switched off" in result.output
    assert roots == [tmp_path / "models"]
