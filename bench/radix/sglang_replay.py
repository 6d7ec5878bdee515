"""A bench resource, not a radixgate module: the script `bench radix --compare sglang` runs to
replay a trace through SGLang's RadixCache.

It runs with the python of a SEPARATE venv that has sglang installed (see
../shared/bench/sglang-radix-requirements.txt); radixgate never imports it, and
bench/radix/run.py finds it beside itself (SGLANG_REPLAY_SCRIPT). It
prints progress on stderr and one JSON line on stdout.

With --radixgate-root (the checkout, put on sys.path) it also replays radixgate
(bench.radix.run.replay, which needs only the engine: torch,
transformers, numpy, tqdm) in this same process, alternating runs with
SGLang's, and reports the ratio as the median of the paired runs' ratios: both
sides then see the same machine load at nearly the same moment. The replay
mirrors run.py exactly: per request match, lock, evict if the capacity lacks
room for the new tokens, insert the page-aligned sequence, unlock;
requests_per_s = requests / CPU seconds of the loop, with gc frozen over what
existed before. Keys (RadixKey over int64 arrays) and value tensors (views of
one int64 arange) are built before the clock starts; all requests go into one
tree (no extra_key), SGLang's cheapest path, which gives the same hits here
because every tenant has its own system prompt.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import sys
import time
from array import array

import numpy as np


class CountingAllocator:
    """Stands in for SGLang's token-to-KV allocator: eviction hands pages back here."""

    device = "cpu"

    def __init__(self) -> None:
        self.num_freed = 0

    def free_segment(self, indices, start_pos: int = 0) -> None:
        self.num_freed += len(indices)

    def free(self, indices) -> None:
        self.num_freed += len(indices)


def load(path: str):
    with np.load(path) as data:
        return data["tokens"].astype(np.int64), data["offsets"].astype(np.int64)


def prepare(tokens, offsets, page_size: int):
    import torch
    from sglang.srt.mem_cache.radix_cache import RadixKey

    keys, values, lengths = [], [], []
    base = torch.arange(len(tokens), dtype=torch.int64)
    for i in range(len(offsets) - 1):
        start, stop = int(offsets[i]), int(offsets[i + 1])
        ids = array("q")
        ids.frombytes(tokens[start:stop].tobytes())
        keys.append(RadixKey(ids))
        aligned = (stop - start) // page_size * page_size
        values.append(base[start : start + aligned])
        lengths.append((stop - start, aligned))
    return keys, values, lengths


def replay_python(keys, values, lengths, page_size: int, capacity: int | None, quiet: bool):
    """SGLang's Python RadixCache; returns (result, tree) so the caller can measure the tree."""
    from sglang.srt.mem_cache.radix_cache import RadixCache

    tree = RadixCache.create_simulated(page_size=page_size, mock_allocator=CountingAllocator())

    def lock(node):
        tree.inc_lock_ref(node)
        return node

    result = replay(tree, lock, tree.dec_lock_ref, keys, values, lengths, capacity,
                    desc=f"sglang ps={page_size}", quiet=quiet)
    return result, tree


def replay(tree, lock, unlock, keys, values, lengths, capacity: int | None, *, desc: str, quiet: bool) -> dict:
    """Per request: match, lock, evict if capacity lacks room for the new tokens, insert, unlock.

    `lock(node)` returns the handle that `unlock` takes (the two SGLang trees lock differently).
    requests_per_s counts CPU seconds of the loop only, with gc frozen over what existed before.
    """
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
    from tqdm import tqdm

    match_s = insert_s = evict_s = 0.0
    hits = total = 0
    clock = time.perf_counter
    bar = tqdm(total=len(keys), desc=desc, unit="req", disable=quiet, leave=False, file=sys.stderr)
    gc.collect()
    gc.freeze()
    cpu0, wall0 = time.process_time(), clock()
    for i, key in enumerate(keys):
        t0 = clock()
        result = tree.match_prefix(MatchPrefixParams(key=key))
        handle = lock(result.last_device_node)
        t1 = clock()
        num_tokens, aligned = lengths[i]
        if capacity:
            num_new = aligned - result.device_prefix_len
            num_free = capacity - tree.evictable_size() - tree.protected_size()
            if num_free < num_new:
                tree.evict(EvictParams(num_tokens=num_new - num_free))
        t2 = clock()
        tree.insert(InsertParams(key=key, value=values[i]))
        unlock(handle)
        t3 = clock()
        match_s += t1 - t0
        evict_s += t2 - t1
        insert_s += t3 - t2
        hits += result.device_prefix_len
        total += num_tokens
        if i % 250 == 249:
            bar.update(250)
    cpu_s, wall_s = time.process_time() - cpu0, clock() - wall0
    gc.unfreeze()
    bar.close()
    return {"requests_per_s": len(keys) / cpu_s, "hit_rate": hits / total, "match_s": match_s,
            "insert_s": insert_s, "evict_s": evict_s, "cpu_s": cpu_s, "wall_s": wall_s}


