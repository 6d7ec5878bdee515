"""`bench cluster`: the agent workload through one node alone, then through an edge per routing mode.

Figures per topology/mode (the JSON's keys `single`, `affinity`, `random`, `round_robin`,
`least_load`): hit_rate (delivered: the nodes' own cached_tokens as the API reported them,
token-weighted), predicted_hit_rate (the edge router's own index, from its request log; a single
node has no router, so there it is null), available_hit_rate (the canonical shadow: what one
unbounded cache of all the traffic would hit), requests, lost, failovers, wall_s, and the per-node
balance (requests each node was sent, max/mean).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
from sqlalchemy import create_engine, func, select

from bench.cluster.fleet import Fleet
from bench.cluster.replay import PassResult, replay
from bench.server import ServerProcess

MODES = ("affinity", "random", "round_robin", "least_load")
LOG_SETTLE_S = 1.5  # the request log is written in batches, off the hot path


def log_figures(server: ServerProcess, tenant_names: list[str]) -> dict:
    """Predicted and available hit rates and failovers of these tenants, from the server's own log."""
    from gateway.db.models import RequestLog, Tenant

    time.sleep(LOG_SETTLE_S)
    engine = create_engine(f"sqlite:///{Path(server.workdir) / 'radixgate.db'}")
    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(func.sum(RequestLog.prompt_tokens), func.sum(RequestLog.predicted_cached_tokens),
                       func.sum(RequestLog.failovers), func.sum(RequestLog.canonical_cached_tokens),
                       func.sum(RequestLog.canonical_prompt_tokens))
                .join(Tenant, Tenant.id == RequestLog.tenant_id).where(Tenant.name.in_(tenant_names))
            ).one()
    finally:
        engine.dispose()
    prompt, predicted, failovers, canonical_cached, canonical_prompt = (v or 0 for v in row)
    return {
        "predicted_hit_rate": round(predicted / prompt, 4) if prompt and predicted is not None else None,
        "available_hit_rate": round(canonical_cached / canonical_prompt, 4) if canonical_prompt else None,
        "failovers": int(failovers),
    }


def backend_counts(edge: ServerProcess) -> dict[str, int]:
    response = httpx.get(f"{edge.url}/admin/backends", headers={"Authorization": f"Bearer {edge.admin_key}"}, timeout=10)
    response.raise_for_status()
    return {b["name"]: b["requests_sent"] for b in response.json()["backends"]}


def summarize(result: PassResult, figures: dict, per_node: dict[str, int] | None) -> dict:
    summary = {
        "hit_rate": round(result.hit_rate, 4),
        "predicted_hit_rate": figures["predicted_hit_rate"],
        "available_hit_rate": figures["available_hit_rate"],
        "requests": result.requests,
        "completed": result.completed,
        "failed_after_first_token": result.failed_after_first_token,
        "lost": len(result.lost),
        "lost_detail": result.lost[:5],
        "failovers": figures["failovers"],
        "wall_s": round(result.wall_s, 2),
        "prompt_tokens": result.prompt_tokens,
        "cached_tokens": result.cached_tokens,
    }
    if per_node is not None:
        counts = list(per_node.values())
        mean = sum(counts) / len(counts) if counts else 0
        summary["per_node_requests"] = per_node
        summary["load_balance_max_over_mean"] = round(max(counts) / mean, 3) if mean else None
    return summary


def run_single(node: ServerProcess, rows: list[dict], max_tokens: int, progress=None) -> dict:
    """The workload straight into one node (no edge)."""
    result = replay(node.url, node.admin_key, rows, "single", max_tokens=max_tokens, on_done=progress_for(progress, "single"))
    figures = log_figures(node, result.tenant_names) | {"predicted_hit_rate": None}
    return summarize(result, figures, None)


def run_mode(edge: ServerProcess, mode: str, rows: list[dict], max_tokens: int, progress=None, during=None) -> dict:
    """The workload through the edge of one routing mode; `during(num_done)` may act mid-run (e.g. kill a node)."""
    before = backend_counts(edge)

    def on_done(num_done: int) -> None:
        if progress is not None:
            progress(mode, num_done)
        if during is not None:
            during(num_done)

    result = replay(edge.url, edge.admin_key, rows, mode, max_tokens=max_tokens, on_done=on_done)
    after = backend_counts(edge)
    per_node = {name: after[name] - before.get(name, 0) for name in after}
    return summarize(result, log_figures(edge, result.tenant_names), per_node)


def progress_for(progress, label: str):
    return None if progress is None else (lambda num_done: progress(label, num_done))


def warm_up(fleet: Fleet, rows: list[dict]) -> None:
    """One request through every edge and into every node, so no pass pays first-request costs."""
    from bench.cluster.replay import create_tenant, stream_chat

    body = {**rows[0]["body"], "max_tokens": 2}
    with httpx.Client(timeout=600) as http:
        for server in [*fleet.nodes, *fleet.edges.values()]:
            key = create_tenant(http, server.url, server.admin_key, f"warmup-{server.port}-{uuid.uuid4().hex[:6]}")
            stream_chat(http, server.url, key, body)


def run_cluster_bench(fleet: Fleet, rows: list[dict], *, modes=MODES, max_tokens: int = 4, progress=None) -> dict:
    """`single` (when the fleet has local nodes), then one pass per routing mode."""
    warm_up(fleet, rows)
    result: dict = {}
    if fleet.nodes:
        result["single"] = run_single(fleet.nodes[0], rows, max_tokens, progress)
    for mode in modes:
        result[mode] = run_mode(fleet.edges[mode], mode, rows, max_tokens, progress)
    return result
