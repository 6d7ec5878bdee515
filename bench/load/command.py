"""`radixgate bench load`: throughput, TTFT p50/p99 per tenant and the 503 share of many streaming
clients, two rounds; exits 1 if an invariant breaks (a 5xx other than 503, a stream without usage
and [DONE], unbalanced KV pages, RSS growth of 15% or more between the rounds)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from bench.output import write_json, write_plot


def register(app: typer.Typer) -> None:
    app.command("load")(load)


def load(
    url: str = typer.Option(None, "--url", help="A running gateway; default: start one on a free loopback port."),
    admin_key: str = typer.Option(None, "--admin-key", envvar="RADIXGATE_ADMIN_KEY", help="Admin key of --url's gateway."),
    clients: int = typer.Option(64, "--clients", min=1, help="Concurrent streaming clients."),
    seconds: float = typer.Option(60.0, "--seconds", min=0.5, help="Length of each of the two rounds."),
    max_tokens: int = typer.Option(24, "--max-tokens", min=1, help="max_tokens of each request."),
    json_out: Path = typer.Option(None, "--json", help="Write the result JSON here."),
    plot_out: Path = typer.Option(None, "--plot", help="Write TTFT p50/p99 per tenant and round as a PNG here."),
) -> None:
    """Stream from many clients over mixed tenants and templates; print each round's figures and the invariants."""
    from bench.load.run import run_load_bench
    from bench.progress import progress_bars

    def run(server_url: str, key: str) -> dict:
        with progress_bars(None) as progress:
            return run_load_bench(server_url, key, clients, seconds, max_tokens, progress)

    if url is not None:
        result = run(url, admin_key)
    else:
        from bench.server import ServerProcess

        env = {"RADIXGATE_LOG_LEVEL": "WARNING"}
        env.update({k: v for k, v in os.environ.items() if k.startswith("RADIXGATE_")})
        typer.echo("starting a gateway on a free loopback port (loading the model)...")
        with ServerProcess(env=env) as server:
            result = run(server.url, server.admin_key)
    print_table(result)
    write_json(result, json_out)
    write_plot(plot_ttft, result, plot_out)
    if result["violations"]:
        raise typer.Exit(1)


def print_table(result: dict) -> None:
    typer.echo(f"{result['num_clients']} streaming clients, {result['seconds']:.0f} s per round, max_tokens {result['max_tokens']}")
    for number, r in enumerate(result["rounds"], 1):
        pages = r["pages"]
        balance = "-" if pages is None else (
            f"free {pages['free']} + evictable {pages['evictable']} + pinned {pages['pinned']} = {pages['num_pages']}"
            if pages["is_balanced"] else f"UNBALANCED {pages}")
        rss = "-" if r["rss_bytes"] is None else f"{r['rss_bytes'] / 2**20:.0f} MiB"
        typer.echo(f"round {number}: {r['num_requests']} requests, {r['requests_per_s']:.2f} req/s, "
                   f"{r['completion_tokens_per_s']:.1f} tok/s, 503 share {r['share_503']:.1%}, statuses {r['statuses']}, "
                   f"RSS {rss}, pages {balance}")
        typer.echo(f"  {'tenant':<8} {'n':>6} {'TTFT p50':>10} {'TTFT p99':>10}")
        for name, t in r["per_tenant"].items():
            typer.echo(f"  {name:<8} {t['num']:>6} {t['ttft_p50_s'] * 1000:>8.0f}ms {t['ttft_p99_s'] * 1000:>8.0f}ms")
    growth = result["rss_growth"]
    typer.echo(f"RSS growth round 1 -> 2: {'-' if growth is None else f'{growth:+.1%}'}")
    typer.echo("invariants: " + ("all hold" if not result["violations"] else "; ".join(result["violations"])))


def plot_ttft(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    labels, p50, p99 = [], [], []
    for number, r in enumerate(result["rounds"], 1):
        for name, t in r["per_tenant"].items():
            labels.append(f"{name}\nr{number}")
            p50.append(t["ttft_p50_s"] * 1000)
            p99.append(t["ttft_p99_s"] * 1000)
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="TTFT p50")
    ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="TTFT p99")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("ms")
    ax.set_title(f"bench load: {result['num_clients']} clients")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
