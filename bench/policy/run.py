"""bench policy: replay agent traffic under a KV budget too small for every prefix, per queue policy.

All requests arrive at once, so the waiting-queue policy decides the order in
which they run: FCFS interleaves tenants and document sets and evicts what the
next request needs; lpm and dfs-weight run requests that share a resident
branch together; fair shares the engine across tenants, lpm order within each. The KV budget defaults to a quarter of the unique
(page-granular) prompt tokens, counted with a tensor-less radix tree, and
never below four times the longest prompt.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

from engine import Engine, EngineConfig, KVPool, RadixCache, RequestOutput, SamplingParams
from bench.pass_check import NO_QUEUE_DEADLINE_S, flush_and_check
from bench.policy.prompts import AgentRequest
from bench.progress import Progress

POLICIES = ("fcfs", "lpm", "dfs-weight", "fair")


def unique_prompt_tokens(requests: list[AgentRequest], page_size: int) -> int:
    """Tokens an unbounded radix cache would hold for every prompt (full pages only)."""
    total_pages = sum(len(r.token_ids) // page_size for r in requests) + 1
    pool = KVPool(total_pages, page_size)
    cache = RadixCache(pool)
    for req in requests:
        num_pages = len(req.token_ids) // page_size
        cache.insert(req.namespace, req.token_ids, pool.allocate(num_pages))
    return pool.num_referenced_pages * page_size


def default_budget_tokens(requests: list[AgentRequest], page_size: int) -> int:
    """A quarter of the unique prompt tokens, never below four times the longest request (prompt plus new
    tokens), rounded down to whole pages."""
    longest = max(len(r.token_ids) + r.max_tokens for r in requests)
    return max(unique_prompt_tokens(requests, page_size) // 4, 4 * longest) // page_size * page_size


def replay(engine: Engine, requests: list[AgentRequest], label: str, progress: Progress | None) -> list[RequestOutput]:
    """Submit every request, then run the step loop on this thread (Engine.run_here) until all finished."""
    finals: list[RequestOutput] = []

    def emit(output: RequestOutput) -> None:  # called on the step loop, i.e. on this thread
        if output.is_finished:
            finals.append(output)
            if progress:
                progress(label, len(finals))
            if len(finals) == len(requests):
                engine.shutdown()  # the loop stops after this step

    for req in requests:
        engine.submit(req.token_ids, SamplingParams(max_tokens=req.max_tokens), emit, namespace=req.namespace)
    engine.run_here()
    return finals


def run_one(runner, config: EngineConfig, requests: list[AgentRequest], label: str,
            progress: Progress | None) -> dict:
    """One replay on a fresh engine over `runner`: wall time, token counts and rates; no page may leak."""
    engine = Engine(config, runner=runner)
    started = time.perf_counter()
    finals = replay(engine, requests, label, progress)
    wall_s = time.perf_counter() - started
    num_preemptions = engine.stats()["num_preemptions"]
    flush_and_check(engine, finals)
    prompt = sum(f.usage.prompt_tokens for f in finals)
    cached = sum(f.usage.cached_tokens for f in finals)
    completion = sum(f.usage.completion_tokens for f in finals)
    return {"wall_s": wall_s, "hit_rate": cached / prompt, "prompt_tokens": prompt, "cached_tokens": cached,
            "computed_prefill_tokens": sum(f.usage.computed_prefill_tokens for f in finals),
            "completion_tokens": completion, "num_preemptions": num_preemptions,
            "requests_per_s": len(finals) / wall_s, "tokens_per_s": (prompt + completion) / wall_s}


def run_policy_bench(runner, config: EngineConfig, requests: list[AgentRequest], *, repeat: int = 1,
                     policies: tuple[str, ...] = POLICIES, progress: Progress | None = None) -> dict:
    """Each policy `repeat` times (interleaved) on a flushed cache; medians per policy."""
    runs: dict[str, list[dict]] = {policy: [] for policy in policies}
    for round_index in range(repeat):
        for policy in policies:
            label = f"{policy} #{round_index + 1}"
            # the whole workload is queued at once by design: no request may time out in the queue
            unbounded_wait = replace(config, policy=policy, max_queue_wait_s=NO_QUEUE_DEADLINE_S)
            runs[policy].append(run_one(runner, unbounded_wait, requests, label, progress))
    per_policy = {}
    for policy, results in runs.items():
        summary = {key: statistics.median(r[key] for r in results) for key in results[0]}
        summary["wall_s_all"] = [r["wall_s"] for r in results]
        per_policy[policy] = summary
    fcfs_hit = per_policy.get("fcfs", {}).get("hit_rate")
    return {
        "requests": len(requests),
        "kv_budget_tokens": runner.pool.num_pages * runner.pool.page_size,
        "unique_prompt_tokens": unique_prompt_tokens(requests, runner.pool.page_size),
        "repeat": repeat,
        "policies": per_policy,
        "cache_aware_beats_fcfs": fcfs_hit is not None and all(
            per_policy[p]["hit_rate"] > fcfs_hit for p in per_policy if p != "fcfs"),
    }
