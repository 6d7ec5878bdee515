"""Linears that keep a GGUF file's own quantized blocks for generated rows (engine.kernels.cpu.gguf_blocks).

    keep_gguf_blocks(path)   a context in which make_linear (engine.kernels) looks each quantized weight up
                             in that file first (the runner opens it around building the model)
    gguf_block_linear(weight, bias, quantization, native)   the linear over the file's blocks of ``weight``,
                             or None (no file open, no native kernels, or a weight the file does not hold
                             exactly: make_linear then requantizes it as before)
    GgufBlockLinear          prompt rows: the dense product over ``weight`` (the file's dequantized values in
                             the model dtype); generated rows (``by_row``): the native kernels over the
                             file's q and scales, pieces of one kind stacked, int4 (Q4_K, Q4_1) and int8
                             (Q6_K, Q5_0, Q8_0, Q4_0) pieces of a fused weight run one after the other;
                             K-quants keep their super-block scales (Int4SuperRowLinear, Int8SuperRowLinear:
                             4.6 and 8.6 bits a weight) where every piece of a kernel is the same K-quant

Any weight-only mode keeps the file's blocks: "int4" and "int8" alike run each tensor in the type the
file stores it in (a Q4_K tensor stays 4-bit, a Q6_K one 6-bit held in int8), so the generated rows
multiply by exactly the weights the float32 model has; "w4a8" and "w8a8" also quantize generated rows to
int8 per 32 inputs for the int4 pieces (llama.cpp's Q4_K x Q8_K is the same idea), while int8 pieces keep
float activations. A row's bits depend on that row only (each kernel's contract), in any batch.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.kernels.cpu.gguf_blocks import BlockWeight, GgufBlocks, stack_rows
from engine.kernels.cpu.native import native_for
from engine.kernels.cpu.packed_linear import dense_linear
from engine.kernels.cpu.row_linear import (Int4DotRowLinear, Int4RowLinear, Int4SuperRowLinear, Int8RowLinear,
                                          Int8SuperRowLinear)

logger = logging.getLogger(__name__)



@dataclass
class OpenGguf:
    """The file keep_gguf_blocks opened, and what its linears took from it."""

    blocks: GgufBlocks
    kept: list[int] = field(default_factory=list)  # bytes of each weight kept as the file's blocks
    missed: int = 0  # quantized weights the file did not hold exactly (requantized)


_OPEN_FILE: contextvars.ContextVar[OpenGguf | None] = contextvars.ContextVar("radixgate_gguf_blocks", default=None)


@contextlib.contextmanager
def keep_gguf_blocks(path: str | Path | None):
    """Within the block, quantized linears take ``path``'s own blocks where it holds their weights (None: no
    file, nothing changes). Logs how many weights and bytes were kept when the block ends."""
    if path is None:
        yield None
        return
    opened = OpenGguf(GgufBlocks(path))
    token = _OPEN_FILE.set(opened)
    try:
        yield opened
    finally:
        _OPEN_FILE.reset(token)
        logger.info("kept %d weights as %s's own blocks (%.0f MB read per generated row), %d requantized",
                    len(opened.kept), Path(path).name, sum(opened.kept) / 1e6, opened.missed)


def gguf_block_linear(weight: torch.Tensor, bias: torch.Tensor | None, quantization: str, native: bool = True):
    """GgufBlockLinear over the open file's blocks of ``weight``, or None (module docstring)."""
    opened = _OPEN_FILE.get()
    if opened is None or quantization == "none":
        return None
    kernels = native_for(weight.dtype, weight.device, native)
    pieces = opened.blocks.find(weight) if kernels is not None else None
    if pieces is None:
        opened.missed += 1
        return None
    linear = GgufBlockLinear(kernels, weight, bias, pieces, int8_activations=quantization in ("w4a8", "w8a8"))
    opened.kept.append(linear.by_row.num_bytes)
    return linear


class BlockRows:
    """Generated rows over a weight's pieces: consecutive pieces of one kind stacked into one kernel, the
    outputs of several kernels concatenated in order, then the bias."""

    def __init__(self, native, pieces: list[BlockWeight], bias: torch.Tensor | None, int8_activations: bool) -> None:
        runs: list[list[BlockWeight]] = []
        for piece in pieces:
            if runs and runs[-1][0].kind == piece.kind:
                runs[-1].append(piece)
            else:
                runs.append([piece])
        self.parts = [self._kernel(native, stack_rows(run), int8_activations) for run in runs]
        self.num_bytes = sum(part.num_bytes for part in self.parts)  # read per pass (bench decode's limit)
        self.bias = bias

    @staticmethod
    def _kernel(native, weight: BlockWeight, int8_activations: bool):
        """The compact K-quant kernels where every piece is a K-quant (Q4_K, Q6_K), else the float32 scales."""
        if weight.super_scales is not None and weight.kind == "int4":
            return Int4SuperRowLinear(native, weight.q, *weight.super_scales, int8_activations=int8_activations)
        if weight.super_scales is not None:
            return Int8SuperRowLinear(native, weight.q, *weight.super_scales)
        if weight.kind == "int4":
            rows = Int4DotRowLinear if int8_activations else Int4RowLinear
            return rows(native, weight.q, weight.scale, weight.minimum)
        return Int8RowLinear(native, weight.q, weight.scale)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        outs = [part(x) for part in self.parts]
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)
        return out if self.bias is None else out + self.bias


class GgufBlockLinear:
    """x -> x @ weight.T + bias: prompt rows dense over ``weight``, generated rows (``by_row``) over the file's
    blocks, whose float32 dequantization is ``weight`` (module docstring)."""

    def __init__(self, native, weight: torch.Tensor, bias: torch.Tensor | None, pieces: list[BlockWeight],
                 int8_activations: bool = False) -> None:
        self.bias = bias
        self.prompt_rows = dense_linear(weight, bias, by_row=False)
        self.by_row = BlockRows(native, pieces, bias, int8_activations)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.prompt_rows(x)
