"""The dense product of generated rows: the lane-packed layout, accuracy against float64 next to a
float32 product's, row invariance, and RowSplit sending each kind of row to its own kernel."""

import pytest
import torch

from engine.kernels.cpu.native import native_kernels
from engine.kernels.cpu.packed_linear import PackedLinear, packing_applies
from engine.kernels.cpu.quantized_linear import dequantize_int4, quantize_int4, quantize_int8
from engine.kernels.cpu.row_linear import (Int4DotRowLinear, Int4RowLinear, Int8DotRowLinear, Int8RowLinear, RowLinear,
                                          pack_int4_dot_lanes, pack_int8_dot_lanes, pack_lanes)
from engine.kernels.row_split import RowSplit, split_rows


@pytest.fixture(scope="module")
def native():
    module = native_kernels()
    assert module is not None, "the native CPU kernels must build where the tests run (a C++ compiler is needed)"
    return module


def test_pack_lanes_puts_16_outputs_across_lanes_and_input_pairs_within():
    weight = torch.arange(20 * 5, dtype=torch.float32).view(20, 5).bfloat16()  # 20 outputs, 5 inputs: both padded
    packed = pack_lanes(weight)
    assert packed.shape == (2, 3, 32)
    assert packed[0, 1, 2 * 3].item() == weight[3, 2].item()  # block 0, pair 1, output 3: inputs 2 and 3
    assert packed[0, 1, 2 * 3 + 1].item() == weight[3, 3].item()
    assert packed[1, 0, 2 * 2].item() == weight[18, 0].item()
    assert packed[0, 2, 1].item() == 0 and packed[1, 0, 2 * 4].item() == 0  # padded input 5, padded output 20


def test_pack_lanes_keeps_float32_inputs_one_per_step():
    weight = torch.arange(20 * 5, dtype=torch.float32).view(20, 5)
    packed = pack_lanes(weight)
    assert packed.shape == (2, 5, 16)
    assert packed[0, 3, 7].item() == weight[7, 3].item() and packed[1, 4, 3].item() == weight[19, 4].item()
    assert packed[1, 0, 4].item() == 0  # padded output 20


def reference_error(weight, x):
    """How far a float32-accumulating product rounded to x's dtype lands from the exact float64 one: oneDNN's
    packed product where this CPU runs it, else torch's float32 product rounded."""
    exact = x.double() @ weight.double().T
    if packing_applies(weight.dtype, weight.device):
        product = PackedLinear(weight, by_row=False)(x)
    else:
        product = (x.float() @ weight.float().T).to(x.dtype)
    return (product.double() - exact).abs().max(), exact


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(3072, 576), (576, 1536), (50, 35), (16, 2)])
def test_rows_are_as_close_as_a_float32_product_and_keep_their_bits_in_any_batch(native, shape, dtype):
    gen = torch.Generator().manual_seed(0)
    weight = (torch.randn(*shape, generator=gen) * 0.05).to(dtype)
    bias = torch.randn(shape[0], generator=gen).to(dtype)
    linear = RowLinear(native, weight, bias)
    x = torch.randn(11, shape[1], generator=gen).to(dtype)
    out = linear(x)
    assert out.shape == (11, shape[0]) and out.dtype == dtype
    error, exact = reference_error(weight, x)
    # both round the float32 sum to x's dtype; then the bias add rounds again
    slack = 0.05 if dtype == torch.bfloat16 else 1e-6
    assert (out.double() - bias.double() - exact).abs().max() <= 2 * error + slack
    for size in (1, 2, 3, 4, 5, 8):
        pieces = torch.cat([linear(x[i : i + size]) for i in range(0, 11, size)])
        assert torch.equal(pieces, out), size