def make_unified(page_size: int):
    """SGLang's UnifiedRadixCache with its Rust tree core (full attention only)."""
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    set_global_server_args_for_scheduler(ServerArgs(model_path="dummy", page_size=page_size))
    allocator = CountingAllocator()
    allocator.page_size = page_size
    params = CacheInitParams(
        disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=allocator, page_size=page_size,
        tree_components=(ComponentType.FULL,), tree_core_backend="rust",
    )
    cache = UnifiedRadixCache(params)
    if cache._tree_core_backend != "rust":
        raise RuntimeError(f"UnifiedRadixCache fell back to the {cache._tree_core_backend} tree core")
    return cache


def replay_unified(keys, values, lengths, page_size: int, capacity: int | None, quiet: bool) -> dict:
    tree = make_unified(page_size)
    return replay(tree, tree.lock, tree.unlock, keys, values, lengths, capacity,
                  desc=f"sglang unified ps={page_size}", quiet=quiet)


def deep_size(tree) -> int:
    """Python objects of the tree (nodes, their dicts, keys, arrays, tensors with storage), once each."""
    import torch
    from sglang.srt.mem_cache.radix_cache import TreeNode

    seen: set[int] = set()
    storages: set[int] = set()
    size = 0
    stack = [tree.root_node, tree.evictable_leaves]
    while stack:
        obj = stack.pop()
        if obj is None or id(obj) in seen or isinstance(obj, (type, bool)):
            continue
        seen.add(id(obj))
        size += sys.getsizeof(obj)
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if storage.data_ptr() not in storages:
                storages.add(storage.data_ptr())
                size += storage.nbytes()
        elif isinstance(obj, TreeNode):
            stack.append(vars(obj))
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__slots__") and not isinstance(obj, array):
            stack.extend(getattr(obj, name, None) for name in obj.__slots__)
    return size


def main() -> None:
    logging.disable(logging.WARNING)  # stderr carries the progress bars, stdout the one JSON line
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", required=True)
    parser.add_argument("--page-size", type=int, default=1)
    parser.add_argument("--capacity", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--no-unified", action="store_true")
    parser.add_argument("--radixgate-root", help="Also replay radixgate here, alternating runs (paired ratios).")
    args = parser.parse_args()
    tokens, offsets = load(args.trace)
    ours = load_radixgate(args) if args.radixgate_root else None
    runs, unified, paired, memory = [], [], [], 0
    for run in range(args.repeat):
        if ours is not None:
            paired.append(ours())
        keys, values, lengths = prepare(tokens, offsets, args.page_size)
        result, tree = replay_python(keys, values, lengths, args.page_size, args.capacity or None, args.quiet)
        if run == 0:
            memory = deep_size(tree)
        runs.append(result)
        del tree, keys, values
        if not args.no_unified:
            unified.append(run_unified(tokens, offsets, args))
    out = {f"sglang_{k}": statistics.median(r[k] for r in runs) for k in runs[0]}
    out["sglang_memory_bytes"] = memory
    out["sglang_runs"] = runs
    out.update(summarize(unified, paired, runs))
    print(json.dumps(out))


def load_radixgate(args):
    """A closure replaying radixgate on the same trace in this process (radixgate needs only numpy/torch)."""
    sys.path.insert(0, args.radixgate_root)
    from bench.radix.run import replay
    from bench.workloads.trace import load_trace

    trace = load_trace(args.trace)

    def run() -> dict:
        result, _ = replay(trace, args.page_size, args.capacity or None, progress=not args.quiet)
        return result

    return run


def summarize(unified: list[dict], paired: list[dict], runs: list[dict]) -> dict:
    """Unified medians (or its error) and ratios of alternating runs in this one process."""
    out = {}
    errors = [u["error"] for u in unified if "error" in u]
    if errors:
        out["sglang_unified_error"] = errors[0]
    elif unified:
        out.update({f"sglang_unified_{k}": statistics.median(u[k] for u in unified) for k in unified[0]})
        out["sglang_unified_runs"] = unified
    if paired:
        out["paired_radixgate_runs"] = paired
        out["paired_radixgate_requests_per_s"] = statistics.median(p["requests_per_s"] for p in paired)
        out["ratio"] = statistics.median(p["requests_per_s"] / r["requests_per_s"] for p, r in zip(paired, runs))
        if unified and not errors:
            out["unified_ratio"] = statistics.median(
                p["requests_per_s"] / u["requests_per_s"] for p, u in zip(paired, unified))
    return out


def run_unified(tokens, offsets, args) -> dict:
    """One UnifiedRadixCache replay, or {"error": why} when it cannot run here."""
    try:
        keys, values, lengths = prepare(tokens, offsets, args.page_size)
        return replay_unified(keys, values, lengths, args.page_size, args.capacity or None, args.quiet)
    except Exception as error:  # an optional comparison: report why, keep the main result
        return {"error": f"{type(error).__name__}: {error}"}


if __name__ == "__main__":
    main()
