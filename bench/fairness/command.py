"""`radixgate bench fairness`: the cold tenant's TTFT alone and under a warm flood, for fcfs, lpm and fair."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.engine_environment import environment_fields
from bench.output import write_json, write_plot
from bench.progress import progress_bars
from bench.threads import THREADS_HELP, set_torch_threads


def register(app: typer.Typer) -> None:
    app.command("fairness")(fairness)


def fairness(
    seed: int = typer.Option(0, help="Seed of the generated workload."),
    num_cold: int = typer.Option(8, min=2, help="Cold requests per pass (sent one every --cold-gap-s)."),
    cold_gap_s: float = typer.Option(0.3, help="Seconds between the cold tenant's requests."),
    cold_words: int = typer.Option(40, help="Words in each cold prompt."),
    flood_concurrency: int = typer.Option(16, help="Flood requests in flight at once (a closed loop)."),
    prefix_words: int = typer.Option(200, help="Words in each of the flood's shared (warm) system prompts."),
    num_prefixes: int = typer.Option(2, help="Distinct shared prefixes the flood cycles through."),
    num_flood: int = typer.Option(64, min=1, help="Flood requests per pass (each pass serves the same ones)."),
    repeat: int = typer.Option(3, min=1, help="Passes per policy and mode; figures are medians."),
    policies: str = typer.Option("fcfs,lpm,fair", help="Comma-separated policies to compare."),
    max_running: int = typer.Option(4, help="Most requests running at once (the slots the tenants compete for)."),
    kv_cache_tokens: int = typer.Option(32768, help="KV pool size in tokens."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here."),
    plot: Optional[Path] = typer.Option(None, help="Write a PNG plot here."),
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    dtype: str = typer.Option("auto", help="auto | float32 | bfloat16."),
    threads: int = typer.Option(0, help=THREADS_HELP),
) -> None:
    """One tenant floods with long warm prompts, another sends short cold ones: the cold tenant's
    p50/p99 TTFT alone and under the flood, and the overall hit rate, per queue policy."""
    from engine import EngineConfig
    from engine.models.loader import load_model
    from bench.pass_check import NO_QUEUE_DEADLINE_S
    from bench.fairness.run import run_fairness_bench
    from bench.fairness.workload import generate_workload
    from bench.policy.command import make_runner

    set_torch_threads(threads)
    names = tuple(p.strip() for p in policies.split(",") if p.strip())
    loaded = load_model(model)
    workload = generate_workload(loaded.tokenizer, seed=seed, num_cold=num_cold, cold_words=cold_words,
                                 num_prefixes=num_prefixes, prefix_words=prefix_words, num_flood_prompts=num_flood,
                                 flood_concurrency=flood_concurrency, cold_gap_s=cold_gap_s)
    # no queue deadline: a starved cold request is measured, not cut off
    config = EngineConfig(**environment_fields(), model=model, dtype=None if dtype == "auto" else dtype,
                          max_running=max_running,
                          kv_cache_tokens=kv_cache_tokens, max_queue_wait_s=NO_QUEUE_DEADLINE_S)
    runner = make_runner(loaded, config)
    typer.echo(f"flood: {flood_concurrency} in flight over {num_prefixes} warm prefixes of "
               f"{len(workload.flood_prefixes[0])} tokens; cold: {num_cold} prompts of ~{len(workload.cold_prompts[0])} "
               f"tokens every {cold_gap_s} s; max_running {max_running}; dtype {runner.dtype}")
    with progress_bars(num_cold) as progress:
        result = run_fairness_bench(runner, config, workload, repeat=repeat, policies=names, progress=progress,
                                    report=_report_pass)
    result["workload"] = {"seed": seed, "num_cold": num_cold, "cold_gap_s": cold_gap_s, "flood_concurrency":
                          flood_concurrency, "prefix_tokens": len(workload.flood_prefixes[0]), "max_running": max_running}
    _print(result)
    write_json(result, json_out)
    write_plot(_plot, result, plot)


def _report_pass(label: str, figures: dict) -> None:
    typer.echo(f"{label}: cold TTFT p50 {figures['cold_ttft_p50_ms']:.0f} ms, p99 {figures['cold_ttft_p99_ms']:.0f} ms, "
               f"hit rate {figures['hit_rate']:.3f}, {figures['flood_requests']} flood requests, "
               f"{figures['wall_s']:.1f} s", err=True)


def _print(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench fairness: the cold tenant's TTFT alone and under the flood, median of {result['repeat']}")
    for column in ("policy", "p50 alone ms", "p50 flood ms", "p50 ratio", "p99 alone ms", "p99 flood ms",
                   "hit rate (flood pass)", "flood req/s", "flood outlasted cold"):
        table.add_column(column)
    for name, row in result["policies"].items():
        alone, flood = row["alone"], row["flood"]
        table.add_row(name, f"{alone['cold_ttft_p50_ms']:.0f}", f"{flood['cold_ttft_p50_ms']:.0f}",
                      f"{row['ttft_p50_ratio']:.2f}x", f"{alone['cold_ttft_p99_ms']:.0f}",
                      f"{flood['cold_ttft_p99_ms']:.0f}", f"{flood['hit_rate']:.3f}", f"{flood['flood_requests_per_s']:.2f}",
                      "yes" if flood["flood_outlasted_cold"] else "no")
    console = Console()
    console.print(table)
    if "holds" in result:
        mark = "[green]yes[/green]" if result["holds"] else "[red]NO[/red]"
        console.print(f"fair: cold p50 under the flood {result['fair_ttft_p50_ratio']:.2f}x alone (<= 3x), hit rate "
                      f"{result['hit_gap_points_vs_lpm']:+.1f} points below lpm (<= 5): {mark}")


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["policies"])
    rows = [result["policies"][n] for n in names]
    x = range(len(names))
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar([i - 0.2 for i in x], [r["alone"]["cold_ttft_p50_ms"] for r in rows], 0.4, label="alone")
    left.bar([i + 0.2 for i in x], [r["flood"]["cold_ttft_p50_ms"] for r in rows], 0.4, label="under the flood")
    left.set_xticks(list(x), names)
    left.set_yscale("log")
    left.set_ylabel("cold tenant p50 TTFT (ms, log)")
    left.legend()
    right.bar(names, [r["flood"]["hit_rate"] for r in rows], color="tab:green")
    right.set_ylim(0, 1)
    right.set_ylabel("overall hit rate (flood pass)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
