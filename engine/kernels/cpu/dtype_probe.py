"""The CPU's "auto" dtype: bfloat16 only where its linears run clearly faster than float32's on this CPU.

A CPU flag does not settle it. Without native bfloat16 (engine.kernels.cpu.cpu_info)
bfloat16 is emulated, so the answer is float32 and nothing is timed. With it,
oneDNN's bfloat16 linears may still run slower than packed float32 ones on some
CPUs (docs/performance.md lists the machines). So ``auto`` on a CPU with native
bfloat16 times one linear of each dtype, at a prefill-sized and a decode-sized
batch, the way the model runs them (on oneDNN-packed weights), and takes
bfloat16 only when it wins by ``MIN_SPEEDUP``; the margin keeps a noisy timing
from flipping the choice between starts. The probe runs at first use and its
verdict is cached per process and thread count.
"""

from __future__ import annotations

import functools
import logging
import math
import time

import torch
import torch.nn.functional as F

from engine.kernels.cpu.cpu_info import cpu_has_native_bfloat16
from engine.kernels.cpu.packed_linear import PackedLinear, packing_applies

logger = logging.getLogger(__name__)

MIN_SPEEDUP = 1.2  # bfloat16 must be this much faster (geometric mean over the probe sizes)
PROBE_ROWS = (256, 16)  # a prefill chunk and a decode batch
PROBE_SHAPE = (2048, 1024)  # (out_features, in_features): a mid-sized transformer linear
PROBE_REPEATS = 3
PROBE_ROWS_PER_TIMING = 512


def choose_cpu_dtype() -> torch.dtype:
    """float32, or bfloat16 where the CPU has it natively and its linears time at least MIN_SPEEDUP faster."""
    if not cpu_has_native_bfloat16():
        return torch.float32
    return measured_cpu_dtype(torch.get_num_threads())


@functools.cache
def measured_cpu_dtype(num_threads: int) -> torch.dtype:
    """The probe's verdict, timed and logged once per process and thread count."""
    speedup = bfloat16_speedup()
    dtype = torch.bfloat16 if speedup >= MIN_SPEEDUP else torch.float32
    logger.info("auto dtype on this CPU: %s (bfloat16 linears measured %.2fx the speed of float32 on %d "
                "threads; bfloat16 needs %.1fx)", str(dtype).removeprefix("torch."), speedup, num_threads,
                MIN_SPEEDUP)
    return dtype


def bfloat16_speedup() -> float:
    """float32 time / bfloat16 time of the probe linears, geometric mean over PROBE_ROWS."""
    ratios = [_seconds(torch.float32, rows) / _seconds(torch.bfloat16, rows) for rows in PROBE_ROWS]
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


@torch.inference_mode()
def _seconds(dtype: torch.dtype, rows: int) -> float:
    """Best of PROBE_REPEATS timings of a (rows, in) x (out, in)^T linear, run as the runner would run it."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(PROBE_SHAPE, generator=gen).to(dtype)
    x = torch.randn(rows, PROBE_SHAPE[1], generator=gen).to(dtype)
    linear = PackedLinear(weight) if packing_applies(dtype, x.device) else lambda rows_in: F.linear(rows_in, weight)
    num_calls = max(1, PROBE_ROWS_PER_TIMING // rows)  # small batches: many calls, so one timing is not noise
    linear(x)  # the first call selects kernels and allocates scratch
    best = math.inf
    for _ in range(PROBE_REPEATS):
        started = time.perf_counter()
        for _ in range(num_calls):
            linear(x)
        best = min(best, time.perf_counter() - started)
    return max(best, 1e-9)
