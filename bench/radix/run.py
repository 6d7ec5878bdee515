"""bench radix: replay a token-id trace through RadixCache (and SGLang's, side by side).

Per request, as a scheduler would: match the longest cached prefix and lock
it; if the pool lacks pages for the rest, evict; allocate, insert the whole
page-aligned sequence, unlock. Timings: match_s (match + lock), evict_s
(the free-page check + evict), insert_s (allocate + insert + unlock), each
summed wall-clock time; requests_per_s = requests / CPU seconds of the whole
replay loop (time.process_time), so that other load on a shared machine
skews neither side of a comparison (wall_s is reported too). The trace is
turned into int32 bytes before the clock starts (SGLang's replay likewise
gets its int64 arrays ready first). Both replays run with the garbage
collector frozen over what existed before the replay (gc.freeze()).

memory_bytes: a deep size of the tree once the whole trace is replayed —
node objects, key and page byte strings, child dicts and their keys, the
eviction heap — not the KV pool's own free list and counts.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from engine import KVPool, RadixCache
from bench.workloads.trace import Trace

RESULT_KEYS = (
    "requests", "requests_per_s", "hit_rate", "match_s", "insert_s", "evict_s",
    "peak_nodes", "page_size", "capacity", "memory_bytes",
)
COMPARE_KEYS = (
    "sglang_requests_per_s", "sglang_hit_rate", "ratio",
    "sglang_unified_requests_per_s", "unified_ratio", "sglang_memory_bytes", "memory_ratio",
)
# a script run by another venv's python (never imported), and the checkout it imports radixgate from
SGLANG_REPLAY_SCRIPT = Path(__file__).with_name("sglang_replay.py")
RADIXGATE_ROOT = Path(__file__).resolve().parents[2]  # bench/radix/run.py -> the repository root
PROGRESS_EVERY = 250


def replay(trace: Trace, page_size: int, capacity: int | None, *, progress: bool = True) -> tuple[dict, RadixCache]:
    """One replay of the trace; returns (result dict, the cache it built)."""
    requests = trace.request_bytes()
    tenants = trace.tenant.tolist()
    capacity = capacity or trace.num_tokens
    longest = max(len(r) for r in requests) >> 2
    if capacity < longest:
        raise ValueError(f"capacity {capacity} tokens is below the longest request ({longest} tokens)")
    pool = KVPool(capacity // page_size, page_size)
    cache = RadixCache(pool)
    match_s = insert_s = evict_s = 0.0
    hit_tokens = total_tokens = peak_nodes = 0
    clock = time.perf_counter
    bar = tqdm(total=len(requests), desc=f"radixgate ps={page_size}", unit="req", disable=not progress, leave=False)
    gc.collect()
    gc.freeze()
    cpu0, wall0 = time.process_time(), clock()
    try:
        for index, data in enumerate(requests):
            namespace = tenants[index]
            t0 = clock()
            match = cache.match_prefix(namespace, data)
            cache.lock(match.node)
            t1 = clock()
            num_new = (len(data) >> 2) // page_size - match.length // page_size
            num_free = pool.num_free_pages
            if num_free < num_new:
                cache.evict(num_new - num_free)
            t2 = clock()
            cache.insert(namespace, data, match.page_bytes + pool.allocate_bytes(num_new))
            cache.unlock(match.node)
            t3 = clock()
            match_s += t1 - t0
            evict_s += t2 - t1
            insert_s += t3 - t2
            hit_tokens += match.length
            total_tokens += len(data) >> 2
            if cache.num_nodes > peak_nodes:
                peak_nodes = cache.num_nodes
            if index % PROGRESS_EVERY == PROGRESS_EVERY - 1:
                bar.update(PROGRESS_EVERY)
    finally:
        cpu_s, wall_s = time.process_time() - cpu0, clock() - wall0
        gc.unfreeze()
        bar.close()
    result = {
        "requests": len(requests),
        "requests_per_s": len(requests) / cpu_s,
        "hit_rate": hit_tokens / total_tokens,
        "match_s": match_s,
        "insert_s": insert_s,
        "evict_s": evict_s,
        "peak_nodes": peak_nodes,
        "page_size": page_size,
        "capacity": capacity,
        "cpu_s": cpu_s,
        "wall_s": wall_s,
    }
    return result, cache


def tree_memory_bytes(cache: RadixCache) -> int:
    """Deep size of the tree's objects (nodes, byte strings, dicts, heap), each object once."""
    seen: set[int] = set()
    size = 0

    def add(obj) -> None:
        nonlocal size
        if id(obj) not in seen:
            seen.add(id(obj))
            size += sys.getsizeof(obj)

    for state in cache._namespaces.values():
        add(state)
        stack = [state.root]
        while stack:
            node = stack.pop()
            for obj in (node, node.key, node.pages, node.last_access):
                add(obj)
            if node.children:
                add(node.children)
                for key, child in node.children.items():
                    add(key)
                    stack.append(child)
    add(cache._heap)
    for entry in cache._heap:
        add(entry)
        add(entry[0])
        add(entry[1])
    add(cache._namespaces)
    return size


