"""The row-range probe (engine.kernels.cpu.row_range), on a fake product whose rounding depends on its row count,
and the even split of a batch into pieces."""

import pytest
import torch

from engine.kernels.cpu.row_range import ANY, CANDIDATES, RowRange, first_invariant_range, split_rows


class BatchSensitiveLinear:
    """Row sums, nudged by one ulp in products of more than ``kernel_switch`` rows, and by another in products
    of more than ``second_switch`` rows (kernel changes); padded and cut like PackedLinear."""

    def __init__(self, kernel_switch: int | None, second_switch: int | None = None) -> None:
        self.switches = [s for s in (kernel_switch, second_switch) if s is not None]
        self.rows = ANY

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self._product(x[a:b]) for a, b in split_rows(x.shape[0], self.rows.max_rows)])

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        num_rows = x.shape[0]
        if num_rows < self.rows.min_rows:
            return self._product(torch.cat([x, x.new_zeros(self.rows.min_rows - num_rows, x.shape[1])]))[:num_rows]
        out = x.sum(dim=1, keepdim=True)
        for switch in self.switches:
            if num_rows > switch:
                out = torch.nextafter(out, torch.full_like(out, float("inf")))
        return out


@pytest.mark.parametrize(("switches", "expected"), [
    ((None, None), ANY),  # one kernel for every size
    ((32, 300), RowRange(33, 256)),  # bfloat16 on AMX: 2-32 and 33-300 rows are two families
    ((32, 200), RowRange(64, 128)),
    ((40, 200), RowRange(64, 128)),
    ((32, 100), RowRange(2, 32)),  # 64-256 is not one family: small pieces
    ((40, None), RowRange(64, 256)),  # 33-40 apart from 41+: pad to 64 (SmolLM2's 576x1536 there: 64-128)
    ((5, 1000), RowRange(33, 256)),
    ((5, 100), RowRange(2, 4))])
def test_the_probe_finds_the_first_range_inside_one_kernel(switches, expected):
    x = torch.randn(1100, 8, generator=torch.Generator().manual_seed(0))
    assert first_invariant_range(BatchSensitiveLinear(*switches), x) == expected


class RowCountSensitiveLinear(BatchSensitiveLinear):
    """Every row count rounds its own way: no limit helps."""

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1, keepdim=True) * (1 + x.shape[0] * 2**-20)  # padding is seen too


def test_a_product_that_never_agrees_gets_the_smallest_limit():
    x = torch.randn(1100, 8, generator=torch.Generator().manual_seed(0))
    assert first_invariant_range(RowCountSensitiveLinear(None), x) == CANDIDATES[-1]


@pytest.mark.parametrize(("num_rows", "limit", "expected"), [
    (33, 32, [(0, 17), (17, 33)]), (32, 32, [(0, 32)]), (1, 32, [(0, 1)]), (1100, None, [(0, 1100)]),
    (65, 32, [(0, 22), (22, 44), (44, 65)])])
def test_rows_are_split_into_even_pieces_within_the_limit(num_rows, limit, expected):
    assert split_rows(num_rows, limit) == expected
