"""`radixgate bench rag`: the prefix-heavy RAG workload, radix cache on vs off (and baselines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from bench.engine_environment import environment_fields
from bench.output import verdict, write_json, write_plot

from bench.progress import progress_bars
from bench.threads import THREADS_HELP, set_torch_threads

TARGET_SPEEDUP = 6.4
TARGET_PREFILL_RATIO = 0.1
TARGET_BASELINE_SPEEDUP = 5.0  # over every baseline, cold-group mode
TARGET_VS_BEST_PEER = {"cold-group": 0.4, "serial": 0.5}  # radixgate's wall time over its best peer's (issue 21)


def register(app: typer.Typer) -> None:
    app.command("rag")(rag)


def rag(
    workload: Optional[Path] = typer.Option(None, help="RAG workload JSON (shared/workloads/rag_workload.json); default: generated."),
    serial: bool = typer.Option(False, "--serial", help="Send requests one after another instead of all at once."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here."),
    plot: Optional[Path] = typer.Option(None, help="Write a PNG bar chart here."),
    repeat: int = typer.Option(1, min=1, help="Passes per mode; wall times are medians."),
    warmup: int = typer.Option(1, min=0, help="Untimed passes first (the CPU kernels are picked and compiled on "
                                           "the first shapes); each baseline also warms up on a short prompt."),
    vs: list[str] = typer.Option([], "--vs", help="Also run a baseline: hf, llamacpp (in-process, repeatable); or "
                                 "vllm: `radixgate serve` vs a vLLM CPU server over HTTP (needs --workload with chat "
                                 "messages, and --vllm-python or --vllm-url). vllm with hf or llamacpp: both, then "
                                 "one table of every peer."),
    vllm_python: Optional[str] = typer.Option(None, "--vllm-python", help="Python of a venv with vLLM's CPU build "
                                              "(e.g. /tmp/vllm-venv/bin/python): the bench starts its server."),
    vllm_url: Optional[str] = typer.Option(None, "--vllm-url", help="A running vLLM server instead (its prefix "
                                           "cache is reset between passes only in its dev mode)."),
    device: str = typer.Option("auto", help="cpu | cuda | auto."),
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    dtype: str = typer.Option("auto", help="auto (the engine default: bfloat16 where it measures faster on this CPU, else float32) | float32 | bfloat16; outputs must match across modes."),
    quantization: str = typer.Option("none", help="radixgate's quantization: none | int8 | int4 | w4a8 | w8a8 | auto "
                                     "(the same for `radixgate serve` under --vs vllm; peers keep their own)."),
    max_batch_tokens: int = typer.Option(1024, help="Per-step token budget (chunked prefill)."),
    threads: int = typer.Option(0, help=THREADS_HELP),
) -> None:
    """Replay the RAG workload with the radix cache on and off in one run; print and write ratios."""
    from engine import EngineConfig
    from engine.runner import ModelRunner
    from bench.rag.baselines import BASELINES, run_baselines
    from bench.rag.run import run_rag_bench
    from bench.workloads.rag import generate_rag_workload, load_rag_workload

    if set(vs) - set(BASELINES) - {"vllm"}:
        raise typer.BadParameter(f"unknown baseline(s) {sorted(set(vs) - set(BASELINES) - {'vllm'})}; "
                                 "choose hf, llamacpp or vllm")
    set_torch_threads(threads)
    http = None
    if "vllm" in vs:
        http = vs_vllm(workload, model, dtype, serial, repeat, vllm_python, vllm_url, quantization)
        vs = [name for name in vs if name != "vllm"]
        if not vs:  # vLLM alone: its HTTP table is the result
            return write_json(http, json_out)

    config = EngineConfig(**environment_fields(), model=model, dtype=None if dtype == "auto" else dtype,
                          max_batch_tokens=max_batch_tokens,
                          device=device, quantization=quantization)
    runner = ModelRunner.from_spec(model, dtype=config.dtype, device=config.device, num_pages=config.num_kv_pages,
                                   page_size=config.page_size, quantization=config.quantization)
    tokenizer = runner.loaded_model.tokenizer
    loaded = load_rag_workload(workload) if workload else generate_rag_workload(tokenizer)
    typer.echo(f"workload {loaded.source}: {len(loaded.prompts)} requests, {loaded.num_prefix_tokens}-token "
               f"shared prefix, {loaded.max_new_tokens} new tokens; dtype {runner.dtype}, "
               f"weights {runner.quantization}")
    with progress_bars(len(loaded.prompts)) as progress:
        result = run_rag_bench(runner, config, loaded, serial=serial, repeat=repeat, warmup=warmup,
                               progress=progress)
        result["dtype"] = str(runner.dtype).removeprefix("torch.")
        result["quantization"] = runner.quantization
        reference = result.pop("_outputs")
        result["baselines"] = run_baselines(vs, runner, loaded, model, repeat=repeat, wall_s_on=result["wall_s_on"],
                                            reference=reference, progress=progress)
    _print(result)
    if http is not None:
        result = {"peers_table": _one_table(result, http, runner, loaded), "in_process": result, "http": http}
    write_json(result, json_out)
    write_plot(_plot, result.get("in_process", result), plot)


def _one_table(result: dict, http: dict, runner, loaded) -> dict:
    """Print and return the one table of every peer of this run (bench.rag.peer_table)."""
    from bench.decode.limits import machine_limits
    from bench.rag.peer_table import http_rows, in_process_rows, peer_table, print_peer_table, serial_floor_s

    floor_s = None
    if result["mode"] == "serial":
        limits = machine_limits(runner.shape, runner.dtype, runner.quantization, runner.device, model=runner.model)
        floor_s = serial_floor_s(result["prefill_tokens_on"], len(loaded.prompts), loaded.max_new_tokens, limits)
    table = peer_table(http_rows(http) + in_process_rows(result), mode=result["mode"], floor_s=floor_s)
    print_peer_table(table, target=TARGET_VS_BEST_PEER[result["mode"]],
                     title=f"bench rag, every peer ({result['mode']}, {result['requests']} requests, "
                           f"{result['dtype']}, median of {result['repeat']})")
    return table


def vs_vllm(workload: Optional[Path], model: str, dtype: str, serial: bool, repeat: int, vllm_python: Optional[str],
            vllm_url: Optional[str], quantization: str = "none") -> dict:
    """`radixgate serve` beside vLLM over HTTP; prints their table and returns the result."""
    import torch

    from engine.models.loader import load_model
    from bench.http_peers import print_peers
    from bench.rag.vllm_peer import run_vllm_comparison

    if workload is None:
        raise typer.BadParameter("--vs vllm needs --workload (a file whose requests carry chat messages)")
    if not (vllm_python or vllm_url):
        raise typer.BadParameter("--vs vllm needs --vllm-python PATH or --vllm-url URL")
    loaded = load_model(model)
    with progress_bars(len(json.loads(workload.read_text())["requests"])) as progress:
        result = run_vllm_comparison(workload, loaded, dtype=dtype, num_threads=torch.get_num_threads(),
                                     serial=serial, repeat=repeat, vllm_python=vllm_python, vllm_url=vllm_url,
                                     quantization=quantization, progress=progress)
    print_peers(f"bench rag over HTTP ({result['mode']}, {result['requests']} requests, {result['num_threads']} "
                f"threads, {result['dtype']}, radixgate weights {quantization}, median of {repeat})", result)
    return result


def _print(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench rag ({result['mode']}, {result['requests']} requests, median of {result['repeat']})")
    for column in ("run", "wall s", "prefill tokens", "TTFT ms (median)"):
        table.add_column(column)
    table.add_row("radix cache on", f"{result['wall_s_on']:.2f}", str(result["prefill_tokens_on"]),
                  f"{result['ttft_ms_median_on']:.0f}")
    table.add_row("radix cache off", f"{result['wall_s_off']:.2f}", str(result["prefill_tokens_off"]),
                  f"{result['ttft_ms_median_off']:.0f}")
    plain = result.get("without_speculation")
    if plain:
        table.add_row("cache on, no speculation", f"{plain['wall_s']:.2f}", str(result["prefill_tokens_on"]),
                      f"{plain['ttft_ms_median']:.0f}")
    for baseline in result["baselines"]:
        wall = f"{baseline['wall_s']:.2f}" if "wall_s" in baseline else baseline.get("error", "")
        table.add_row(baseline["name"], wall, "", "")
    console = Console()
    console.print(table)
    target = TARGET_BASELINE_SPEEDUP if result["mode"] == "cold-group" else 1.0
    for baseline in result["baselines"]:
        if "radixgate_speedup" in baseline:
            ratio = baseline["radixgate_speedup"]
            console.print(f"radixgate {ratio:.2f}x faster than {baseline['name']} (target >= {target:g}x) "
                          f"{verdict(ratio >= target)}; same greedy tokens on "
                          f"{baseline['outputs_match_radixgate']:.0%} of requests")
        if "note" in baseline:
            console.print(f"  [dim]{baseline['name']}: {baseline['note']}[/dim]")
    if plain:
        drafts = plain.get("drafts") or {}
        console.print(f"prompt-lookup speculation: {plain['speedup']:.2f}x faster than without (same tokens: "
                      f"{verdict(result['outputs_identical'])}); {drafts.get('accepted_tokens', 0)} of "
                      f"{drafts.get('draft_tokens', 0)} drafts accepted in {drafts.get('verify_steps', 0)} verify steps")
    console.print(f"speedup {result['speedup']:.2f}x (target >= {TARGET_SPEEDUP}) {verdict(result['speedup'] >= TARGET_SPEEDUP)}; "
                  f"prefill ratio {result['prefill_ratio']:.3f} (target <= {TARGET_PREFILL_RATIO}) "
                  f"{verdict(result['prefill_ratio'] <= TARGET_PREFILL_RATIO)}; outputs identical "
                  f"{verdict(result['outputs_identical'])}")


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["radix on", "radix off"] + [b["name"] for b in result["baselines"] if "wall_s" in b]
    walls = [result["wall_s_on"], result["wall_s_off"]] + [b["wall_s"] for b in result["baselines"] if "wall_s" in b]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.bar(names, walls, color=["tab:green", "tab:red"] + ["tab:gray"] * (len(names) - 2))
    left.set_ylabel("wall time (s)")
    left.set_title(f"{result['requests']} RAG requests ({result['mode']}): {result['speedup']:.1f}x")
    left.tick_params(axis="x", rotation=20)
    right.bar(["radix on", "radix off"], [result["prefill_tokens_on"], result["prefill_tokens_off"]],
              color=["tab:green", "tab:red"])
    right.set_ylabel("prefill tokens computed")
    right.set_title(f"prefill ratio {result['prefill_ratio']:.3f}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
