"""The CPU's "auto" weight quantization: int8 or int4 only where the step's linears get faster with it here.

Weight-only quantization pays where a step reads more weight bytes than it
computes with, i.e. decode at small batches; whether the int8/int4 kernels
(engine.kernels.cpu.quantized_linear) are faster than the dense packed linear
depends on the CPU's vector units and the dtype (some paths are vectorized for
bfloat16 only), and a kernel that wins a single-row product on a cached weight
can lose a real decode step's streamed one, and batched products several times
over (docs/performance.md, the Zen 4 section of session 12). So ``auto`` times each mode in the model
dtype on NUM_COPIES copies of the probe weight (more bytes than a CPU's caches
hold, so each product streams its weight from memory, as a model's step does),
at each of PROBE_ROWS row counts, and takes a quantized mode only when it is
MIN_SPEEDUP faster at one row and at least MIN_BATCHED as fast at every batched
count; the verdict is cached per dtype and thread count and logged with the speeds.
"""

from __future__ import annotations

import functools
import logging
import math
import time

import torch

from engine.kernels.cpu.packed_linear import dense_linear
from engine.kernels.cpu.quantized_linear import Int4WeightLinear, Int8WeightLinear

logger = logging.getLogger(__name__)

MODES = ("none", "int8", "int4")
MIN_SPEEDUP = 1.2  # a quantized mode must be this much faster than the dense linear at one row
MIN_BATCHED = 0.95  # ... and about as fast at least at every batched row count
PROBE_ROWS = (1, 8, 64)  # batch-1 decode, a decode batch, a prefill piece
DECODE_ROWS = (1, 8)  # timed on a linear's kernel for generated rows (``by_row``) where it has one
PROBE_SHAPE = (2048, 1024)  # (out_features, in_features): 4 MiB in bfloat16
NUM_COPIES = 16  # 64 MiB of bfloat16 weights (32 of int8): past the last-level cache of the CPUs seen
PROBE_REPEATS = 3


LINEARS = {  # mode -> (weight, native) -> the linear make_linear builds for it
    "none": lambda weight, native: dense_linear(weight, by_row=native),
    "int8": lambda weight, native: Int8WeightLinear(weight, native=native),
    "int4": lambda weight, native: Int4WeightLinear(weight, native=native),
}


@functools.cache
def measured_cpu_quantization(dtype: torch.dtype, num_threads: int, native: bool = True) -> str:
    """The quantized mode that wins (see the module docstring), else "none"; logged once. Batched counts are
    timed only for a mode that won the single row (a slow kernel is not timed at 64 rows for nothing)."""
    dense = {rows: probe_seconds("none", dtype, rows, native=native) for rows in PROBE_ROWS}
    speedups: dict[str, list[float]] = {}
    for mode in ("int8", "int4"):
        speedups[mode] = [dense[1] / probe_seconds(mode, dtype, 1, native=native)]
        if speedups[mode][0] >= MIN_SPEEDUP:
            speedups[mode] += [dense[rows] / probe_seconds(mode, dtype, rows, native=native) for rows in PROBE_ROWS[1:]]
    winners = [mode for mode, found in speedups.items()
               if len(found) == len(PROBE_ROWS) and min(found[1:]) >= MIN_BATCHED]
    choice = max(winners, key=lambda mode: speedups[mode][0], default="none")
    probe_linears.cache_clear()
    shown = "; ".join(f"{mode} " + ", ".join(f"{s:.2f}x" for s in speedups[mode]) for mode in speedups)
    logger.info("auto quantization on this CPU (%s, %d threads): %s (speed vs dense at %s rows: %s; a mode needs "
                "%.1fx at one row and %.2fx batched)", str(dtype).removeprefix("torch."), num_threads, choice,
                "/".join(map(str, PROBE_ROWS)), shown, MIN_SPEEDUP, MIN_BATCHED)
    return choice


@functools.lru_cache(maxsize=1)  # the last mode's copies, reused across its row counts
def probe_linears(mode: str, dtype: torch.dtype, native: bool = True) -> list:
    gen = torch.Generator().manual_seed(0)
    weight = (torch.randn(PROBE_SHAPE, generator=gen) / math.sqrt(PROBE_SHAPE[1])).to(dtype)
    return [LINEARS[mode](weight.clone(), native) for _ in range(NUM_COPIES)]


@torch.inference_mode()
def probe_seconds(mode: str, dtype: torch.dtype, rows: int, native: bool = True) -> float:
    """The best of PROBE_REPEATS timings of one ``rows``-row product on each of NUM_COPIES copies of the weight."""
    linears = probe_linears(mode, dtype, native)
    if rows in DECODE_ROWS:
        linears = [getattr(linear, "by_row", None) or linear for linear in linears]
    x = torch.randn(rows, PROBE_SHAPE[1], generator=torch.Generator().manual_seed(rows)).to(dtype)
    linears[0](x)  # the first call selects kernels and allocates scratch
    best = math.inf
    for _ in range(PROBE_REPEATS):
        started = time.perf_counter()
        for linear in linears:
            linear(x)
        best = min(best, time.perf_counter() - started)
    return max(best, 1e-9)
