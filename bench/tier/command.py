"""`radixgate bench tier`: hit rate and wall time with the host KV tier off, on, and an unbounded device cache."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.engine_environment import environment_fields
from bench.output import write_json, write_plot
from bench.progress import progress_bars
from bench.threads import THREADS_HELP, set_torch_threads


def register(app: typer.Typer) -> None:
    app.command("tier")(tier)


def tier(
    workload: Optional[Path] = typer.Option(None, help="Agent workload jsonl (shared/workloads/agent_rag_300.jsonl); default: generated."),
    num_requests: int = typer.Option(120, help="Replay the first N requests (0: all)."),
    device_budget_tokens: int = typer.Option(0, help="Device KV pool in tokens (0: a quarter of the unique prompt tokens)."),
    repeat: int = typer.Option(1, min=1, help="Passes per configuration; figures are medians."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here."),
    plot: Optional[Path] = typer.Option(None, help="Write a PNG plot here."),
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    dtype: str = typer.Option("auto", help="auto | float32 | bfloat16."),
    max_running: int = typer.Option(16, help="Most requests running at once."),
    threads: int = typer.Option(0, help=THREADS_HELP),
) -> None:
    """Agent traffic on a device cache too small for its prefixes: tier off vs on vs unbounded, one run,
    then two engine processes sharing one host tier."""
    from engine import EngineConfig
    from engine.models.loader import load_model
    from bench.policy.command import make_runner
    from bench.policy.prompts import agent_requests
    from bench.policy.run import default_budget_tokens
    from bench.tier.run import run_tier_bench
    from bench.workloads.agent import load_workload

    set_torch_threads(threads)
    loaded = load_model(model)
    requests = agent_requests(loaded.tokenizer, load_workload(workload)[: num_requests or None])
    config = EngineConfig(**environment_fields(), model=model, dtype=None if dtype == "auto" else dtype,
                          max_running=max_running, policy="fcfs")
    budget = device_budget_tokens or default_budget_tokens(requests, config.page_size)
    typer.echo(f"{len(requests)} requests from {workload or 'a generated workload'}; device KV budget {budget} tokens")
    with progress_bars(len(requests)) as progress:
        result = run_tier_bench(lambda c: make_runner(loaded, c), config, requests, budget_tokens=budget,
                                repeat=repeat, progress=progress, model=model, threads=threads)
    result["workload"] = str(workload or "generated")
    _print(result)
    write_json(result, json_out)
    write_plot(_plot, result, plot)


def _print(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench tier: {result['requests']} agent requests, device KV {result['device_budget_tokens']} "
                        f"tokens (unique prompt tokens {result['unique_prompt_tokens']}), median of {result['repeat']}")
    for column in ("config", "hit rate", "device hits", "host hit tokens", "prefill computed", "wall s", "copy s"):
        table.add_column(column)
    for name in ("tier_off", "tier_on", "unbounded"):
        row = result[name]
        table.add_row(name, f"{row['hit_rate']:.3f}", f"{row['device_hit_rate']:.3f}", str(int(row["host_hit_tokens"])),
                      str(int(row["computed_prefill_tokens"])), f"{row['wall_s']:.1f}", f"{row['host_copy_s']:.3f}")
    console = Console()
    console.print(table)
    off, on, unbounded = (result[n] for n in ("tier_off", "tier_on", "unbounded"))
    speedup = off["wall_s"] / on["wall_s"]
    console.print(f"tier on vs off: hit rate {on['hit_rate']:.3f} vs {off['hit_rate']:.3f}, wall "
                  f"{on['wall_s']:.1f} s vs {off['wall_s']:.1f} s ({speedup:.2f}x {'faster' if speedup >= 1 else 'SLOWER'}); gap to unbounded {result['hit_rate_gap_points']:.1f} points "
                  f"({'within' if result['hit_rate_gap_points'] <= 5 else 'NOT within'} 5)")
    console.print(f"outputs identical (off / on / unbounded): {result['outputs_identical']}")
    shared = result["shared_processes"]
    console.print(f"second process (pid {shared['second_pid']}) hit rate on prefixes process {shared['first_pid']} "
                  f"computed: {shared['second_hit_rate_on_first_prefixes']:.3f} "
                  f"({shared['second_host_hit_tokens']} host-tier hit tokens)")


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["tier_off", "tier_on", "unbounded"]
    colors = ["tab:gray", "tab:green", "tab:blue"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(names, [result[n]["hit_rate"] for n in names], color=colors)
    left.set_ylim(0, 1)
    left.set_ylabel("cache hit rate (cached / prompt tokens)")
    left.set_title(f"device KV {result['device_budget_tokens']} tokens")
    right.bar(names, [result[n]["wall_s"] for n in names], color=colors)
    right.set_ylabel("wall time (s)")
    right.set_title(f"{result['requests']} agent requests")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
