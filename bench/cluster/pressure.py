"""`bench cluster --pressure`: routing modes under KV-cache memory pressure.

The scenario: many tenants, each with a long system prompt (its shared prefix) and short distinct
questions, picked with Zipf popularity (a few hot tenants, a long tail), sent by a few concurrent
clients through one edge per routing mode (precise, affinity, random, round_robin, least_load) in
front of radixgate nodes whose KV cache holds well under the tenants' working set (`--pressure`;
`--no-pressure` gives them room for all of it). The nodes publish their KV events (ipc:// sockets
they bind, so every edge subscribes); the precise edge routes on them.

Figures per mode: hit_rate (delivered: the nodes' own cached_tokens, token-weighted),
predicted_hit_rate (the edge's predicted_cached_tokens from its request log: its KV-event index
under precise, its own record of what it sent where otherwise), ttft_p50_ms / ttft_p90_ms (client
side: request sent to first content token), throughput_tok_s ((prompt + completion tokens) / wall
time), prefill_tokens (prompt tokens not served from a cache), per-node requests and max/mean.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Lock

import httpx

from bench.cluster.fleet import Fleet
from bench.cluster.replay import create_tenant
from bench.cluster.run import backend_counts, log_figures

PRESSURE_MODES = ("precise", "affinity", "random", "round_robin", "least_load")


def pressure_workload(num_tenants: int, num_requests: int, prefix_words: int, seed: int = 0,
                      zipf_s: float = 1.1) -> list[dict]:
    """`num_requests` rows {tenant, body}: tenant k drawn with weight 1 / k**zipf_s."""
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) ** zipf_s for k in range(num_tenants)]
    systems = []
    for t in range(num_tenants):
        words = " ".join(f"{rng.choice(WORDS)}-{rng.randrange(1000)}" for _ in range(prefix_words))
        systems.append(f"You are the assistant of team {t}. Their handbook follows.\n{words}")
    rows = []
    for i in range(num_requests):
        t = rng.choices(range(num_tenants), weights)[0]
        question = f"Question {i}: what does the handbook say about item {rng.randrange(1000)}?"
        rows.append({"tenant": f"t{t}", "body": {"model": "default", "messages": [
            {"role": "system", "content": systems[t]}, {"role": "user", "content": question}]}})
    return rows


WORDS = ("ledger", "invoice", "policy", "refund", "audit", "shipment", "contract", "budget", "quota", "escalation",
         "review", "incident", "release", "backlog", "roadmap", "vendor", "warranty", "payroll", "forecast", "claim")


def timed_chat(http: httpx.Client, url: str, key: str, body: dict) -> tuple[float | None, dict | None, str | None]:
    """(ttft_s, usage, error) of one streamed chat."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    ttft, usage = None, None
    try:
        with http.stream("POST", f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}) as r:
            if r.status_code != 200:
                return None, None, f"HTTP {r.status_code}"
            import json

            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    return ttft, None, str(event["error"])[:200]
                if ttft is None and any(c["delta"].get("content") for c in event.get("choices") or ()):
                    ttft = time.perf_counter() - started
                usage = event.get("usage") or usage
    except httpx.HTTPError as exc:
        return ttft, None, repr(exc)
    return ttft, usage, None if usage else "no usage"


def run_pressure_mode(edge, mode: str, rows: list[dict], *, concurrency: int, max_tokens: int, progress=None) -> dict:
    """The workload through one edge: `concurrency` clients take the rows in order."""
    before = backend_counts(edge)
    tag = uuid.uuid4().hex[:6]
    lock = Lock()
    ttfts, prompt_tokens, cached_tokens, completion_tokens, errors = [], 0, 0, 0, []
    next_row = iter(range(len(rows)))
    with httpx.Client(timeout=600) as http:
        keys = {t: create_tenant(http, edge.url, edge.admin_key, f"{t}-{mode}-{tag}") for t in dict.fromkeys(r["tenant"] for r in rows)}

        def client() -> None:
            nonlocal prompt_tokens, cached_tokens, completion_tokens
            while True:
                with lock:
                    i = next(next_row, None)
                if i is None:
                    return
                row = rows[i]
                ttft, usage, error = timed_chat(http, edge.url, keys[row["tenant"]],
                                                {**row["body"], "max_tokens": max_tokens, "temperature": 0})
                with lock:
                    if error is not None:
                        errors.append(error)
                    else:
                        ttfts.append(ttft if ttft is not None else 0.0)
                        prompt_tokens += usage["prompt_tokens"]
                        cached_tokens += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                        completion_tokens += usage.get("completion_tokens") or 0
                    if progress is not None:
                        progress(mode, len(ttfts) + len(errors))

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for _ in range(concurrency):
                pool.submit(client)
        wall_s = time.perf_counter() - started
    after = backend_counts(edge)
    per_node = {name: after[name] - before.get(name, 0) for name in after}
    counts = list(per_node.values())
    mean = sum(counts) / len(counts) if counts else 0
    figures = log_figures(edge, [f"{t}-{mode}-{tag}" for t in keys])
    return {
        "hit_rate": round(cached_tokens / prompt_tokens, 4) if prompt_tokens else 0.0,
        "predicted_hit_rate": figures["predicted_hit_rate"],
        "ttft_p50_ms": round(1000 * percentile(ttfts, 50), 1) if ttfts else None,
        "ttft_p90_ms": round(1000 * percentile(ttfts, 90), 1) if ttfts else None,
        "throughput_tok_s": round((prompt_tokens + completion_tokens) / wall_s, 1) if wall_s else 0.0,
        "prefill_tokens": prompt_tokens - cached_tokens,
        "prompt_tokens": prompt_tokens,
        "cached_tokens": cached_tokens,
        "requests": len(rows),
        "errors": len(errors),
        "error_detail": errors[:3],
        "failovers": figures["failovers"],
        "wall_s": round(wall_s, 2),
        "per_node_requests": per_node,
        "load_balance_max_over_mean": round(max(counts) / mean, 3) if mean else None,
    }


def percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def kv_event_env(workdir: Path, index: int) -> dict[str, str]:
    """A node's KV-event sockets: ipc:// paths it binds (local only; every edge connects)."""
    return {"RADIXGATE_ENGINE__KV_EVENTS_ENDPOINT": f"ipc://{workdir}/node{index}-kv.pub",
            "RADIXGATE_ENGINE__KV_EVENTS_REPLAY_ENDPOINT": f"ipc://{workdir}/node{index}-kv.replay"}


def warm_edges(fleet: Fleet, rows: list[dict], timeout_s: float = 60.0) -> None:
    """One request into every node, then wait until every edge reports each node's KV events live."""
    body = {**rows[0]["body"], "max_tokens": 2, "stream": False}
    with httpx.Client(timeout=600) as http:
        for node in fleet.nodes:
            key = create_tenant(http, node.url, node.admin_key, f"warmup-{uuid.uuid4().hex[:6]}")
            http.post(f"{node.url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"})
        deadline = time.monotonic() + timeout_s
        for edge in fleet.edges.values():
            while time.monotonic() < deadline:
                rows_ = http.get(f"{edge.url}/admin/backends", headers={"Authorization": f"Bearer {edge.admin_key}"}).json()
                if all(b.get("cache_index") == "events" for b in rows_["backends"]):
                    break
                time.sleep(0.5)


def run_pressure_bench(fleet: Fleet, rows: list[dict], *, modes=PRESSURE_MODES, concurrency: int = 3,
                       max_tokens: int = 4, progress=None) -> dict:
    warm_edges(fleet, rows)
    return {mode: run_pressure_mode(fleet.edges[mode], mode, rows, concurrency=concurrency, max_tokens=max_tokens,
                                    progress=progress) for mode in modes}


DEFAULT_MODES = "affinity,random,round_robin,least_load"  # bench cluster's own default: the pressure run takes all


def pressure_command(num_nodes: int, pressure: bool, *, tenants: int, prefix_words: int, num_requests: int, seed: int,
                     concurrency: int, max_tokens: int, kv_cache_tokens: int, modes: str, json_out) -> None:
    """Start the nodes (KV events on) and one edge per mode, run the scenario, print and write the figures.
    Under pressure each node's KV cache holds about a quarter of the tenants' prefixes (at least 1024 tokens)."""
    import tempfile

    import typer

    from bench.output import write_json
    from bench.progress import progress_bars

    chosen = list(PRESSURE_MODES) if modes == DEFAULT_MODES else [m.strip() for m in modes.split(",") if m.strip()]
    rows = pressure_workload(tenants, num_requests, prefix_words, seed)
    prefix_tokens = prefix_words * 4  # SmolLM2's tokenizer: about 4 tokens per "word-123"
    kv_tokens = max(1024, tenants * prefix_tokens // 4) if pressure else max(kv_cache_tokens, 2 * tenants * prefix_tokens)
    typer.echo(f"workload: {len(rows)} requests, {tenants} tenants (Zipf), ~{prefix_tokens}-token prefixes "
               f"(working set ~{tenants * prefix_tokens} tokens); {num_nodes} nodes x {kv_tokens} KV tokens; "
               f"{concurrency} clients; modes {', '.join(chosen)}")
    with tempfile.TemporaryDirectory(prefix="radixgate-kv-") as sockets:
        envs = [kv_event_env(Path(sockets), i) for i in range(num_nodes)]
        with Fleet.local(num_nodes, chosen, kv_tokens, node_envs=envs) as fleet:
            with progress_bars(len(rows)) as progress:
                result = run_pressure_bench(fleet, rows, modes=chosen, concurrency=concurrency, max_tokens=max_tokens,
                                            progress=progress)
    result["scenario"] = {"pressure": pressure, "nodes": num_nodes, "kv_cache_tokens": kv_tokens, "tenants": tenants,
                          "prefix_words": prefix_words, "requests": len(rows), "concurrency": concurrency, "seed": seed}
    typer.echo(f"\n{'mode':<12} {'hit':>6} {'predicted':>9} {'ttft_p50':>9} {'ttft_p90':>9} {'tok/s':>8} "
               f"{'prefill':>8} {'errors':>6} {'max/mean':>8}  per node")
    for mode in chosen:
        r = result[mode]
        fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        typer.echo(f"{mode:<12} {r['hit_rate']:>6.3f} {fmt(r['predicted_hit_rate'], '.3f'):>9} "
                   f"{fmt(r['ttft_p50_ms'], '.0f'):>9} {fmt(r['ttft_p90_ms'], '.0f'):>9} {r['throughput_tok_s']:>8.0f} "
                   f"{r['prefill_tokens']:>8} {r['errors']:>6} {fmt(r['load_balance_max_over_mean'], '.2f'):>8}  "
                   f"{r['per_node_requests']}")
    write_json(result, json_out)
