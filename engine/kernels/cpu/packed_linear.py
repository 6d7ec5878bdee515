"""Linear weights packed once for oneDNN: the CPU path of every linear layer (float32 and bfloat16).

Batch invariance. ``F.linear`` on a CPU float32 tensor calls MKL's sgemm, which
re-packs the weight on every call and picks its kernel by the number of rows,
so one row's result can change with the rows batched around it. oneDNN with the
weight reordered once (for ``PACK_FOR_ROWS`` rows; any count runs on it) gives a
row the same bits for any row count inside the row range of its shape
(engine.kernels.cpu.row_range; a lone row takes a gemv path, so it runs as two),
and skips the per-call packing.

Precision (float32). oneDNN sums each output along the whole input dimension in
one float32 chain, whose rounding error grows with the chain's length. So an
input dimension longer than ``MAX_SLICE`` is cut into slices (as even as
``SLICE_ALIGN`` allows), each slice is one packed product, and the slices are
added in order: a row still gets the same bits in any batch, and its sum stays
closer to the exact one.

bfloat16. The weight is packed whole: the product accumulates in float32 inside
oneDNN, and adding slices would round each to bfloat16 first. Where oneDNN's
bfloat16 kernel changes its blocking with the row count (AMX), products are kept
to one measured range of rows (engine.kernels.cpu.row_range): larger batches are
cut into even pieces, smaller ones padded with copies of their last row.

Generated rows (decode and verify) run instead on ``by_row``, the native lane-packed product
(engine.kernels.cpu.row_linear), where it builds: oneDNN's set-up per call costs more than the weight's
bytes at a few rows. Its float32 sums are sliced too (dense_rows.cpp), more finely than MAX_SLICE.

The measurements behind these choices are in docs/performance.md.
"""

from __future__ import annotations

import torch

from engine.kernels.cpu.native import native_for
from engine.kernels.cpu.row_linear import RowLinear
from engine.kernels.cpu.row_range import ANY, RowRange, invariant_row_range, split_rows
from engine.kernels.linear import TorchLinear

PACK_FOR_ROWS = 1024  # the row count oneDNN lays the weight out for; any count runs on it
MAX_SLICE = 768  # input features per packed product (see Precision)
SLICE_ALIGN = 32


def packing_applies(dtype: torch.dtype, device: torch.device) -> bool:
    """True on a CPU whose oneDNN runs ``dtype`` (float32, or bfloat16 where oneDNN supports it)."""
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def input_slices(in_features: int) -> list[tuple[int, int]]:
    """[start, end) slices of the input dimension, each at most MAX_SLICE, as even as SLICE_ALIGN allows."""
    num_slices = -(-in_features // MAX_SLICE)
    width = -(-in_features // num_slices)
    width = min(MAX_SLICE, -(-width // SLICE_ALIGN) * SLICE_ALIGN)
    return [(start, min(in_features, start + width)) for start in range(0, in_features, width)]


def pad_rows(x: torch.Tensor, num_rows: int) -> torch.Tensor:
    """x (r, k) with its last row repeated up to ``num_rows`` rows (one op for a lone row); zeros for no rows."""
    if x.shape[0] == 1:
        return torch.cat([x] * num_rows)
    if x.shape[0] == 0:
        return x.new_zeros(num_rows, x.shape[1])
    return torch.cat([x, x[-1:].expand(num_rows - x.shape[0], -1)])


AUTO = "auto"  # rows: ANY for float32, measured for this shape otherwise (engine.kernels.cpu.row_range)


class PackedLinear:
    """x -> x @ weight.T + bias with the (out_features, in_features) weight in oneDNN's blocked layout, by
    input slices (float32 only). Every product takes ``rows.min_rows`` to ``rows.max_rows`` rows (padded or
    cut into pieces). ``"auto"`` rows: ``ANY`` for float32, whose packed products are row-invariant
    (tests/unit/engine/kernels/test_packed_linear.py checks it wherever the suite runs), and the range
    measured for this shape for bfloat16 (engine.kernels.cpu.row_range)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, rows: RowRange | str = AUTO,
                 by_row: bool = True) -> None:
        """``by_row``: give the weight the native kernel for generated rows where it builds."""
        weight = weight.contiguous()
        out_features, in_features = weight.shape
        self.bias = bias  # (out_features,) or None: fused into the first slice's product
        self.slices = input_slices(in_features) if weight.dtype == torch.float32 else [(0, in_features)]
        self.packed = [torch.ops.mkldnn._reorder_linear_weight(weight[:, a:b].contiguous(), PACK_FOR_ROWS)
                       for a, b in self.slices]
        if rows == AUTO:
            rows = ANY if weight.dtype == torch.float32 else invariant_row_range(
                PackedLinear, out_features, in_features, weight.dtype, torch.get_num_threads())
        self.rows = rows
        native = native_for(weight.dtype, weight.device) if by_row else None
        self.by_row = RowLinear(native, weight, bias) if native is not None else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        pieces = split_rows(x.shape[0], self.rows.max_rows)
        if len(pieces) == 1:
            return self._product(x)
        return torch.cat([self._product(x[a:b]) for a, b in pieces])

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        num_rows = x.shape[0]
        if num_rows < self.rows.min_rows:  # rows are independent: the padding never changes a real row's bits
            return self._product(pad_rows(x, self.rows.min_rows))[:num_rows]
        if len(self.slices) == 1:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed[0], self.bias, "none", [], "")
        (a, b), *rest = self.slices
        out = torch.ops.mkldnn._linear_pointwise(x[:, a:b], self.packed[0], self.bias, "none", [], "")
        for (a, b), packed in zip(rest, self.packed[1:]):  # in slice order: the same sum for any batch
            out += torch.ops.mkldnn._linear_pointwise(x[:, a:b], packed, None, "none", [], "")
        return out


def dense_linear(weight: torch.Tensor, bias: torch.Tensor | None = None, by_row: bool = True):
    """The unquantized linear over ``weight``: packed for oneDNN where this CPU runs its dtype, else ``F.linear``."""
    if packing_applies(weight.dtype, weight.device):
        return PackedLinear(weight, bias, by_row=by_row)
    return TorchLinear(weight, bias)
