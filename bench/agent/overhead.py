"""`bench agent --shadow-overhead`: requests/s with and without the canonical shadow, side by side.

Two gateways on loopback, identical but for RADIXGATE_CANONICAL_SHADOW (true / false), started
together and driven in turn: each repeat replays the workload's raw pass (where the second shadow
renders and tokenizes the canonical prompt on its worker) and its canonical pass on each server,
alternating which server goes first, every pass under fresh tenants. Requests/s = requests of
both passes / their wall time; the figures are medians over the repeats, so drift on a shared
machine hits both servers alike.
"""

from __future__ import annotations

import statistics

from bench.agent.run import GatewayClient, replay, warm_up
from bench.server import ServerProcess

SERVERS = ("with", "without")


def server_env(kv_cache_tokens: int, is_shadow_on: bool, extra: dict[str, str]) -> dict[str, str]:
    return {
        "RADIXGATE_ENGINE__KV_CACHE_TOKENS": str(kv_cache_tokens),
        "RADIXGATE_LOG_LEVEL": "WARNING",
        **extra,
        "RADIXGATE_CANONICAL_SHADOW": "true" if is_shadow_on else "false",
    }


def requests_per_s(client: GatewayClient, rows: list[dict], concurrency: int) -> float:
    raw = replay(client, rows, is_canonical=False, concurrency=concurrency)
    canonical = replay(client, rows, is_canonical=True, concurrency=concurrency)
    errors = raw.errors + canonical.errors
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. {errors[0]}")
    return (raw.total.requests + canonical.total.requests) / (raw.wall_s + canonical.wall_s)


def run_overhead_bench(
    rows: list[dict], *, kv_cache_tokens: int, repeats: int, concurrency: int = 1, extra_env: dict | None = None,
    progress=print,
) -> dict:
    """Start both servers, replay `repeats` times on each in turn; the summary dict."""
    runs: dict[str, list[float]] = {name: [] for name in SERVERS}
    servers = {name: ServerProcess(env=server_env(kv_cache_tokens, name == "with", extra_env or {})) for name in SERVERS}
    try:
        for server in servers.values():
            server.start()
        clients = {name: GatewayClient(server.url, server.admin_key) for name, server in servers.items()}
        for name, client in clients.items():
            warm_up(client, rows)
        for repeat in range(repeats):
            order = SERVERS if repeat % 2 == 0 else SERVERS[::-1]
            for name in order:
                runs[name].append(requests_per_s(clients[name], rows, concurrency))
                progress(f"  repeat {repeat + 1}/{repeats}: {name} the canonical shadow {runs[name][-1]:.3f} requests/s")
        for client in clients.values():
            client.close()
    finally:
        for server in servers.values():
            server.stop()
    with_shadow, without = statistics.median(runs["with"]), statistics.median(runs["without"])
    return {
        "requests_per_pass": len(rows),
        "repeats": repeats,
        "requests_per_s_with_canonical_shadow": round(with_shadow, 4),
        "requests_per_s_without_canonical_shadow": round(without, 4),
        "slowdown": round(1 - with_shadow / without, 4),
        "runs": {name: [round(value, 4) for value in values] for name, values in runs.items()},
    }
