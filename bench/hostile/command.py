"""`radixgate bench hostile`: each template bomb and oversized input, its status and latency, and
another tenant's TTFT alone and while it runs."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from bench.output import write_json


def register(app: typer.Typer) -> None:
    app.command("hostile")(hostile)


def hostile(
    url: str = typer.Option(None, "--url", help="A running gateway; default: start one on a free loopback port."),
    admin_key: str = typer.Option(None, "--admin-key", envvar="RADIXGATE_ADMIN_KEY", help="Admin key of --url's gateway."),
    repeat: int = typer.Option(5, "--repeat", min=1, help="Victim requests per probe (and alone); medians are reported."),
    json_out: Path = typer.Option(None, "--json", help="Write the result JSON here."),
) -> None:
    """Send each probe from one tenant while another streams; print statuses, latencies and TTFTs side by side."""
    from bench.hostile.run import run_hostile_bench

    if url is not None:
        result = run_hostile_bench(url, admin_key, repeat)
    else:
        from bench.server import ServerProcess

        env = {"RADIXGATE_LOG_LEVEL": "WARNING"}
        env.update({k: v for k, v in os.environ.items() if k.startswith("RADIXGATE_")})
        typer.echo("starting a gateway on a free loopback port (loading the model)...")
        with ServerProcess(env=env) as server:
            result = run_hostile_bench(server.url, server.admin_key, repeat)
    print_table(result)
    write_json(result, json_out)
    if result["num_5xx"]:
        raise typer.Exit(1)


def print_table(result: dict) -> None:
    typer.echo(f"victim TTFT p50 alone: {result['victim_ttft_alone_p50_s'] * 1000:.0f} ms (median of {result['repeat']})")
    typer.echo(f"{'probe':<24} {'status':<10} {'sent':>5} {'latency p50':>12} {'max':>8} {'victim TTFT p50':>16}")
    for p in result["probes"]:
        statuses = ",".join(map(str, p["statuses"]))
        typer.echo(f"{p['probe']:<24} {statuses:<10} {p['num_sent']:>5} {p['latency_p50_s'] * 1000:>10.0f}ms "
                   f"{p['latency_max_s'] * 1000:>6.0f}ms {p['victim_ttft_p50_s'] * 1000:>14.0f}ms")
