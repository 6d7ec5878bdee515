"""`radixgate bench cluster`: a fleet behind an edge gateway, hit rate per routing mode vs one node.

    radixgate bench cluster --nodes 3 --json OUT.json --plot OUT.png
    radixgate bench cluster --pressure --nodes 2 --json OUT.json   # routing modes under KV memory pressure
    radixgate bench cluster --remote vllm=http://127.0.0.1:8101/v1 --remote vllm=http://127.0.0.1:8102/v1 \\
        --remote-model smollm2 --json OUT.json
"""

from __future__ import annotations

from pathlib import Path

import typer

from bench.output import write_json, write_plot


def register(app: typer.Typer) -> None:
    app.command("cluster")(cluster)


def cluster(
    nodes: int = typer.Option(3, "--nodes", min=1, help="radixgate nodes to start (embedded engine each)."),
    workload: Path = typer.Option(None, "--workload", exists=True, dir_okay=False,
                                  help="JSONL agent workload (e.g. ../shared/workloads/agent_rag_300.jsonl); default: generated."),
    num_requests: int = typer.Option(60, "--requests", min=3, help="Requests taken from the workload (its first N)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the generated workload."),
    max_tokens: int = typer.Option(4, "--max-tokens", min=1, help="Completion tokens per request."),
    remote: list[str] = typer.Option(None, "--remote", help="KIND=URL of an upstream (vllm, sglang, radixgate, "
                                     "openai), repeatable; instead of starting nodes. e.g. vllm=http://127.0.0.1:8101/v1"),
    remote_model: str = typer.Option("default", "--remote-model", help="Model name the --remote upstreams serve."),
    modes: str = typer.Option("affinity,random,round_robin,least_load", "--modes", help="Routing modes to run, comma-separated."),
    salts: bool = typer.Option(True, "--salts/--no-salts", help="Also show tenant salts end to end on the first upstream."),
    kv_cache_tokens: int = typer.Option(16384, "--kv-cache-tokens", help="KV cache of each node this command starts."),
    pressure: bool = typer.Option(None, "--pressure/--no-pressure", help="The memory-pressure scenario (many tenants, "
                                  "long prefixes, Zipf popularity; bench/cluster/pressure.py) on nodes with KV events, "
                                  "per mode precise, affinity, random, round_robin, least_load; --no-pressure: the "
                                  "same with room for every prefix."),
    tenants: int = typer.Option(12, "--tenants", min=1, help="Pressure scenario: tenants (Zipf popularity)."),
    prefix_words: int = typer.Option(120, "--prefix-words", min=1, help="Pressure scenario: words of each tenant's system prompt."),
    concurrency: int = typer.Option(3, "--concurrency", min=1, help="Pressure scenario: concurrent clients."),
    json_out: Path = typer.Option(None, "--json", help="Write the result JSON here."),
    plot: Path = typer.Option(None, "--plot", help="Write a PNG chart here."),
) -> None:
    """Replay the agent workload into one node alone (`single`), then through an edge gateway
    (`serve --no-engine`) per routing mode; print hit rates (delivered, predicted, available),
    failovers, wall time and per-node balance side by side."""
    from bench.cluster.fleet import Fleet, Remote
    from bench.cluster.run import run_cluster_bench
    from bench.cluster.salts import salt_check
    from bench.progress import progress_bars
    from bench.workloads.agent import load_workload

    if pressure is not None:
        from bench.cluster.pressure import pressure_command

        pressure_command(nodes, pressure, tenants=tenants, prefix_words=prefix_words, num_requests=num_requests,
                         seed=seed, concurrency=concurrency, max_tokens=max_tokens, kv_cache_tokens=kv_cache_tokens,
                         modes=modes, json_out=json_out)
        return
    rows = load_workload(workload, num_requests, seed)[:num_requests]
    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    remotes = [parse_remote(spec, i, remote_model) for i, spec in enumerate(remote or [])]
    if remotes:  # foreign engines without an auto tool parser: keep tools in the prompt, never a forced call
        rows = [{**row, "body": {**row["body"], "tool_choice": "none"}} if row["body"].get("tools") else row for row in rows]
    topology = f"{len(remotes)} x {remotes[0].kind} behind an edge" if remotes else f"{nodes} radixgate nodes behind an edge"
    typer.echo(f"workload: {len(rows)} requests; topology: {topology}; starting the fleet (loading models)...")
    fleet = Fleet.in_front_of(remotes, chosen) if remotes else Fleet.local(nodes, chosen, kv_cache_tokens)
    with fleet:
        with progress_bars(len(rows)) as progress:
            result = run_cluster_bench(fleet, rows, modes=chosen, max_tokens=max_tokens, progress=progress)
        if salts:
            fleet.add_edge("salts", fleet.remotes[:1])
            result["salts"] = salt_check(fleet.edges["salts"].url, fleet.edges["salts"].admin_key, "default")
    result["topology"] = topology
    result["workload"] = str(workload) if workload else f"generated(seed={seed}, requests={num_requests})"
    print_table(result)
    write_json(result, json_out)
    if plot is not None:
        from bench.cluster.plot import plot_cluster

        write_plot(plot_cluster, result, plot)


def parse_remote(spec: str, index: int, model: str):
    from bench.cluster.fleet import Remote

    kind, sep, url = spec.partition("=")
    if not sep or kind not in ("vllm", "sglang", "radixgate", "openai"):
        raise typer.BadParameter(f"--remote wants KIND=URL with KIND vllm, sglang, radixgate or openai: {spec!r}")
    return Remote(f"{kind}{index}", url.rstrip("/"), kind=kind, model=model)


def print_table(result: dict) -> None:
    typer.echo(f"\n{result['topology']}")
    typer.echo(f"{'':<12} {'hit':>6} {'predicted':>9} {'available':>9} {'requests':>8} {'lost':>4} "
               f"{'failovers':>9} {'wall_s':>7} {'max/mean':>8}  per node")
    for key in ("single", "affinity", "random", "round_robin", "least_load"):
        if key not in result:
            continue
        r = result[key]
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        typer.echo(f"{key:<12} {r['hit_rate']:>6.3f} {fmt(r['predicted_hit_rate']):>9} {fmt(r['available_hit_rate']):>9} "
                   f"{r['requests']:>8} {r['lost']:>4} {r['failovers']:>9} {r['wall_s']:>7.1f} "
                   f"{fmt(r.get('load_balance_max_over_mean')):>8}  {r.get('per_node_requests', '')}")
    if "single" in result and "affinity" in result:
        typer.echo(f"affinity - single: {result['affinity']['hit_rate'] - result['single']['hit_rate']:+.3f}")
    salts = result.get("salts")
    if salts:
        typer.echo(f"\ntenant salts on one upstream, its own cached_tokens of a {salts['prompt_tokens']}-token prompt:")
        for label, value in salts["cached_tokens"].items():
            typer.echo(f"  {label:<22} {value}")
        typer.echo(f"  apart share nothing: {salts['apart_share_nothing']}; one cache group shares: {salts['group_shares']}")
