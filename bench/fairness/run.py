"""bench fairness: the cold tenant's TTFT alone and under a warm flood, per waiting-queue policy.

One pass, on a fresh engine over the shared runner:
  1. the flood's prefixes are prefilled (warm), in every pass, so the cache starts the same;
  2. with the flood: `flood_concurrency` flood requests are in flight from the start, each
     replaced by the next of the flood's prompts as it finishes (a closed loop), until every
     flood prompt was sent once;
  3. the cold tenant sends its prompts open-loop, one every `cold_gap_s` (from a side thread;
     the step loop runs on this one, Engine.run_here); the pass ends when every cold and every
     flood request has finished.
TTFT is the engine's own (submission to first token, queueing included). The hit rate is
cached / prompt tokens over the pass's requests, the same set under every policy, so it
compares what each order does to the cache (not how much flood work fit beside the cold one).
`flood_outlasted_cold` says whether the flood was still running when the last cold request
finished (else the last cold requests were measured without it).
No page may be held after a pass (flush_and_check).
"""

from __future__ import annotations

from collections.abc import Callable
import statistics
import threading
import time
from dataclasses import replace

import numpy as np

from engine import Engine, EngineConfig, RequestOutput, SamplingParams
from bench.fairness.workload import FairnessWorkload
from bench.pass_check import flush_and_check
from bench.progress import Progress

POLICIES = ("fcfs", "lpm", "fair")
MAX_TTFT_RATIO = 3.0  # the fair policy's cold p50 TTFT under the flood, at most this times its TTFT alone
MAX_HIT_GAP_POINTS = 5.0  # and its overall hit rate at most this many points below lpm's


def run_until(engine: Engine, submit_all, is_done) -> None:
    """Run the step loop here until is_done() turns true in an emit (submit_all(on_finish) queues the work)."""
    def on_finish() -> None:
        if is_done():
            engine.shutdown()
    submit_all(on_finish)
    engine.run_here()


def warm(engine: Engine, workload: FairnessWorkload) -> None:
    finals: list[RequestOutput] = []

    def submit_all(on_finish) -> None:
        def on_output(output: RequestOutput) -> None:
            if output.is_finished:
                finals.append(output)
                on_finish()

        for prompt in workload.flood_prefixes:
            engine.submit(prompt, SamplingParams(max_tokens=1), on_output, namespace="flood", fairness_key="flood")
    run_until(engine, submit_all, lambda: len(finals) == len(workload.flood_prefixes))


def run_pass(runner, config: EngineConfig, workload: FairnessWorkload, *, with_flood: bool, label: str,
             progress: Progress | None) -> dict:
    engine = Engine(config, runner=runner)
    warm(engine, workload)
    cold_finals: list[RequestOutput] = []
    flood_finals: list[RequestOutput] = []
    prompts = iter(workload.flood_prompts if with_flood else [])
    num_flood = len(workload.flood_prompts) if with_flood else 0
    finished_at: dict[str, float] = {}
    flood_params = SamplingParams(max_tokens=workload.flood_max_tokens, ignore_eos=True)
    cold_params = SamplingParams(max_tokens=workload.cold_max_tokens, ignore_eos=True)

    def submit_flood() -> None:
        prompt = next(prompts, None)
        if prompt is not None:
            engine.submit(prompt, flood_params, on_flood, namespace="flood", fairness_key="flood")

    def is_done() -> bool:
        return len(cold_finals) == workload.num_cold and len(flood_finals) == num_flood

    def on_flood(output: RequestOutput) -> None:  # on the step loop
        if output.is_finished:
            flood_finals.append(output)
            finished_at["flood"] = time.perf_counter()
            submit_flood()
            if is_done():
                engine.shutdown()

    def submit_all(on_finish) -> None:
        def on_cold(output: RequestOutput) -> None:
            if output.is_finished:
                cold_finals.append(output)
                finished_at["cold"] = time.perf_counter()
                if progress:
                    progress(label, len(cold_finals))
                on_finish()

        def cold_client() -> None:
            started = time.perf_counter()
            for index, prompt in enumerate(workload.cold_prompts):
                time.sleep(max(0.0, started + index * workload.cold_gap_s - time.perf_counter()))
                engine.submit(prompt, cold_params, on_cold, namespace="cold", fairness_key="cold")

        for _ in range(workload.flood_concurrency if with_flood else 0):
            submit_flood()
        threading.Thread(target=cold_client, name="bench-cold-client", daemon=True).start()

    started = time.perf_counter()
    run_until(engine, submit_all, is_done)
    wall_s = time.perf_counter() - started
    done = flood_finals + cold_finals
    flush_and_check(engine, done)
    ttfts = [f.usage.ttft_s * 1000 for f in cold_finals]
    prompt = sum(f.usage.prompt_tokens for f in done)
    return {
        "cold_ttft_p50_ms": float(np.percentile(ttfts, 50)),
        "cold_ttft_p99_ms": float(np.percentile(ttfts, 99)),
        "hit_rate": sum(f.usage.cached_tokens for f in done) / prompt,
        "flood_requests": len(done) - len(cold_finals),
        "flood_requests_per_s": (len(done) - len(cold_finals)) / wall_s,
        "wall_s": wall_s,
        "flood_outlasted_cold": with_flood and finished_at.get("flood", 0.0) >= finished_at["cold"],
    }


def median_of(runs: list[dict]) -> dict:
    """Medians of the figures; a yes/no figure holds only if it held in every run."""
    return {key: all(run[key] for run in runs) if isinstance(runs[0][key], bool)
            else statistics.median(run[key] for run in runs) for key in runs[0]}


def run_fairness_bench(runner, config: EngineConfig, workload: FairnessWorkload, *, repeat: int = 1,
                       policies: tuple[str, ...] = POLICIES, progress: Progress | None = None,
                       report: Callable[[str, dict], None] | None = None) -> dict:
    """Every policy alone and under the flood, `repeat` times interleaved; medians per policy.
    report(label, figures) is called after each pass."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for round_index in range(repeat):
        for policy in policies:
            for mode in ("alone", "flood"):
                label = f"{policy} {mode} #{round_index + 1}"
                result = run_pass(runner, replace(config, policy=policy), workload, with_flood=mode == "flood",
                                  label=label, progress=progress)
                runs.setdefault((policy, mode), []).append(result)
                if report:
                    report(label, result)
    per_policy = {}
    for policy in policies:
        alone, flood = median_of(runs[(policy, "alone")]), median_of(runs[(policy, "flood")])
        per_policy[policy] = {"alone": alone, "flood": flood,
                              "ttft_p50_ratio": flood["cold_ttft_p50_ms"] / alone["cold_ttft_p50_ms"]}
    return {"repeat": repeat, "policies": per_policy, **verdict(per_policy)}


def verdict(per_policy: dict) -> dict:
    """Whether the fair policy keeps the cold tenant within MAX_TTFT_RATIO and the hit rate near lpm's."""
    if "fair" not in per_policy or "lpm" not in per_policy:
        return {}
    fair, lpm = per_policy["fair"], per_policy["lpm"]
    gap = (lpm["flood"]["hit_rate"] - fair["flood"]["hit_rate"]) * 100
    return {"fair_ttft_p50_ratio": fair["ttft_p50_ratio"], "hit_gap_points_vs_lpm": gap,
            "holds": fair["ttft_p50_ratio"] <= MAX_TTFT_RATIO and gap <= MAX_HIT_GAP_POINTS}
