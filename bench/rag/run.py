"""bench rag: the prefix-heavy RAG workload with the radix cache on and off, in one run.

Cold-group mode (default): every request arrives at once on an empty cache,
so with the cache on one request computes the shared prefix and the others
(held back by in-batch dedup) prefill only their question. Serial mode sends
them one after another. Each mode is repeated `repeat` times on a flushed
cache; wall times are medians. One ModelRunner (and KV pool) serves every
pass: each pass builds a fresh Engine on it and flushes the tree afterwards,
checking that every page came back.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace

from engine import Engine, EngineConfig, RequestOutput, SamplingParams
from bench.pass_check import NO_QUEUE_DEADLINE_S, flush_and_check
from bench.progress import Progress
from bench.workloads.rag import RagWorkload


@dataclass
class PassResult:
    wall_s: float
    prefill_tokens: int
    cached_tokens: int
    ttft_s: list[float]
    outputs: list[list[int]]
    speculation: dict | None = None  # Engine.stats()["speculation"] at the end of the pass


def _collect(engine: Engine, workload: RagWorkload, *, serial: bool, label: str,
             progress: Progress | None) -> tuple[float, list[RequestOutput]]:
    """Replay the workload with the step loop on this thread; (wall seconds, final outputs in order)."""
    params = SamplingParams(max_tokens=workload.max_new_tokens, ignore_eos=True)
    prompts = workload.prompts
    finals: dict[int, RequestOutput] = {}

    def submit(index: int) -> None:
        engine.submit(prompts[index], params, emit_for(index))

    def emit_for(index: int):
        def emit(output: RequestOutput) -> None:  # called on the step loop, i.e. on this thread
            if not output.is_finished:
                return
            finals[index] = output
            if progress:
                progress(label, len(finals))
            if serial and index + 1 < len(prompts):
                submit(index + 1)
            if len(finals) == len(prompts):
                engine.shutdown()  # the loop stops after this step
        return emit

    started = time.perf_counter()
    for index in range(1 if serial else len(prompts)):
        submit(index)
    engine.run_here()
    wall_s = time.perf_counter() - started
    return wall_s, [finals[i] for i in range(len(prompts))]


def run_pass(runner, config: EngineConfig, workload: RagWorkload, *, serial: bool, label: str = "",
             progress: Progress | None = None) -> PassResult:
    """One replay of the workload on a fresh engine over `runner`; the pool is checked for leaks after.

    The step loop runs on the calling thread (Engine.run_here): torch's OpenMP threads are slower
    for any other thread.
    """
    engine = Engine(replace(config, max_queue_wait_s=NO_QUEUE_DEADLINE_S), runner=runner)
    wall_s, finals = _collect(engine, workload, serial=serial, label=label, progress=progress)
    speculation = engine.stats()["speculation"]
    flush_and_check(engine, finals)
    return PassResult(
        wall_s=wall_s,
        prefill_tokens=sum(f.usage.computed_prefill_tokens for f in finals),
        cached_tokens=sum(f.usage.cached_tokens for f in finals),
        ttft_s=[f.usage.ttft_s for f in finals],
        outputs=[f.output_token_ids for f in finals],
        speculation=speculation,
    )


def run_rag_bench(runner, config: EngineConfig, workload: RagWorkload, *, serial: bool = False, repeat: int = 1,
                  warmup: int = 1, progress: Progress | None = None) -> dict:
    """`warmup` untimed passes (cache on: oneDNN picks and compiles its kernels for the first shapes it sees),
    then cache on vs off, `repeat` passes each (interleaved); medians and the outputs check."""
    for round_index in range(warmup):
        run_pass(runner, replace(config, enable_radix_cache=True), workload, serial=serial,
                 label=f"warm-up #{round_index + 1}", progress=progress)
    modes = {"cache on": replace(config, enable_radix_cache=True), "cache off": replace(config, enable_radix_cache=False)}
    if config.speculative_tokens:  # the same engine without prompt-lookup speculation, side by side
        modes["no speculation"] = replace(config, enable_radix_cache=True, speculative_tokens=0)
    passes: dict[str, list[PassResult]] = {mode: [] for mode in modes}
    for round_index in range(repeat):
        for mode, mode_config in modes.items():
            passes[mode].append(run_pass(runner, mode_config, workload, serial=serial,
                                         label=f"{mode} #{round_index + 1}", progress=progress))
    on, off = passes["cache on"], passes["cache off"]
    wall_on = statistics.median(p.wall_s for p in on)
    wall_off = statistics.median(p.wall_s for p in off)
    outputs = [p.outputs for runs in passes.values() for p in runs]
    plain = passes.get("no speculation")
    speculation = None if plain is None else {
        "wall_s": statistics.median(p.wall_s for p in plain), "wall_s_all": [p.wall_s for p in plain],
        "speedup": statistics.median(p.wall_s for p in plain) / wall_on,
        "drafts": on[0].speculation,  # what the first cache-on pass drafted and accepted
        "ttft_ms_median": 1000 * statistics.median(statistics.median(p.ttft_s) for p in plain)}
    return {
        "requests": len(workload.prompts),
        "mode": "serial" if serial else "cold-group",
        "workload": workload.source,
        "prefix_tokens": workload.num_prefix_tokens,
        "repeat": repeat,
        "warmup": warmup,
        "prefill_tokens_on": on[0].prefill_tokens,
        "prefill_tokens_off": off[0].prefill_tokens,
        "prefill_ratio": on[0].prefill_tokens / max(1, off[0].prefill_tokens),
        "cached_tokens_on": on[0].cached_tokens,
        "wall_s_on": wall_on,
        "wall_s_off": wall_off,
        "wall_s_on_all": [p.wall_s for p in on],
        "wall_s_off_all": [p.wall_s for p in off],
        "speedup": wall_off / wall_on,
        "ttft_ms_median_on": 1000 * statistics.median(statistics.median(p.ttft_s) for p in on),
        "ttft_ms_median_off": 1000 * statistics.median(statistics.median(p.ttft_s) for p in off),
        "outputs_identical": all(o == outputs[0] for o in outputs),
        "without_speculation": speculation,
        "_outputs": on[0].outputs,
    }
