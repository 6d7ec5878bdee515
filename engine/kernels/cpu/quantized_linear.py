"""Weight-only quantized linears, GGUF's blocks of 32 inputs: int8 as Q8_0, int4 as Q4_1.

    Int8WeightLinear   weight stored int8, one float16 scale per GROUP_SIZE inputs of a row
    Int4WeightLinear   weight stored 4-bit, one (scale, min) pair per GROUP_SIZE inputs of a row;
                       ``aten._weight_int4pack_mm_for_cpu`` over the weight packed once for it, where
                       the native kernels do not build; with ``int8_activations`` (the "w4a8" mode)
                       generated rows are quantized to int8 per GROUP_SIZE inputs and multiplied by byte
                       dot products (llama.cpp's Q4_1 x Q8_1), ~2x the float lane kernel at batch 1;
                       int8 likewise (the "w8a8" mode, Q8_0 x Q8_0: w4a8's LM head)

A model loaded from a GGUF file does not come here for the weights the file holds: make_linear keeps the
file's own blocks for them (Q4_K, Q6_K, Q5_0, Q8_0, ...: engine.kernels.cpu.gguf_linear), which this module's
Q4_1/Q8_0 re-quantization would round a second time. What follows is the path of every other weight.

Only the weights are quantized (w4a8 and w8a8 also round generated rows' activations, below): activations
stay in the model dtype and each kernel accumulates in float32, so a row's result depends only on that
row (both kernels loop over rows independently: a row gets the same bits in any batch;
tests/unit/engine/kernels/test_quantized_linear.py checks it). What it
costs in accuracy against the float32 model is what ``radixgate bench accuracy`` measures.

Where the native kernels build, int4 is a decode format: prompt rows run the dense product
(engine.kernels.cpu.packed_linear) over the dequantized weight, the same values the int4 kernels use, since
torch's int4 kernel is 0.4x of dense at prefill on AVX-512 and ~80x slower on AVX2 (docs/performance.md);
the dense copy costs the unquantized model's memory. Generated rows (decode and verify) run on ``by_row``
(engine.kernels.cpu.row_linear): int4 on the same q, scale and min, lane-packed; int8 of float32 models on the
same q and scales, lane-packed (torch's int8 kernel took 14.3 ms for a 49152 x 576 head row on AVX2);
int8 of bfloat16 models on the dequantized weight in bfloat16 (the CPU's bfloat16 dot product beat torch's
int8 kernel). int8 keeps no torch kernel: without the native kernels every row runs the dense product.
Other bits than the prompt rows' product; the same for any batch. w4a8 and w8a8 change only the generated rows:
they lose what 8-bit activations lose (``radixgate bench accuracy --quantization w4a8`` measures it);
prompt rows stay the float product.

Rounding. int8 is GGUF's Q8_0 block: per group of 32 inputs a float16 scale = max |w| / 127 and
w = q * scale (exact in float32), so a Q8_0 weight (the default SmolLM2's embedding, its tied head) comes
back bit for bit. int4 is GGUF's Q4_1 block: per group of 32 inputs the [min, max] maps onto 0..15 with a
float16 scale = (max - min) / 15 and a float16 min, and w = q * scale + min. A model whose weights came
from a Q4_1 GGUF (the default SmolLM2) is therefore lossless in int4: each group's min is its Q4_1 min, its
scale rounds back to the Q4_1 scale, and q * scale + min (q * scale is exact in float32) gives each float32
weight back bit for bit, so prompt rows get the float32 model's bits and generated rows differ from them
by the order of float32 sums only. torch's int4 kernel, where it runs, reads the same values as
(q - 8) * scale + zero with zero = min + 8 * scale.
"""

from __future__ import annotations

import torch

from engine.kernels.cpu.native import native_for
from engine.kernels.cpu.packed_linear import dense_linear
from engine.kernels.cpu.row_linear import Int4DotRowLinear, Int4RowLinear, Int8DotRowLinear, Int8RowLinear, RowLinear

GROUP_SIZE = 32  # inputs per int8 scale / int4 (scale, min) pair; every quantized in_features divides by it
INNER_K_TILES = 2  # the packing's K tiling (the kernel accepts 2, 4 or 8)


def int4_applies(weight: torch.Tensor) -> bool:
    """True where the int4 kernel takes this (out_features, in_features) weight: whole groups of inputs, and
    outputs in the multiples of 16 that torch's packing needs."""
    return weight.shape[1] % GROUP_SIZE == 0 and weight.shape[0] % 16 == 0


def quantize_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight (out, in) -> q (out, in) int8 in -127..127 and scale (out, in / GROUP_SIZE) float16 with
    w ~ q * scale per group (bit for bit where the group already is a Q8_0 block; module docstring)."""
    out_features, in_features = weight.shape
    groups = weight.float().view(out_features, in_features // GROUP_SIZE, GROUP_SIZE)
    scale = (groups.abs().amax(dim=-1) / 127).to(torch.float16)
    if not torch.isfinite(scale).all():
        raise ValueError("int8 needs weights whose groups fit float16's range")
    step = scale.float()[..., None]
    q = (groups / step.clamp(min=torch.finfo(torch.float32).tiny)).round().clamp(-127, 127)
    q = torch.where(step > 0, q, 0).to(torch.int8)  # an all-zero group (or one below float16's range): zeros
    return q.view(out_features, in_features), scale


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q (out, in) int8, scale (out, in / GROUP_SIZE) -> the float32 weight q * scale."""
    return (q.float().view(q.shape[0], -1, GROUP_SIZE) * scale.float()[..., None]).view(q.shape)


