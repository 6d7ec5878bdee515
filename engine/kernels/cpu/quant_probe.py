"""The CPU's "auto" weight quantization: int8 or int4 only where its decode-sized linears beat the dense ones here.

Weight-only quantization pays where a step reads more weight bytes than it
computes with, i.e. decode at small batches; whether torch's int8/int4 kernels
(engine.kernels.cpu.quantized_linear) are faster than the dense packed linear
depends on the CPU's vector units and the dtype (some paths are vectorized for
bfloat16 only). So ``auto`` times one probe linear of each mode, in the model
dtype, at DECODE_ROWS rows, and takes the fastest mode that beats dense by
MIN_SPEEDUP; the verdict is cached per dtype and thread count and logged.
"""

from __future__ import annotations

import functools
import logging
import math
import time

import torch

from engine.kernels.cpu.packed_linear import PackedLinear, packing_applies
from engine.kernels.cpu.quantized_linear import Int4WeightLinear, Int8WeightLinear
from engine.kernels.linear import TorchLinear

logger = logging.getLogger(__name__)

MODES = ("none", "int8", "int4")
MIN_SPEEDUP = 1.2  # a quantized mode must be this much faster than the dense linear at DECODE_ROWS
DECODE_ROWS = 1
PROBE_SHAPE = (2048, 1024)  # (out_features, in_features)
PROBE_REPEATS = 3
PROBE_CALLS = 64


def dense_linear(weight: torch.Tensor):
    return PackedLinear(weight) if packing_applies(weight.dtype, weight.device) else TorchLinear(weight)


LINEARS = {"none": dense_linear, "int8": Int8WeightLinear, "int4": Int4WeightLinear}


@functools.cache
def measured_cpu_quantization(dtype: torch.dtype, num_threads: int) -> str:
    """The fastest of MODES at decode rows, "none" unless a quantized mode wins by MIN_SPEEDUP; logged once."""
    seconds = {mode: probe_seconds(mode, dtype) for mode in MODES}
    best = min(("int8", "int4"), key=seconds.__getitem__)
    choice = best if seconds["none"] / seconds[best] >= MIN_SPEEDUP else "none"
    logger.info("auto quantization on this CPU (%s, %d threads): %s (decode linear speed vs dense: int8 %.2fx, "
                "int4 %.2fx; a mode needs %.1fx)", str(dtype).removeprefix("torch."), num_threads, choice,
                seconds["none"] / seconds["int8"], seconds["none"] / seconds["int4"], MIN_SPEEDUP)
    return choice


@torch.inference_mode()
def probe_seconds(mode: str, dtype: torch.dtype) -> float:
    """Best of PROBE_REPEATS timings of PROBE_CALLS decode-sized products of the probe linear in ``mode``."""
    gen = torch.Generator().manual_seed(0)
    weight = (torch.randn(PROBE_SHAPE, generator=gen) / math.sqrt(PROBE_SHAPE[1])).to(dtype)
    x = torch.randn(DECODE_ROWS, PROBE_SHAPE[1], generator=gen).to(dtype)
    linear = LINEARS[mode](weight)
    linear(x)  # the first call selects kernels and allocates scratch
    best = math.inf
    for _ in range(PROBE_REPEATS):
        started = time.perf_counter()
        for _ in range(PROBE_CALLS):
            linear(x)
        best = min(best, time.perf_counter() - started)
    return max(best, 1e-9)