def run_radixgate(trace: Trace, page_size: int, capacity: int | None, repeat: int, progress: bool = True) -> dict:
    """Medians over `repeat` replays, plus each run under "runs"."""
    runs = []
    memory_bytes = 0
    for run in range(repeat):
        result, cache = replay(trace, page_size, capacity, progress=progress)
        if run == 0:
            memory_bytes = tree_memory_bytes(cache)
        del cache
        runs.append(result)
    summary = _medians(runs)
    summary["memory_bytes"] = memory_bytes
    summary["repeat"] = repeat
    summary["runs"] = runs
    return summary


def _medians(runs: list[dict]) -> dict:
    keys = [k for k in runs[0] if isinstance(runs[0][k], (int, float))]
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def run_sglang(trace_path: str, page_size: int, capacity: int | None, repeat: int, python: str, *,
               progress: bool = True, with_unified: bool = True) -> dict:
    """SGLang's RadixCache (and UnifiedRadixCache if importable) in the venv of `python`."""
    cmd = [python, str(SGLANG_REPLAY_SCRIPT), "--trace", trace_path, "--page-size", str(page_size),
           "--repeat", str(repeat), "--radixgate-root", str(RADIXGATE_ROOT)]
    if capacity:
        cmd += ["--capacity", str(capacity)]
    if not progress:
        cmd.append("--quiet")
    if not with_unified:
        cmd.append("--no-unified")
    env = {**os.environ, "PYTHONPATH": "", "TQDM_DISABLE": "" if progress else "1"}
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"SGLang replay failed (exit {done.returncode}): {' '.join(cmd)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare_with_sglang(result: dict, trace: Trace, trace_path: str | None, python: str,
                        progress: bool = True, with_unified: bool = True) -> dict:
    """Adds sglang_* keys and ratios to a radixgate result (same trace, same run).

    The ratios come from the SGLang process, which replays radixgate too,
    alternating with SGLang's runs, so a busy machine skews both alike.
    """
    with tempfile.TemporaryDirectory() as tmp:
        if trace_path is None:
            trace_path = os.path.join(tmp, "trace.npz")
            trace.save(trace_path)
        other = run_sglang(trace_path, int(result["page_size"]), int(result["capacity"]),
                           int(result["repeat"]), python, progress=progress, with_unified=with_unified)
    merged = dict(result)
    merged.update(other)  # ratio / unified_ratio: medians of paired, alternating runs in one process
    if other.get("sglang_memory_bytes"):
        merged["memory_ratio"] = result["memory_bytes"] / other["sglang_memory_bytes"]
    return merged


def report(result: dict) -> dict:
    """The JSON written: the issue's keys (medians), the comparison's keys, everything else under details."""
    top = [k for k in RESULT_KEYS + COMPARE_KEYS if k in result]
    out = {k: result[k] for k in top}
    out["details"] = {k: v for k, v in result.items() if k not in out}
    return out
