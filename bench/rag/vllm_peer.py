"""`bench rag --vs vllm`: the RAG workload over HTTP, `radixgate serve` beside a vLLM CPU server.

Both get the workload's chat messages (the shared workload file carries them), greedy, the same
max_tokens, streamed (bench.http_peers). Cold caches for every pass: radixgate's pass runs
under a tenant created for it (a fresh cache namespace), vLLM's after ``POST /reset_prefix_cache``
(its dev-mode endpoint, enabled for the server this bench starts). Each server first answers one
short warm-up request. Wall times are medians of ``repeat`` passes; TTFT, prefill and answers are
the first pass's.
"""

from __future__ import annotations

import json
import statistics
import uuid
from pathlib import Path

import httpx

from bench.http_peers import HttpRun, VllmServer, agreement, peer_dtype, replay_chat


def workload_bodies(path: Path, max_tokens: int | None = None) -> tuple[list[dict], int]:
    """(chat bodies, max_tokens) from a workload file whose requests carry ``messages``."""
    data = json.loads(Path(path).read_text())
    num_new = max_tokens or int(data.get("generation", {}).get("max_new_tokens", 16))
    requests = data["requests"]
    if not all("messages" in r for r in requests):
        raise ValueError(f"{path}: --vs vllm needs requests with chat messages")
    return [{"messages": r["messages"], "max_tokens": num_new, "temperature": 0.0} for r in requests], num_new


def median_run(runs: list[HttpRun]) -> dict:
    summary = runs[0].summary()
    summary["wall_s"] = statistics.median(r.wall_s for r in runs)
    summary["wall_s_all"] = [r.wall_s for r in runs]
    return summary


def run_radixgate_http(bodies: list[dict], *, dtype: str, num_threads: int, concurrency: int, repeat: int,
                       quantization: str = "none", progress=None) -> list[HttpRun]:
    from bench.agent.run import GatewayClient
    from bench.server import ServerProcess

    env = {"OMP_NUM_THREADS": str(num_threads), "RADIXGATE_LOG_LEVEL": "WARNING",
           "RADIXGATE_ENGINE__QUANTIZATION": quantization}
    if dtype != "auto":
        env["RADIXGATE_ENGINE__DTYPE"] = dtype
    bodies = [{**body, "model": body.get("model", "default")} for body in bodies]  # the API requires one
    with ServerProcess(env=env) as server:
        admin = GatewayClient(server.url, server.admin_key)
        runs = []
        try:
            warm_key = admin.create_tenant(f"warmup-{uuid.uuid4().hex[:6]}")
            admin.chat(warm_key, {"model": "default", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
            for index in range(repeat):
                key = admin.create_tenant(f"rag-{uuid.uuid4().hex[:6]}")  # a fresh namespace: a cold cache
                runs.append(replay_chat(f"radixgate #{index + 1}", server.url, {"Authorization": f"Bearer {key}"},
                                        bodies, concurrency=concurrency, progress=progress))
        finally:
            admin.close()
    return runs


def run_vllm_http(bodies: list[dict], *, python: str | None, url: str | None, model_dir: Path, served_name: str,
                  dtype: str, num_threads: int, concurrency: int, repeat: int, progress=None) -> list[HttpRun]:
    if url is not None:
        return _vllm_passes(url.rstrip("/"), served_name, bodies, concurrency, repeat, progress)
    server = VllmServer(python, model_dir, served_name, dtype=peer_dtype(dtype), num_threads=num_threads)
    server.env["VLLM_SERVER_DEV_MODE"] = "1"  # for /reset_prefix_cache between passes
    with server:
        return _vllm_passes(server.url, served_name, bodies, concurrency, repeat, progress)


def _vllm_passes(url: str, served_name: str, bodies: list[dict], concurrency: int, repeat: int, progress):
    named = [{**b, "model": served_name} for b in bodies]
    httpx.post(f"{url}/v1/chat/completions", timeout=600,
               json={"model": served_name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    runs = []
    for index in range(repeat):
        httpx.post(f"{url}/reset_prefix_cache", timeout=60)  # a cold cache (404 on a server without dev mode)
        runs.append(replay_chat(f"vLLM #{index + 1}", url, {}, named, concurrency=concurrency, progress=progress))
    return runs


def run_vllm_comparison(workload: Path, loaded_model, *, dtype: str, num_threads: int, serial: bool, repeat: int,
                        vllm_python: str | None, vllm_url: str | None, quantization: str = "none",
                        progress=None) -> dict:
    """radixgate serve and vLLM on the same bodies; summaries with answer agreement and wall ratio."""
    bodies, max_tokens = workload_bodies(workload)
    concurrency = 1 if serial else len(bodies)
    dtype = peer_dtype(dtype)
    ours = run_radixgate_http(bodies, dtype=dtype, num_threads=num_threads, concurrency=concurrency,
                              repeat=repeat, quantization=quantization, progress=progress)
    theirs = run_vllm_http(bodies, python=vllm_python, url=vllm_url, model_dir=loaded_model.path,
                           served_name=loaded_model.model_id, dtype=dtype, num_threads=num_threads,
                           concurrency=concurrency, repeat=repeat, progress=progress)
    radixgate, vllm = median_run(ours), median_run(theirs)
    radixgate["name"], vllm["name"] = "radixgate serve", "vLLM (CPU)"
    return {"mode": "serial" if serial else "cold-group", "requests": len(bodies), "max_tokens": max_tokens,
            "num_threads": num_threads, "dtype": dtype, "quantization": quantization, "repeat": repeat,
            "peers": [radixgate, vllm],
            "answer_agreement": agreement(ours[0], theirs[0]), "wall_ratio_vs_vllm": radixgate["wall_s"] / vllm["wall_s"]}
