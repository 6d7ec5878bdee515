"""`bench agent --vs ...`: the agent workload on radixgate beside every peer a user would pick instead, one table.

radixgate runs as `radixgate serve` over HTTP, canonicalizing, under fresh tenants each pass
(bench.agent.vllm_peer). vLLM's CPU server gets the same rows as plain OpenAI bodies over HTTP;
llama.cpp and transformers get the same plain rows rendered by the model's chat template, in process
(bench.agent.llamacpp_peer, hf_peer), so they pay neither HTTP nor tokenization and radixgate's
ratio against them is conservative. Every peer runs ``repeat`` passes on cold caches; wall times are
medians, the rest is the first pass's. A peer that cannot run gets a row saying why.
"""

from __future__ import annotations

import statistics

from bench.agent.plain import plain_prompt_ids
from bench.rag.baselines import median_of
from bench.rag.peer_table import IN_PROCESS, PeerRow, http_rows, peer_table

PEERS = ("vllm", "llamacpp", "hf")
TARGET_VS_BEST_PEER = 0.5


def run_agent_peers(rows: list[dict], loaded_model, model_spec: str, *, peers: list[str], dtype: str,
                    num_threads: int, concurrency: int, repeat: int, vllm_python: str | None = None,
                    vllm_url: str | None = None, progress=None) -> dict:
    """The HTTP result of bench.agent.vllm_peer with "table" (bench.rag.peer_table) and, per
    peer that ran, "hit_rates" (token-weighted: cached or reused over prompt tokens)."""
    import torch

    from bench.agent.vllm_peer import run_agent_vs_vllm

    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        raise ValueError(f"unknown peer {', '.join(unknown)}; choose from {', '.join(PEERS)}")
    http = run_agent_vs_vllm(rows, loaded_model, dtype=dtype, num_threads=num_threads, concurrency=concurrency,
                             vllm_python=vllm_python, vllm_url=vllm_url, repeat=repeat, with_vllm="vllm" in peers,
                             progress=progress)
    ours_answers = http.pop("radixgate_answers")
    ours = http["peers"][0]
    table_rows = http_rows(http)
    hit_rates = {peer["name"]: peer["hit_rate"] for peer in http["peers"]}
    local = [name for name in PEERS[1:] if name in peers]
    if local:
        prompts = [plain_prompt_ids(row["body"], loaded_model.tokenizer) for row in rows]
        max_tokens = [int(row["body"].get("max_tokens") or 16) for row in rows]
        dtype_obj = getattr(torch, http["dtype"])
        for name in local:
            found = median_of(repeat, lambda name=name: run_local(name, model_spec, loaded_model, prompts, max_tokens,
                                                                  dtype=dtype_obj, num_threads=num_threads,
                                                                  progress=progress))
            table_rows.append(local_row(found, ours_answers, ours["wall_s"]))
            if "wall_s" in found:
                hit_rates[found["name"]] = 1 - found["prefill_tokens"] / sum(len(p) for p in prompts)
    http["table"] = peer_table(table_rows, mode=http["mode"], floor_s=None)
    http["hit_rates"] = hit_rates
    return http


def run_local(name: str, model_spec: str, loaded_model, prompts: list[list[int]], max_tokens: list[int], *,
              dtype, num_threads: int, progress) -> dict:
    if name == "llamacpp":
        from bench.agent.llamacpp_peer import run_llamacpp_agent
        from bench.rag.baselines import gguf_path

        return run_llamacpp_agent(gguf_path(model_spec), prompts, max_tokens, num_threads=num_threads,
                                  progress=progress)
    from bench.agent.hf_peer import run_hf_agent

    return run_hf_agent(loaded_model, prompts, max_tokens, dtype=dtype, progress=progress)


def local_row(found: dict, ours_answers: list[str], ours_wall_s: float) -> PeerRow:
    """The table row of an in-process peer's result (median wall), its answers compared with radixgate's."""
    if "wall_s" not in found:
        return PeerRow(found["name"], IN_PROCESS, None, error=str(found.get("error", "did not run")))
    ttfts = sorted(found["ttft_s"])
    same = sum(a == b for a, b in zip(found["answers"], ours_answers)) / max(1, len(ours_answers))
    return PeerRow(found["name"], IN_PROCESS, found["wall_s"], 1000 * statistics.median(ttfts),
                   found["prefill_tokens"], same_answers=same, ratio=ours_wall_s / found["wall_s"])