class Int8WeightLinear:
    """x -> x @ (q * scale).T + bias with q int8 (out_features, in_features) and a scale per GROUP_SIZE inputs.

    Prompt rows run the dense product over the dequantized weight; generated rows of a float32 model the int8
    kernel over q and scale (a quarter of the bytes), of a bfloat16 model the CPU's bfloat16 dot product over
    the dequantized weight (it beat every int8 kernel tried there). One weight for both kinds of row.
    ``int8_activations`` (w8a8, and the head of w4a8): generated rows are quantized to int8 per group and
    multiplied by byte dot products over q (llama.cpp's Q8_0 x Q8_0), in either dtype."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None,
                 int8_activations: bool = False, native: bool = True) -> None:
        """``native``: give generated rows the native kernels where they build (False: torch's kernels only)."""
        if weight.shape[1] % GROUP_SIZE:
            raise ValueError(f"int8 needs in_features divisible by {GROUP_SIZE}, got {weight.shape[1]}")
        q, scale = quantize_int8(weight)
        dequantized = dequantize_int8(q, scale).to(weight.dtype)
        self.bias = bias  # (out_features,) or None
        self.prompt_rows = dense_linear(dequantized, bias, by_row=False)
        native = native_for(weight.dtype, weight.device) if native else None
        if native is None:
            self.by_row = None
        elif int8_activations:
            self.by_row = Int8DotRowLinear(native, q, scale, bias)
        elif weight.dtype == torch.float32:
            self.by_row = Int8RowLinear(native, q, scale, bias)
        else:
            self.by_row = RowLinear(native, dequantized, bias)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.prompt_rows(x)


def quantize_int4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """weight (out, in) -> q (out, in) int32 in 0..15 and scale, min (out, in / GROUP_SIZE) float16 with
    w ~ q * scale + min per group (bit for bit where the group already is such a block; module docstring)."""
    out_features, in_features = weight.shape
    groups = weight.float().view(out_features, in_features // GROUP_SIZE, GROUP_SIZE)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)  # (out_features, num_groups)
    scale, minimum = ((high - low) / 15).to(torch.float16), low.to(torch.float16)
    if not (torch.isfinite(scale).all() and torch.isfinite(minimum).all()):
        raise ValueError("int4 needs weights whose groups fit float16's range")
    step, base = scale.float()[..., None], minimum.float()[..., None]
    q = ((groups - base) / step.clamp(min=torch.finfo(torch.float32).tiny)).round().clamp(0, 15)
    q = torch.where(step > 0, q, 0).to(torch.int32)  # a constant group (or one below float16's range): its min
    return q.view(out_features, in_features), scale, minimum


def dequantize_int4(q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor) -> torch.Tensor:
    """q (out, in) in 0..15, scale/min (out, in / GROUP_SIZE) -> the float32 weight q * scale + min."""
    groups = q.float().view(q.shape[0], -1, GROUP_SIZE)
    return (groups * scale.float()[..., None] + minimum.float()[..., None]).view(q.shape)


class Int4WeightLinear:
    """x -> x @ dequant(q).T + bias with q 4-bit (packed once) and a (scale, min) pair per GROUP_SIZE inputs;
    ``int8_activations``: generated rows quantized to int8 per group (w4a8) where the native kernels build."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None,
                 int8_activations: bool = False, native: bool = True) -> None:
        """``native``: give generated rows the native kernels where they build (False: torch's kernels only)."""
        out_features, in_features = weight.shape
        if in_features % GROUP_SIZE:
            raise ValueError(f"int4 needs in_features divisible by {GROUP_SIZE}, got {in_features}")
        q, scale, minimum = quantize_int4(weight)
        self.bias = bias
        native = native_for(weight.dtype, weight.device) if native else None
        self.by_row = self.prompt_rows = self.packed = self.scale_and_zero = None
        if native is None:  # torch's kernel: (q - 8) * scale + zero, in (num_groups, out_features, 2)
            zero = minimum.float() + 8 * scale.float()
            pairs = torch.stack([scale.float(), zero], dim=-1)
            self.scale_and_zero = pairs.transpose(0, 1).contiguous().to(weight.dtype)
            self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, INNER_K_TILES)
        else:  # both kinds of row see one weight
            rows = Int4DotRowLinear if int8_activations else Int4RowLinear
            self.by_row = rows(native, q, scale, minimum, bias)
            self.prompt_rows = dense_linear(dequantize_int4(q, scale, minimum).to(weight.dtype), bias, by_row=False)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.prompt_rows is not None:
            return self.prompt_rows(x)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(x.contiguous(), self.packed, GROUP_SIZE,
                                                         self.scale_and_zero)
        return out if self.bias is None else out + self.bias
