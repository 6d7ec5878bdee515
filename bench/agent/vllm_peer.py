"""`bench agent --vs vllm`: the agent workload over HTTP, `radixgate serve` (canonicalized) beside a vLLM CPU server.

Both get every row's body streamed (bench.http_peers), ``concurrency`` in flight, greedy,
the row's own max_tokens. radixgate runs under tenants created for the pass (cold caches). vLLM has
no context field or tenants: a row's retrieved documents become a system message after the first
one, as an application talking to vLLM would send them, its tools ride along with
``tool_choice: "none"`` (the server runs without a tool parser), and its prefix cache is reset
before the pass. Hit rate is token-weighted: sum(cached) / sum(prompt) of the usage each reports.
"""

from __future__ import annotations

import uuid

from bench.agent.plain import plain_body
from bench.http_peers import HttpRun, agreement, peer_dtype, replay_chat
from bench.rag.vllm_peer import median_run, run_vllm_http


def hit_rate(run: HttpRun) -> float:
    prompt = sum(r.prompt_tokens for r in run.replies)
    return sum(r.cached_tokens for r in run.replies) / prompt if prompt else 0.0


def run_agent_vs_vllm(rows: list[dict], loaded_model, *, dtype: str, num_threads: int, concurrency: int,
                      vllm_python: str | None, vllm_url: str | None, repeat: int = 1, with_vllm: bool = True,
                      progress=None) -> dict:
    """``repeat`` passes on each server, every one on cold caches; wall times are medians (rag.vllm_peer.median_run),
    TTFT, prefill, hit rate and answers the first pass's. Without ``with_vllm``, radixgate's passes alone. The
    first pass's answer texts are kept under "radixgate_answers" for peers measured elsewhere."""
    dtype = peer_dtype(dtype)
    ours = radixgate_passes(rows, dtype=dtype, num_threads=num_threads, concurrency=concurrency, repeat=repeat,
                            progress=progress)
    radixgate = median_run(ours)
    radixgate.update(name="radixgate serve (canonical)", hit_rate=hit_rate(ours[0]))
    result = {"mode": f"concurrency {concurrency}", "requests": len(rows), "num_threads": num_threads, "dtype": dtype,
              "repeat": repeat, "peers": [radixgate], "radixgate_answers": [r.text for r in ours[0].replies]}
    if not with_vllm:
        return result
    theirs = run_vllm_http([plain_body(r["body"]) for r in rows], python=vllm_python, url=vllm_url,
                           model_dir=loaded_model.path, served_name=loaded_model.model_id, dtype=dtype,
                           num_threads=num_threads, concurrency=concurrency, repeat=repeat, progress=progress)
    vllm = median_run(theirs)
    vllm.update(name="vLLM (CPU)", hit_rate=hit_rate(theirs[0]))
    result["peers"].append(vllm)
    result.update(answer_agreement=agreement(ours[0], theirs[0]),
                  wall_ratio_vs_vllm=radixgate["wall_s"] / vllm["wall_s"])
    return result


def radixgate_passes(rows: list[dict], *, dtype: str, num_threads: int, concurrency: int, repeat: int,
                     progress=None) -> list[HttpRun]:
    """``repeat`` canonicalized passes through one `radixgate serve`, each under tenants of its own (cold caches)."""
    from bench.agent.run import GatewayClient
    from bench.server import ServerProcess

    env = {"OMP_NUM_THREADS": str(num_threads), "RADIXGATE_LOG_LEVEL": "WARNING",
           "RADIXGATE_ENGINE__KV_CACHE_TOKENS": "65536", "RADIXGATE_ENGINE__DTYPE": dtype}
    with ServerProcess(env=env) as server:
        admin = GatewayClient(server.url, server.admin_key)
        try:
            warm_key = admin.create_tenant(f"warmup-{uuid.uuid4().hex[:6]}")
            admin.chat(warm_key, {**rows[0]["body"], "max_tokens": 2})
            ours = []
            for index in range(repeat):  # fresh tenants: cold cache namespaces on a warm server
                tag = uuid.uuid4().hex[:6]
                keys = {t: admin.create_tenant(f"{t}-{tag}") for t in dict.fromkeys(r["tenant"] for r in rows)}
                ours.append(replay_chat(f"radixgate #{index + 1}", server.url,
                                        [{"Authorization": f"Bearer {keys[r['tenant']]}"} for r in rows],
                                        [{**r["body"], "canonicalize": True} for r in rows], concurrency=concurrency,
                                        progress=progress))
        finally:
            admin.close()
    return ours
