"""Linear weights packed once for oneDNN: the CPU path of every linear layer (float32 and bfloat16).

``F.linear`` on a CPU float32 tensor calls MKL's sgemm, which re-packs the
weight on every call and picks its kernel by the number of rows, so one row's
result changes with the rows batched around it (seen on an AVX2 EPYC at 5, 8,
16, 24 ... 1,100 rows, and on an AVX-512 Xeon from 16 rows up). oneDNN with the
weight reordered once gives every row the same bits for any row count from 2
up (one row takes a gemv path, so it runs as two: engine.kernels.cpu.row_range) and skips the
per-call packing: 1.1x to 2.2x faster at decode batch sizes (24 rows) and on
par at 1,024 rows.

Precision. oneDNN's kernel sums each output along the whole input dimension
in one float32 chain, and its error grows with that length (~1.4-1.8x MKL's
here). On an AVX-512 Xeon that put SmolLM2's fp32 logits 1.45e-4 away from
transformers' fp32 forward (1.3e-4 from float64). So an input dimension longer
than ``MAX_SLICE`` is cut into slices (SmolLM2: only the MLP's down projection,
1536 -> 2 x 768), each slice is one packed product, and the slices are added in
order: a row still gets the same bits in any batch, and the logits come within
5.6e-5 of transformers (7.7e-5 of float64), for ~1% more prefill time and
~2-4% more per decode step.

bfloat16. ``F.linear`` already runs bfloat16 on oneDNN, but reorders the
weight on every call: on a 2-core AVX512-BF16 EPYC the packed weight gave the
same bits at every row count from 1 to 1,024 and ran 1.3-3.7x faster at 2-24
rows (the LM head 1.9x at 24 rows), ~1.05x at 1,024. Its input dimension is
not sliced: the product accumulates in float32 inside oneDNN, and adding
slices would round each to bfloat16 first. With AMX (Sapphire Rapids) the
kernel's blocking changes with the row count, so bfloat16 products are cut
in a measured range of rows (engine.kernels.cpu.row_range: 33-256 there, smaller
batches padded); in pieces of 256 rows AMX ran them at 1.3-2.5 TFLOPS on 2 cores.
"""

from __future__ import annotations

import torch

from engine.kernels.cpu.row_range import ANY, RowRange, invariant_row_range, split_rows

PACK_FOR_ROWS = 1024  # the row count oneDNN lays the weight out for; any count runs on it
MAX_SLICE = 768  # input features per packed product (see Precision)
SLICE_ALIGN = 32


def packing_applies(dtype: torch.dtype, device: torch.device) -> bool:
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def input_slices(in_features: int) -> list[tuple[int, int]]:
    """[start, end) slices of the input dimension, each at most MAX_SLICE, as even as SLICE_ALIGN allows."""
    num_slices = -(-in_features // MAX_SLICE)
    width = -(-in_features // num_slices)
    width = min(MAX_SLICE, -(-width // SLICE_ALIGN) * SLICE_ALIGN)
    return [(start, min(in_features, start + width)) for start in range(0, in_features, width)]


AUTO = "auto"  # rows: measured for this shape (engine.kernels.cpu.row_range)


class PackedLinear:
    """A (out_features, in_features) weight in oneDNN's blocked layout, by input slices (float32 only);
    call it like F.linear. Every product takes ``rows.min_rows`` to ``rows.max_rows`` rows (padded or cut
    into pieces); ``"auto"`` measures the range for bfloat16 (engine.kernels.cpu.row_range) and takes
    ``ANY`` for float32, whose packed products were row-invariant on every CPU seen (checked by
    tests/unit/engine_model/test_packed_linear.py wherever the suite runs)."""

    def __init__(self, weight: torch.Tensor, rows: RowRange | str = AUTO) -> None:
        weight = weight.contiguous()
        out_features, in_features = weight.shape
        self.slices = input_slices(in_features) if weight.dtype == torch.float32 else [(0, in_features)]
        self.packed = [torch.ops.mkldnn._reorder_linear_weight(weight[:, a:b].contiguous(), PACK_FOR_ROWS)
                       for a, b in self.slices]
        if rows == AUTO:
            rows = ANY if weight.dtype == torch.float32 else invariant_row_range(
                out_features, in_features, weight.dtype, torch.get_num_threads())
        self.rows = rows

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        pieces = split_rows(x.shape[0], self.rows.max_rows)
        if len(pieces) == 1:
            return self._product(x, bias)
        return torch.cat([self._product(x[a:b], bias) for a, b in pieces])

    def _product(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        num_rows = x.shape[0]
        if num_rows < self.rows.min_rows:
            padded = torch.cat([x, x.new_zeros(self.rows.min_rows - num_rows, x.shape[1])])
            return self._product(padded, bias)[:num_rows]
        (a, b), *rest = self.slices
        out = torch.ops.mkldnn._linear_pointwise(x[:, a:b], self.packed[0], bias, "none", [], "")  # bias fused
        for (a, b), packed in zip(rest, self.packed[1:]):  # in slice order: the same sum for any batch
            out += torch.ops.mkldnn._linear_pointwise(x[:, a:b], packed, None, "none", [], "")
        return out
