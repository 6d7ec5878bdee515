"""Weight-only quantized linears on torch's own CPU kernels: int8 per output channel, int4 per group.

    Int8WeightLinear   weight stored int8, one scale per output row; ``aten._weight_int8pack_mm``
    Int4WeightLinear   weight stored 4-bit, one (scale, zero) pair per GROUP_SIZE inputs of a row;
                       ``aten._weight_int4pack_mm_for_cpu`` over the weight packed once for it, where
                       the native kernels do not build

Only the weights are quantized: activations stay in the model dtype and each kernel accumulates in
float32, so a row's result depends only on that row (both kernels loop over rows independently: a row
gets the same bits in any batch; tests/unit/engine/kernels/test_quantized_linear.py checks it). What it
costs in accuracy against the float32 model is what ``radixgate bench accuracy`` measures.

Where the native kernels build, int4 is a decode format: prompt rows run the dense product
(engine.kernels.cpu.packed_linear) over the dequantized weight, the same values the int4 kernels use, since
torch's int4 kernel is 0.4x of dense at prefill on AVX-512 and ~80x slower on AVX2 (docs/performance.md);
the dense copy costs the unquantized model's memory. Generated rows (decode and verify) run on ``by_row``
(engine.kernels.cpu.row_linear): int4 on the same q, scale and zero, lane-packed; int8 of float32 models on the
same q and scales, lane-packed (torch's int8 kernel took 14.3 ms for a 49152 x 576 head row on AVX2);
int8 of bfloat16 models on the bfloat16 weight it was quantized from (the CPU's bfloat16 dot product over it
beat torch's int8 kernel, and is closer to the float32 model). Other bits than the prompt rows' product;
the same for any batch.

Rounding. int8 is symmetric (scale = max |w| / 127, zero at 0). int4 is asymmetric per group: the
group's [min, max] maps onto 0..15 and the kernel reconstructs ``(q - 8) * scale + zero``, so ``zero``
is stored as ``min + 8 * scale``.
"""

from __future__ import annotations

import torch

from engine.kernels.cpu.native import native_for
from engine.kernels.cpu.packed_linear import dense_linear
from engine.kernels.cpu.row_linear import Int4RowLinear, Int8RowLinear, RowLinear

GROUP_SIZE = 32  # int4 inputs per (scale, zero) pair; the in_features of every int4 weight must divide by it
INNER_K_TILES = 2  # the packing's K tiling (the kernel accepts 2, 4 or 8)


def int4_applies(weight: torch.Tensor) -> bool:
    """True where the int4 kernel takes this (out_features, in_features) weight: whole groups of inputs, and
    outputs in the multiples of 16 that torch's packing needs."""
    return weight.shape[1] % GROUP_SIZE == 0 and weight.shape[0] % 16 == 0


class Int8WeightLinear:
    """x -> x @ (q * scale).T + bias with q int8 (out_features, in_features) and one scale per row."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        w = weight.float()
        scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (out_features,)
        self.qweight = (w / scales[:, None]).round().clamp(-127, 127).to(torch.int8).contiguous()
        self.scales = scales.to(weight.dtype)
        self.bias = bias  # (out_features,) or None
        native = native_for(weight.dtype, weight.device)
        if native is None:
            self.by_row = None
        elif weight.dtype == torch.float32:
            self.by_row = Int8RowLinear(native, self.qweight, self.scales, bias)
        else:  # the CPU's bfloat16 dot-product step over the bfloat16 weight beat every int8 kernel tried
            self.by_row = RowLinear(native, weight, bias)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.ops.aten._weight_int8pack_mm(x.contiguous(), self.qweight, self.scales)
        return out if self.bias is None else out + self.bias


def dequantize_int4(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """q (out, in) in 0..15, scale/zero (out, in / GROUP_SIZE) -> the float32 weight (q - 8) * scale + zero."""
    groups = q.float().view(q.shape[0], -1, GROUP_SIZE) - 8
    return (groups * scale.float()[..., None] + zero.float()[..., None]).view(q.shape)


class Int4WeightLinear:
    """x -> x @ dequant(q).T + bias with q 4-bit (packed once) and a (scale, zero) pair per GROUP_SIZE inputs."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        out_features, in_features = weight.shape
        if in_features % GROUP_SIZE:
            raise ValueError(f"int4 needs in_features divisible by {GROUP_SIZE}, got {in_features}")
        groups = weight.float().view(out_features, in_features // GROUP_SIZE, GROUP_SIZE)
        low, high = groups.amin(dim=-1), groups.amax(dim=-1)  # (out_features, num_groups)
        scale = ((high - low) / 15).clamp(min=1e-12)
        q = ((groups - low[..., None]) / scale[..., None]).round().clamp(0, 15).to(torch.int32)
        q = q.view(out_features, in_features)
        zero = low + 8 * scale
        # (num_groups, out_features, 2): the layout torch's kernel reads
        self.scale_and_zero = torch.stack([scale, zero], dim=-1).transpose(0, 1).contiguous().to(weight.dtype)
        self.bias = bias
        native = native_for(weight.dtype, weight.device)
        self.by_row = self.prompt_rows = self.packed = None
        if native is None:
            self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, INNER_K_TILES)
        else:  # scale and zero as the lane kernel stores them (bfloat16), so both kinds of row see one weight
            scale, zero = (self.scale_and_zero[..., i].T.to(torch.bfloat16) for i in (0, 1))
            self.by_row = Int4RowLinear(native, q, scale, zero, bias)
            self.prompt_rows = dense_linear(dequantize_int4(q, scale, zero).to(weight.dtype), bias, by_row=False)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.prompt_rows is not None:
            return self.prompt_rows(x)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(x.contiguous(), self.packed, GROUP_SIZE,
                                                         self.scale_and_zero)
        return out if self.bias is None else out + self.bias
