"""CPU linears on oneDNN-packed weights (float32, and bfloat16 where oneDNN has it): one row's bits never
depend on the rows beside it."""

import pytest
import torch
import torch.nn.functional as F

from engine.kernels import make_linear
from engine.kernels.cpu.packed_linear import PackedLinear, input_slices, packing_applies
from engine.kernels.cpu.row_range import RowRange

pytestmark = pytest.mark.skipif(not packing_applies(torch.float32, torch.device("cpu")),
                                reason="this torch build has no oneDNN")


DTYPES = [torch.float32] + ([torch.bfloat16] if packing_applies(torch.bfloat16, torch.device("cpu")) else [])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(960, 576), (576, 1536), (3072, 576)])
def test_every_row_gets_the_same_bits_in_any_batch(shape, dtype):
    """Every row, not just the first: where oneDNN's bfloat16 kernel changes with the row count (AMX), products
    of different sizes round some rows differently (the measured row range keeps every product inside one
    kernel family)."""
    gen = torch.Generator().manual_seed(0)
    weight = (torch.randn(shape, generator=gen) * 0.05).to(dtype)
    bias = torch.randn(shape[0], generator=gen).to(dtype)
    packed = make_linear(weight, bias)  # what the model builds for this weight on this CPU
    assert isinstance(packed, PackedLinear)
    x = torch.randn(1100, shape[1], generator=gen).to(dtype)
    alone = torch.cat([packed(x[i:i + 1]) for i in range(x.shape[0])])
    for rows in (2, 3, 5, 8, 16, 24, 33, 47, 64, 100, 257, 500, 1024, 1100):
        batched = torch.cat([packed(x[i:i + rows]) for i in range(0, x.shape[0], rows)])
        changed = (batched != alone).any(dim=1).nonzero().flatten().tolist()
        assert not changed, f"{len(changed)} rows changed in batches of {rows} (rows per product {packed.rows})"
    atol = 1e-4 if dtype == torch.float32 else 2e-2  # bfloat16 outputs keep 8 bits
    assert torch.allclose(packed(x).float(), F.linear(x, weight, bias).float(), rtol=0.01, atol=atol)


@pytest.mark.parametrize("min_rows", [2, 3, 8])
def test_products_under_the_row_range_are_padded_without_changing_a_row(min_rows):
    """No rows, one row and a few rows below ``min_rows``: the shape is kept and each row equals its product in
    a full-size call (a prefill-only forward asks the LM head for zero rows)."""
    gen = torch.Generator().manual_seed(3)
    weight = torch.randn(96, 64, generator=gen) * 0.05
    packed = PackedLinear(weight, rows=RowRange(min_rows, None))
    x = torch.randn(16, 64, generator=gen)
    full = packed(x)
    assert packed(x[:0]).shape == (0, 96)
    for num_rows in range(1, min_rows + 1):
        assert torch.equal(packed(x[:num_rows]), full[:num_rows]), num_rows


@pytest.mark.skipif(torch.bfloat16 not in DTYPES, reason="this CPU's oneDNN has no bfloat16")
def test_bfloat16_weights_are_packed_whole():
    """bfloat16 products accumulate in float32 inside oneDNN; slicing would round each slice to bfloat16."""
    assert PackedLinear(torch.randn(576, 1536).bfloat16()).slices == [(0, 1536)]
    assert len(PackedLinear(torch.randn(576, 1536)).slices) == 2


@pytest.mark.parametrize(("in_features", "expected"), [
    (576, [(0, 576)]), (768, [(0, 768)]), (1536, [(0, 768), (768, 1536)]),
    (2000, [(0, 672), (672, 1344), (1344, 2000)]), (64, [(0, 64)])])
def test_long_input_dimensions_are_cut_into_even_slices(in_features, expected):
    assert input_slices(in_features) == expected


def test_slicing_brings_a_long_product_closer_to_float64():
    gen = torch.Generator().manual_seed(1)
    weight = torch.randn(576, 4096, generator=gen) * 0.05
    x = torch.randn(64, 4096, generator=gen)
    exact = F.linear(x.double(), weight.double())
    sliced = PackedLinear(weight)(x).double()
    whole = torch.ops.mkldnn._linear_pointwise(x, torch.ops.mkldnn._reorder_linear_weight(weight, 1024), None,
                                                "none", [], "").double()
    assert len(PackedLinear(weight).slices) > 1
    rms = lambda y: (y - exact).pow(2).mean().sqrt().item()  # noqa: E731
    assert rms(sliced) < rms(whole)
