"""bench tier: one agent workload, three engines, and a second process on the same host tier.

    tier_off   a device KV pool too small for the workload's prefixes (default: a
               quarter of its unique prompt tokens): evicted prefixes are recomputed
    tier_on    the same pool over a host tier that holds every prefix: evicted
               prefixes come back by copy
    unbounded  a device pool that holds every prefix (the hit rate to return to)

Requests arrive at once, in workload order, fcfs, so reuse depends on what the
cache keeps rather than on the order the scheduler picks. Greedy outputs of the
three must be identical. Then shared_processes: this process replays the first
half of the workload on an engine over a named host tier and hands its device
tree to it on close; a second process attaches to that tier by name and replays
the second half; its hit rate on the prefixes the first process computed is
what the first process's work saved it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace

from engine import EngineConfig, KVPool, RadixCache
from bench.pass_check import NO_QUEUE_DEADLINE_S
from bench.policy.prompts import AgentRequest
from bench.progress import Progress
from bench.tier.replay import replay_in_order

CONFIGS = ("tier_off", "tier_on", "unbounded")


def unique_pages(requests: list[AgentRequest], page_size: int) -> int:
    pool = KVPool(sum(len(r.token_ids) // page_size + 1 for r in requests) + 1, page_size)
    cache = RadixCache(pool)
    for req in requests:
        cache.insert(req.namespace, req.token_ids, pool.allocate(len(req.token_ids) // page_size))
    return pool.num_referenced_pages


def shared_prefix_tokens(first: list[AgentRequest], second: list[AgentRequest], page_size: int) -> list[int]:
    """Per request of `second`: tokens of its longest page-aligned prefix that a request of `first` had."""
    pool = KVPool(sum(len(r.token_ids) // page_size for r in first) + 1, page_size)
    cache = RadixCache(pool)
    for req in first:
        cache.insert(req.namespace, req.token_ids, pool.allocate(len(req.token_ids) // page_size))
    return [cache.peek_prefix(r.namespace, r.token_ids[: len(r.token_ids) - 1])[1] for r in second]


def summarize(finals, wall_s: float, stats: dict) -> dict:
    prompt = sum(f.usage.prompt_tokens for f in finals)
    cached = sum(f.usage.cached_tokens for f in finals)
    host = sum(f.usage.host_cached_tokens for f in finals)
    tier = stats.get("host_tier") or {}
    return {"hit_rate": cached / prompt, "device_hit_rate": (cached - host) / prompt, "wall_s": wall_s,
            "host_hit_tokens": host, "cached_tokens": cached, "prompt_tokens": prompt,
            "computed_prefill_tokens": sum(f.usage.computed_prefill_tokens for f in finals),
            "host_loads": tier.get("loads", 0), "host_bytes_copied": tier.get("bytes_copied", 0),
            "host_copy_s": tier.get("copy_s", 0.0), "host_written_pages": tier.get("written_pages", 0)}


def run_config(runner, config: EngineConfig, requests, label: str, progress) -> tuple[dict, dict]:
    """(summary, output token ids per request) of one replay on a fresh engine."""
    from engine import Engine

    engine = Engine(replace(config, max_queue_wait_s=NO_QUEUE_DEADLINE_S), runner=runner)
    started = time.perf_counter()
    finals = replay_in_order(engine, requests, label, progress)
    wall_s = time.perf_counter() - started
    stats = engine.stats()
    engine.flush_cache()
    engine.close()
    outputs = [f.output_token_ids for f in finals]
    if any(f.error for f in finals):
        raise next(f.error for f in finals if f.error)
    return summarize(finals, wall_s, stats), outputs


def run_tier_bench(make_runner, config: EngineConfig, requests: list[AgentRequest], *, budget_tokens: int,
                   repeat: int, progress: Progress | None, model: str, threads: int) -> dict:
    """The three configurations `repeat` times (interleaved; medians), then the two-process replay."""
    page_size = config.page_size
    total_pages = unique_pages(requests, page_size)
    headroom = max(len(r.token_ids) + r.max_tokens for r in requests) // page_size * 4
    small = replace(config, kv_cache_tokens=budget_tokens, num_pages=None)
    configs = {
        "tier_off": small,
        "tier_on": replace(small, host_tier_tokens=(total_pages + headroom) * page_size),
        "unbounded": replace(config, kv_cache_tokens=(total_pages + headroom) * page_size, num_pages=None),
    }
    runners = {"tier_off": make_runner(small), "unbounded": make_runner(configs["unbounded"])}
    runners["tier_on"] = runners["tier_off"]
    runs = {name: [] for name in CONFIGS}
    outputs = {}
    for round_index in range(repeat):
        for name in CONFIGS:
            summary, outputs[name] = run_config(runners[name], configs[name], requests,
                                                f"{name} #{round_index + 1}", progress)
            runs[name].append(summary)
    result = {name: median_of(rows) for name, rows in runs.items()}
    result["outputs_identical"] = outputs["tier_off"] == outputs["tier_on"] == outputs["unbounded"]
    result["shared_processes"] = run_shared(runners["tier_off"], configs["tier_on"], requests, progress,
                                            model=model, threads=threads)
    result.update(requests=len(requests), device_budget_tokens=budget_tokens, unique_prompt_tokens=total_pages * page_size,
                  host_tier_tokens=configs["tier_on"].host_tier_tokens, repeat=repeat,
                  hit_rate_gap_points=100 * (result["unbounded"]["hit_rate"] - result["tier_on"]["hit_rate"]))
    return result


def median_of(rows: list[dict]) -> dict:
    summary = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    summary["wall_s_all"] = [r["wall_s"] for r in rows]
    return summary


def run_shared(runner, config: EngineConfig, requests, progress, *, model: str, threads: int) -> dict:
    """First half here on a named host tier, second half in another process attached to it."""
    from engine import Engine

    half = len(requests) // 2
    first, second = requests[:half], requests[half:]
    name = f"rgbench{os.getpid()}{uuid.uuid4().hex[:6]}"
    engine = Engine(replace(config, host_tier_name=name, max_queue_wait_s=NO_QUEUE_DEADLINE_S), runner=runner)
    replay_in_order(engine, first, "shared: process 1", progress)
    engine.flush_cache()  # process 1's device tree goes to the shared tier (write-back on eviction)
    try:
        with tempfile.TemporaryDirectory() as folder:
            spec = os.path.join(folder, "spec.json")
            with open(spec, "w") as file:
                json.dump({"config": {**config.__dict__, "host_tier_name": name, "model": model},
                           "requests": [r.__dict__ for r in second], "threads": threads}, file)
            done = subprocess.run([sys.executable, "-m", "bench.tier.worker", spec], check=True,
                                  capture_output=True, text=True)
            child = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        engine.close()  # the creator removes the shared memory
    shared = shared_prefix_tokens(first, second, config.page_size)
    saved = sum(min(cached, s) for cached, s in zip(child["cached_tokens"], shared))
    return {"first_requests": len(first), "second_requests": len(second),
            "second_pid": child["pid"], "first_pid": os.getpid(),
            "second_hit_rate_on_first_prefixes": saved / max(1, sum(shared)),
            "second_host_hit_tokens": sum(child["host_cached_tokens"]),
            "second_prefix_tokens_first_computed": sum(shared), "second_hit_rate": child["hit_rate"]}
