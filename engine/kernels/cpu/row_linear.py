"""The dense product of generated rows (decode and verify) on the native kernel (dense_rows.cpp).

    RowLinear(weight)   x -> x @ weight.T (+ bias) for a few rows, bfloat16, over a lane-packed copy of
                        the weight: blocks of 16 outputs across the vector lanes, pairs of inputs per lane

A row's bits depend only on that row (dense_rows.cpp states the contract), never on how many rows the call
holds; they differ from the packed oneDNN product's, which keeps the prompt rows (engine.kernels.row_split
keeps the two apart). The copy doubles the memory of the weights it serves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LANES = 16


def pack_lanes(weight: torch.Tensor) -> torch.Tensor:
    """(out, in) bfloat16 -> (ceil(out / 16), ceil(in / 2), 32): block b, input pair p holds outputs
    16b..16b+15, each as its (input 2p, input 2p + 1) pair; padding is zeros."""
    out_features, in_features = weight.shape
    out_pad, in_pad = -(-out_features // LANES) * LANES, in_features + in_features % 2
    padded = F.pad(weight, (0, in_pad - in_features, 0, out_pad - out_features))
    blocks = padded.view(out_pad // LANES, LANES, in_pad // 2, 2).permute(0, 2, 1, 3)
    return blocks.reshape(out_pad // LANES, in_pad // 2, 2 * LANES).contiguous()


class RowLinear:
    """x (rows, in_features) -> (rows, out_features) + bias on the native kernel ``native``."""

    def __init__(self, native, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        if weight.dtype != torch.bfloat16:
            raise ValueError(f"RowLinear packs bfloat16 weights, not {weight.dtype}")
        self.native = native
        self.out_features = weight.shape[0]
        self.packed = pack_lanes(weight)
        self.bias = bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.native.dense_rows(x.contiguous(), self.packed, self.out_features)
        return out if self.bias is None else out + self.bias