@pytest.mark.parametrize("shape", [(3072, 576), (50, 64)])
def test_int8_rows_match_float64_and_keep_their_bits_in_any_batch(native, shape):
    gen = torch.Generator().manual_seed(1)
    q = torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8)
    scale = (torch.rand(shape[0], shape[1] // 32, generator=gen) / 100).half()  # one per 32 inputs
    linear = Int8RowLinear(native, q, scale)
    x = torch.randn(9, shape[1], generator=gen)
    out = linear(x)
    exact = x.double() @ (q.double() * scale.double().repeat_interleave(32, dim=1)).T
    assert out.shape == (9, shape[0]) and out.dtype == torch.float32
    assert (out.double() - exact).abs().max() <= 1e-5 * exact.abs().max()
    for size in (1, 2, 3, 4):
        assert torch.equal(torch.cat([linear(x[i : i + size]) for i in range(0, 9, size)]), out), size


def test_pack_int4_dot_lanes_puts_four_inputs_per_lane_low_nibbles_then_high():
    q = torch.randint(0, 16, (20, 64), generator=torch.Generator().manual_seed(0))  # 20 outputs: padded to 32
    packed = pack_int4_dot_lanes(q)
    assert packed.shape == (2, 2, 4, 16, 4) and packed.dtype == torch.uint8
    # block 1, group 1, chunk 2, lane 3 (output 19), byte 1: inputs 32 + 16 + 1 (low) and 32 + 16 + 4 + 1 (high)
    assert packed[1, 1, 2, 3, 1].item() == q[19, 49].item() | q[19, 53].item() << 4
    assert packed[0, 0, 0, 5, 0].item() == q[5, 0].item() | q[5, 4].item() << 4
    assert packed[1, 0, 0, 4].abs().sum() == 0  # padded output 20


def dot_reference(x, q, scale, minimum=None):
    """The product int4_dot_rows.cpp / int8_dot_rows.cpp define, in float64: each group of 32 inputs rounded to
    int8 steps of max|x_g| / 127, its exact integer dot with q scaled by scale * d_g (plus min * d_g * sum(x8)
    for int4): the dequantized weight times the dequantized activations."""
    rows, k = x.shape
    groups = x.float().view(rows, k // 32, 32)
    d = groups.abs().amax(-1) / 127  # float32, as the kernel computes it
    x8 = torch.where(d[..., None] > 0, torch.round(groups / d.clamp(min=1e-30)[..., None]), 0).clamp(-127, 127)
    dots = torch.einsum("rgk,ogk->rog", x8.double(), q.double().view(q.shape[0], -1, 32))
    terms = dots * (scale.float()[None] * d[:, None]).double()
    if minimum is not None:
        terms = terms + minimum.double()[None] * (d.double() * x8.double().sum(-1))[:, None]
    return terms.sum(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(960, 576), (576, 1536), (40, 64)])
def test_int4_dot_rows_compute_the_int8_activation_product_and_keep_their_bits_in_any_batch(native, shape, dtype):
    gen = torch.Generator().manual_seed(1)
    q, scale, minimum = quantize_int4(torch.randn(*shape, generator=gen) * 0.05)
    linear = Int4DotRowLinear(native, q, scale, minimum)
    x = torch.randn(7, shape[1], generator=gen).to(dtype)
    x[0, :32] = 0  # an all-zero group quantizes to zeros
    got = linear(x)
    assert got.shape == (7, shape[0]) and got.dtype == dtype
    expected = dot_reference(x, q, scale, minimum)
    scale_of_sums = expected.abs().max()
    tolerance = 1e-5 if dtype == torch.float32 else 2 ** -8  # float32 sums; bfloat16 rounds the result once
    assert ((got.double() - expected).abs().max() / scale_of_sums) < tolerance
    for size in (1, 2, 3):
        assert torch.equal(torch.cat([linear(x[i : i + size]) for i in range(0, 7, size)]), got), size


def test_pack_int8_dot_lanes_puts_four_consecutive_inputs_per_lane():
    q = torch.randint(-127, 128, (20, 64), generator=torch.Generator().manual_seed(0)).to(torch.int8)
    packed = pack_int8_dot_lanes(q)
    assert packed.shape == (2, 2, 8, 16, 4) and packed.dtype == torch.int8
    assert packed[1, 1, 5, 3, 2].item() == q[19, 32 + 4 * 5 + 2].item()  # block 1, group 1, chunk 5, output 19
    assert packed[1, 0, 0, 4].abs().sum() == 0  # padded output 20


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(49152 // 16, 576), (576, 1536), (40, 64)])
def test_int8_dot_rows_compute_the_int8_activation_product_and_keep_their_bits_in_any_batch(native, shape, dtype):
    gen = torch.Generator().manual_seed(3)
    q, scale = quantize_int8(torch.randn(*shape, generator=gen) * 0.05)
    q[0, :4] = torch.tensor([-127, 127, 0, -1], dtype=torch.int8)  # the extremes and zero keep their signs
    linear = Int8DotRowLinear(native, q, scale)
    x = torch.randn(7, shape[1], generator=gen).to(dtype)
    x[1, 32:64] = 0
    got = linear(x)
    assert got.shape == (7, shape[0]) and got.dtype == dtype
    expected = dot_reference(x, q, scale)
    tolerance = 1e-5 if dtype == torch.float32 else 2 ** -8
    assert ((got.double() - expected).abs().max() / expected.abs().max()) < tolerance
    for size in (1, 2, 3):
        assert torch.equal(torch.cat([linear(x[i : i + size]) for i in range(0, 7, size)]), got), size


def test_int4_dot_rows_equal_the_float_int4_rows_when_the_activations_are_already_int8_steps(native):
    """Rows whose groups each hold 127 (or -127) and integers are their own int8 rounding: w4a8 then
    computes the float int4 product, up to float32 summation order."""
    gen = torch.Generator().manual_seed(2)
    q, scale, minimum = quantize_int4(torch.randn(64, 128, generator=gen) * 0.05)
    x = torch.randint(-127, 128, (3, 128), generator=gen).float()
    x[:, ::32] = 127.0
    exact = x.double() @ dequantize_int4(q, scale, minimum).double().T
    for linear in (Int4DotRowLinear(native, q, scale, minimum), Int4RowLinear(native, q, scale, minimum)):
        assert ((linear(x).double() - exact).abs().max() / exact.abs().max()) < 1e-5


def test_packed_linears_carry_a_by_row_kernel_unless_told_not_to(native):
    assert isinstance(PackedLinear(torch.randn(64, 32)).by_row, RowLinear)
    assert PackedLinear(torch.randn(64, 32), by_row=False).by_row is None


@pytest.mark.skipif(not packing_applies(torch.bfloat16, torch.device("cpu")),
                    reason="this CPU's oneDNN has no bfloat16 kernel (packed bfloat16 linears are not built here)")
def test_packed_bfloat16_linears_carry_a_by_row_kernel(native):
    assert isinstance(PackedLinear(torch.randn(64, 32).bfloat16()).by_row, RowLinear)
    assert PackedLinear(torch.randn(64, 32).bfloat16(), by_row=False).by_row is None


class Tagged:
    """A linear whose two kernels tag their rows (a unit test of RowSplit, not of a kernel)."""

    def __call__(self, x):
        return torch.cat([x, torch.zeros(x.shape[0], 1)], dim=1)

    def by_row(self, x):
        return torch.cat([x, torch.ones(x.shape[0], 1)], dim=1)


def test_row_split_sends_generated_rows_by_row_and_prompt_rows_to_the_product():
    x = torch.arange(5.0)[:, None]
    mixed = RowSplit.of([False, True, False, True, True], "cpu")
    assert split_rows(mixed, Tagged(), x)[:, 1].tolist() == [0, 1, 0, 1, 1]
    assert split_rows(mixed, Tagged(), x)[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert split_rows(RowSplit.of([True] * 5, "cpu"), Tagged(), x)[:, 1].tolist() == [1] * 5
    assert RowSplit.of([False] * 5, "cpu") is None
    assert split_rows(None, Tagged(), x)[:, 1].tolist() == [0] * 5
    plain = lambda rows: rows * 2  # noqa: E731 - a linear without a by-row kernel
    assert split_rows(mixed, plain, x)[:, 0].tolist() == [0, 2, 4, 6, 8]
