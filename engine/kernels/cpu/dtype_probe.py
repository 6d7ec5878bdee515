"""The CPU default dtype, chosen by measurement: bfloat16 only where its linears run clearly faster.

A CPU flag does not settle it. Four 2-core machines, SmolLM2-135M:
  * AMD EPYC with AVX512-BF16: bfloat16 prefilled 2.3x and decoded 1.5-2.7x faster than float32;
  * Intel Xeon with AVX512-BF16 but no AMX exposed (a VM): oneDNN's bfloat16 kernel ran linears at
    ~0.55x of packed float32, and the cold-group RAG bench took 13.7 s in bfloat16 against 9.9 s;
  * AVX2-only EPYC: bfloat16 is emulated, 146 s against 13 s;
  * Sapphire Rapids Xeon with AMX (a VM): bfloat16 linears ran at 1.3-3 TFLOPS, several times float32.
So ``auto`` on a CPU with native bfloat16 times one linear of each dtype, at a prefill-sized and a
decode-sized batch, the way the model runs them (on oneDNN-packed weights), and takes
bfloat16 only when it wins by ``MIN_SPEEDUP``; the margin keeps a noisy run from flipping the choice
between starts. Without native bfloat16 nothing is timed.
"""

from __future__ import annotations

import functools
import logging
import math
import time

import torch
import torch.nn.functional as F

from engine.kernels.cpu.packed_linear import PackedLinear, packing_applies

logger = logging.getLogger(__name__)

MIN_SPEEDUP = 1.2  # bfloat16 must be this much faster (geometric mean over the probe sizes)
PROBE_ROWS = (256, 16)  # a prefill chunk and a decode batch
PROBE_SHAPE = (2048, 1024)  # (out_features, in_features): a mid-sized transformer linear
PROBE_REPEATS = 3
PROBE_ROWS_PER_TIMING = 512


def cpu_has_native_bfloat16() -> bool:
    """AVX512-BF16 or AMX: without them, bfloat16 matmuls are emulated and an order of magnitude slower."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def choose_cpu_dtype() -> torch.dtype:
    """float32, or bfloat16 where the CPU has it natively and it measures at least MIN_SPEEDUP faster."""
    if not cpu_has_native_bfloat16():
        return torch.float32
    return measured_cpu_dtype(torch.get_num_threads())


@functools.cache
def measured_cpu_dtype(num_threads: int) -> torch.dtype:
    """The probe's verdict, measured and logged once per process and thread count."""
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
