"""The baselines of bench rag, each run `repeat` times beside radixgate's own passes.

`--vs hf` adds transformers `generate` twice (from scratch, and with prefix
reuse: hf_baseline); `--vs llamacpp` adds llama-cpp-python on the same GGUF
(llamacpp_baseline). A baseline's figures are its first run's, with the median
wall time; its greedy tokens are compared with radixgate's cache-on outputs.
A baseline that cannot run reports {"name", "error"} and never ends the bench.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from bench.progress import Progress
from bench.workloads.rag import RagWorkload

BASELINES = ("hf", "llamacpp")


def run_baselines(names: list[str], runner, workload: RagWorkload, model: str, *, repeat: int, wall_s_on: float,
                  reference: list[list[int]], progress: Progress | None = None) -> list[dict]:
    """One result per baseline run (hf gives two), with radixgate_speedup over `wall_s_on` and the share
    of requests whose greedy tokens match `reference`; raises ValueError on an unknown name."""
    import torch

    from bench.rag.hf_baseline import run_hf
    from bench.rag.llamacpp_baseline import run_llamacpp

    baselines = []
    for name in names:
        if name == "hf":
            for reuse in (False, True):
                baselines.append(median_of(repeat, lambda reuse=reuse: run_hf(
                    runner.loaded_model, workload, dtype=runner.dtype, reuse_prefix=reuse, progress=progress,
                    device=runner.device)))
        elif name == "llamacpp":
            baselines.append(median_of(repeat, lambda: run_llamacpp(
                gguf_path(model), workload.prompts, workload.max_new_tokens, num_threads=torch.get_num_threads(),
                progress=progress)))
        else:
            raise ValueError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
    for baseline in baselines:
        if "wall_s" in baseline:
            baseline["radixgate_speedup"] = baseline["wall_s"] / wall_s_on
            outputs = baseline.pop("outputs")
            baseline["outputs_match_radixgate"] = sum(a == b for a, b in zip(outputs, reference)) / len(outputs)
    return baselines


def median_of(repeat: int, run: Callable[[], dict]) -> dict:
    """A baseline run `repeat` times like radixgate's passes: the first run's result, with the median wall time
    (and every run's in wall_s_all); an error ends the repeats."""
    runs = []
    for _ in range(repeat):
        runs.append(run())
        if "wall_s" not in runs[-1]:
            return runs[-1]
    return dict(runs[0], wall_s=statistics.median(r["wall_s"] for r in runs), wall_s_all=[r["wall_s"] for r in runs])


def gguf_path(model: str) -> str | None:
    """The GGUF file behind a model spec (an alias or a .gguf path), or None."""
    from engine.models.loader import ALIASES as MODEL_ALIASES, locate_alias

    if model in MODEL_ALIASES:
        return str(locate_alias(model))
    return model if model.endswith(".gguf") else None
