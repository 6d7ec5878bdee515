"""`radixgate bench agent`: agent/RAG traffic through the gateway, raw order vs canonicalized."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from bench.output import write_json

DEFAULT_KV_CACHE_TOKENS = 65536
DEFAULT_REQUESTS = 300  # of the generated workload


def register(app: typer.Typer) -> None:
    app.command("agent")(agent)


def agent(
    workload: Path = typer.Option(None, "--workload", exists=True, dir_okay=False,
                                  help="JSONL workload (e.g. ../shared/workloads/agent_rag_300.jsonl); default: generated."),
    url: str = typer.Option(None, "--url", help="A running gateway; default: start one on a free loopback port."),
    admin_key: str = typer.Option(None, "--admin-key", envvar="RADIXGATE_ADMIN_KEY", help="Admin key of --url's gateway."),
    json_out: Path = typer.Option(None, "--json", help="Write the result JSON here."),
    plot: Path = typer.Option(None, "--plot", help="Write a PNG chart here."),
    num_requests: Optional[int] = typer.Option(None, "--requests", min=1, help="Requests: of the generated workload "
                                               "(default 300), or the first N rows of --workload (default all)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the generated workload."),
    concurrency: int = typer.Option(1, "--concurrency", min=1, help="Requests in flight (1 = strictly in order)."),
    kv_cache_tokens: int = typer.Option(DEFAULT_KV_CACHE_TOKENS, "--kv-cache-tokens",
                                        help="KV cache of the server this command starts (ignored with --url)."),
    shadow_overhead: bool = typer.Option(False, "--shadow-overhead",
                                         help="Instead: requests/s with and without the canonical shadow, two servers side by side."),
    shadow_cost: bool = typer.Option(False, "--shadow-cost",
                                     help="Instead: the canonical shadow's work per raw request, timed in-process (no server)."),
    repeats: int = typer.Option(3, "--repeat", min=1,
                                help="Repeats with --shadow-overhead, --shadow-cost or --vs (medians reported; "
                                     "each --vs pass on cold caches)."),
    vs: list[str] = typer.Option([], "--vs", help="Instead, `radixgate serve` beside peers on the same rows, one "
                                 "table (wall, TTFT, prefill tokens, hit rate, answer agreement); repeat the flag: "
                                 "vllm (a vLLM CPU server, over HTTP), llamacpp (llama-cpp-python on the model's "
                                 "GGUF, in process), hf (transformers generate, in process)."),
    vllm_python: str = typer.Option(None, "--vllm-python", help="Python of a venv with vLLM's CPU build; the bench "
                                    "starts its server on the HF directory radixgate caches for the model."),
    vllm_url: str = typer.Option(None, "--vllm-url", help="A running vLLM server instead."),
    dtype: str = typer.Option("auto", "--dtype", help="With --vs: every engine's dtype (auto: the one radixgate's "
                              "engine picks on this CPU, named to each)."),
) -> None:
    """Replay the workload twice (canonicalize false, then true) under fresh tenants; report hit rates and wall times."""
    from bench.agent.run import run_agent_bench
    from bench.workloads.agent import load_workload

    rows = load_workload(workload, num_requests or DEFAULT_REQUESTS, seed)[: num_requests or None]
    typer.echo(f"workload: {len(rows)} requests from {workload or f'the generator (seed {seed})'}")
    if vs:
        return vs_peers(rows, vs, vllm_python, vllm_url, dtype, concurrency, repeats, json_out)
    if shadow_overhead:
        return overhead(rows, kv_cache_tokens, repeats, concurrency, json_out)
    if shadow_cost:
        return cost(rows, repeats, json_out)
    if url is not None:
        result = run_agent_bench(url, admin_key, rows, concurrency=concurrency, progress=print_progress)
    else:
        from bench.server import ServerProcess

        env = {"RADIXGATE_ENGINE__KV_CACHE_TOKENS": str(kv_cache_tokens), "RADIXGATE_LOG_LEVEL": "WARNING"}
        env.update({k: v for k, v in os.environ.items() if k.startswith("RADIXGATE_ENGINE__")})
        typer.echo("starting a gateway on a free loopback port (loading the model)...")
        with ServerProcess(env=env) as server:
            result = run_agent_bench(server.url, server.admin_key, rows, concurrency=concurrency, progress=print_progress)
    result["workload"] = str(workload) if workload else f"generated(seed={seed}, requests={len(rows)})"
    print_summary(result)
    write_json(result, json_out)
    if plot is not None:
        from bench.agent.plot import plot_agent_bench

        plot_agent_bench(result, str(plot))
        typer.echo(f"wrote {plot}")
    if result["errors"]:
        typer.echo(f"{len(result['errors'])} requests failed, e.g. {result['errors'][0]}", err=True)
        raise typer.Exit(1)


def vs_peers(rows: list[dict], vs: list[str], vllm_python: str | None, vllm_url: str | None, dtype: str,
             concurrency: int, repeats: int, json_out: Path | None) -> None:
    import torch

    from engine.models.loader import load_model
    from bench.agent.peers import PEERS, TARGET_VS_BEST_PEER, run_agent_peers
    from bench.progress import progress_bars
    from bench.rag.peer_table import print_peer_table

    unknown = sorted(set(vs) - set(PEERS))
    if unknown:
        raise typer.BadParameter(f"--vs takes {', '.join(PEERS)}; got {', '.join(unknown)}")
    if "vllm" in vs and not (vllm_python or vllm_url):
        raise typer.BadParameter("--vs vllm needs --vllm-python PATH or --vllm-url URL")
    threads = int(os.environ.get("OMP_NUM_THREADS") or torch.get_num_threads())
    torch.set_num_threads(threads)  # the in-process peers run with the servers' thread count
    model = "smollm2-135m"
    with progress_bars(len(rows)) as progress:
        result = run_agent_peers(rows, load_model(model), model, peers=list(dict.fromkeys(vs)), dtype=dtype,
                                 num_threads=threads, concurrency=concurrency, repeat=repeats,
                                 vllm_python=vllm_python, vllm_url=vllm_url, progress=progress)
    print_peer_table(result["table"], target=TARGET_VS_BEST_PEER,
                     title=f"bench agent: {len(rows)} requests, concurrency {concurrency}, {threads} threads, "
                           f"{result['dtype']}, medians of {repeats}")
    for name, rate in result["hit_rates"].items():
        typer.echo(f"{name}: hit rate {rate:.3f}")
    write_json(result, json_out)


def overhead(rows: list[dict], kv_cache_tokens: int, repeats: int, concurrency: int, json_out: Path | None) -> None:
    from bench.agent.overhead import run_overhead_bench

    extra = {k: v for k, v in os.environ.items() if k.startswith("RADIXGATE_ENGINE__")}
    typer.echo("starting two gateways (with / without the canonical shadow) on free loopback ports...")
    result = run_overhead_bench(rows, kv_cache_tokens=kv_cache_tokens, repeats=repeats, concurrency=concurrency,
                                extra_env=extra, progress=lambda line: typer.echo(line, err=True))
    typer.echo(f"requests/s with the canonical shadow     {result['requests_per_s_with_canonical_shadow']:.3f}")
    typer.echo(f"requests/s without the canonical shadow  {result['requests_per_s_without_canonical_shadow']:.3f}")
    typer.echo(f"slowdown                                 {result['slowdown']:.1%} (medians of {repeats} repeats)")
    write_json(result, json_out)


def cost(rows: list[dict], repeats: int, json_out: Path | None) -> None:
    from bench.agent.shadow_cost import run_shadow_cost
    from gateway.settings import Settings

    result = run_shadow_cost(rows, Settings().resolved_templates_dir(), repeats)
    typer.echo(f"raw request preparation (request path)   {result['raw_prepare_ms_per_request']:.3f} ms/request")
    typer.echo(f"canonical shadow work (its worker)       {result['canonical_shadow_ms_per_request']:.3f} ms/request")
    write_json(result, json_out)


def print_progress(run) -> None:
    mode = "canonical" if run.is_canonical else "raw"
    typer.echo(f"  {mode}: {run.total.requests} requests, hit rate so far {run.total.hit_rate:.3f}", err=True)


def print_summary(result: dict) -> None:
    typer.echo(f"requests            {result['requests']}")
    typer.echo(f"hit rate raw        {result['hit_rate_raw']:.3f}   wall {result['wall_s_raw']:.1f} s")
    typer.echo(f"hit rate canonical  {result['hit_rate_canonical']:.3f}   wall {result['wall_s_canonical']:.1f} s")
    typer.echo(f"ratio               {result['hit_rate_ratio']}x hit rate, {result['wall_speedup']}x wall time")
    typer.echo(f"shadow (raw order)  {result['shadow_hit_rate_raw_order']}")
