"""`radixgate bench policy`: agent traffic under a small KV budget with fcfs, lpm, dfs-weight and fair."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.engine_environment import environment_fields
from bench.output import write_json, write_plot

from bench.progress import progress_bars
from bench.threads import THREADS_HELP, set_torch_threads


def register(app: typer.Typer) -> None:
    app.command("policy")(policy)


def policy(
    workload: Optional[Path] = typer.Option(None, help="Agent workload jsonl (shared/workloads/agent_rag_300.jsonl); default: generated."),
    num_requests: int = typer.Option(150, help="Replay the first N requests (0: all)."),
    kv_budget_tokens: int = typer.Option(0, help="KV pool size in tokens (0: a quarter of the unique prompt tokens)."),
    repeat: int = typer.Option(1, min=1, help="Passes per policy; figures are medians."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here."),
    plot: Optional[Path] = typer.Option(None, help="Write a PNG plot here."),
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    dtype: str = typer.Option("auto", help="auto | float32 | bfloat16."),
    max_running: int = typer.Option(32, help="Most requests running at once."),
    threads: int = typer.Option(0, help=THREADS_HELP),
) -> None:
    """Replay the agent workload with each queue policy; hit rate and throughput per policy."""
    from engine import EngineConfig
    from engine.models.loader import load_model
    from bench.policy.prompts import agent_requests
    from bench.policy.run import default_budget_tokens, run_policy_bench
    from bench.workloads.agent import load_workload

    set_torch_threads(threads)

    loaded = load_model(model)
    rows = load_workload(workload)
    requests = agent_requests(loaded.tokenizer, rows[: num_requests or None])
    config = EngineConfig(**environment_fields(), model=model, dtype=None if dtype == "auto" else dtype,
                          max_running=max_running,
                          kv_cache_tokens=kv_budget_tokens or default_budget_tokens(requests, 16))
    runner = make_runner(loaded, config)
    typer.echo(f"{len(requests)} requests from {workload or 'a generated workload'}; KV budget "
               f"{config.num_kv_pages * config.page_size} tokens; dtype {runner.dtype}")
    with progress_bars(len(requests)) as progress:
        result = run_policy_bench(runner, config, requests, repeat=repeat, progress=progress)
    result["workload"] = str(workload or "generated")
    _print(result)
    write_json(result, json_out)
    write_plot(_plot, result, plot)


def make_runner(loaded, config):
    """A ModelRunner over the already loaded model (its tokenizer sized the budget) with a KV pool of
    config's size, on config's device and dtype."""
    from engine import KVPool
    from engine.models.llama import ModelShape
    from engine.runner import ModelRunner, resolve_device, resolve_dtype

    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device)
    shape = ModelShape.from_config(loaded.config)
    pool = KVPool(config.num_kv_pages, config.page_size, num_layers=shape.num_layers,
                  num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim, dtype=dtype, device=device)
    return ModelRunner(loaded, pool, dtype, device)


def _print(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench policy: {result['requests']} requests, KV budget {result['kv_budget_tokens']} "
                        f"tokens (unique prompt tokens {result['unique_prompt_tokens']}), median of {result['repeat']}")
    for column in ("policy", "hit rate", "prefill computed", "wall s", "req/s", "tok/s", "preemptions"):
        table.add_column(column)
    for name, row in result["policies"].items():
        table.add_row(name, f"{row['hit_rate']:.3f}", str(int(row["computed_prefill_tokens"])), f"{row['wall_s']:.1f}",
                      f"{row['requests_per_s']:.2f}", f"{row['tokens_per_s']:.0f}", str(int(row["num_preemptions"])))
    console = Console()
    console.print(table)
    verdict = "[green]yes[/green]" if result["cache_aware_beats_fcfs"] else "[red]NO[/red]"
    console.print(f"cache-aware policies beat FCFS on hit rate: {verdict}")


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["policies"])
    rows = [result["policies"][n] for n in names]
    colors = ["tab:gray" if n == "fcfs" else "tab:green" for n in names]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(names, [r["hit_rate"] for r in rows], color=colors)
    left.set_ylabel("cache hit rate (cached / prompt tokens)")
    left.set_ylim(0, 1)
    left.set_title(f"hit rate, KV budget {result['kv_budget_tokens']} tokens")
    right.bar(names, [r["tokens_per_s"] for r in rows], color=colors)
    right.set_ylabel("throughput (prompt + completion tokens / s)")
    right.set_title(f"{result['requests']} agent requests")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
