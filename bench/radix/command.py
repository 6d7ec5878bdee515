"""`radixgate bench radix`: replay a token-id trace through the radix cache (optionally vs SGLang)."""

from __future__ import annotations

from pathlib import Path

import typer

from bench.output import write_json

DEFAULT_SGLANG_PYTHON = "/tmp/sglang-venv/bin/python"


def register(app: typer.Typer) -> None:
    app.command("radix")(radix)


def radix(
    trace: Path = typer.Option(None, help="Token-id trace (.npz, ../shared/traces format); default: a generated one."),
    page_size: int = typer.Option(1, help="Tokens per KV page (a power of two)."),
    capacity: int = typer.Option(None, help="Pool size in tokens; eviction runs when full (default: unbounded)."),
    json_out: Path = typer.Option(None, "--json", help="Write the result as JSON here."),
    repeat: int = typer.Option(1, min=1, help="Replays; the figures are medians over them."),
    compare: str = typer.Option(None, help="'sglang': replay SGLang's RadixCache on the same trace in the same run."),
    sglang_python: str = typer.Option(DEFAULT_SGLANG_PYTHON, help="Python of the separate venv with sglang."),
    num_requests: int = typer.Option(5000, help="Requests of the generated trace (without --trace)."),
    seed: int = typer.Option(7, help="Seed of the generated trace (without --trace)."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Replay a trace: match, lock, insert, unlock per request (evicting when full); print and write JSON."""
    from bench.radix.run import RESULT_KEYS, compare_with_sglang, report, run_radixgate
    from bench.workloads.trace import TraceShape, generate_trace, load_trace

    if compare not in (None, "sglang"):
        raise typer.BadParameter("only --compare sglang is supported", param_hint="--compare")
    loaded = load_trace(trace) if trace else generate_trace(TraceShape(num_requests=num_requests, seed=seed))
    result = run_radixgate(loaded, page_size, capacity, repeat, progress=progress)
    if compare == "sglang":
        result = compare_with_sglang(result, loaded, str(trace) if trace else None, sglang_python, progress=progress)
    result["trace"] = str(trace) if trace else f"generated (seed {seed}, {num_requests} requests)"
    print_table(result, RESULT_KEYS)
    write_json(report(result), json_out)


def print_table(result: dict, keys: tuple[str, ...]) -> None:
    from rich.console import Console
    from rich.table import Table

    has_sglang = "sglang_requests_per_s" in result
    table = Table(title=f"bench radix — {result['trace']} (medians of {result['repeat']})")
    table.add_column("metric")
    table.add_column("radixgate", justify="right")
    if has_sglang:
        table.add_column("sglang RadixCache", justify="right")
        table.add_column("sglang Unified (Rust)", justify="right")
    for key in keys:
        row = [key, _fmt(result.get(key))]
        if has_sglang:
            row += [_fmt(result.get(f"sglang_{key}")), _fmt(result.get(f"sglang_unified_{key}"))]
        table.add_row(*row)
    for key in ("paired_radixgate_requests_per_s", "ratio", "unified_ratio", "memory_ratio", "sglang_unified_error"):
        if key in result:
            table.add_row(key, _fmt(result[key]), *([""] * (2 if has_sglang else 0)))
    Console().print(table)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4f}" if value < 10 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
