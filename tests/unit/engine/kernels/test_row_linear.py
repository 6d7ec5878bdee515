"""The dense product of generated rows: the lane-packed layout, accuracy against float64 next to oneDNN's,
row invariance, and RowSplit sending each kind of row to its own kernel."""

import pytest
import torch

from engine.kernels.cpu.native import native_kernels
from engine.kernels.cpu.packed_linear import PackedLinear
from engine.kernels.cpu.row_linear import RowLinear, pack_lanes
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


@pytest.mark.parametrize("shape", [(3072, 576), (50, 35), (16, 2)])
def test_rows_are_as_close_as_onednns_and_keep_their_bits_in_any_batch(native, shape):
    gen = torch.Generator().manual_seed(0)
    weight = (torch.randn(*shape, generator=gen) * 0.05).bfloat16()
    bias = torch.randn(shape[0], generator=gen).bfloat16()
    linear = RowLinear(native, weight, bias)
    x = torch.randn(11, shape[1], generator=gen).bfloat16()
    out = linear(x)
    assert out.shape == (11, shape[0]) and out.dtype == torch.bfloat16
    exact = x.double() @ weight.double().T
    onednn = PackedLinear(weight)(x).double()
    # both round the float32 sum to bfloat16; then the bias add rounds again
    assert (out.double() - bias.double() - exact).abs().max() <= 2 * (onednn - exact).abs().max() + 0.05
    for size in (1, 2, 3, 4, 5, 8):
        pieces = torch.cat([linear(x[i : i + size]) for i in range(0, 11, size)])
        assert torch.equal(pieces, out), size


def test_packed_bfloat16_linears_carry_a_by_row_kernel_and_float32_ones_do_not(native):
    assert isinstance(PackedLinear(torch.randn(64, 32).bfloat16()).by_row, RowLinear)
    assert PackedLinear(torch.randn(64, 32)).by_row is None
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
