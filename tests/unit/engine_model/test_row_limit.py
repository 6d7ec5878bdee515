"""The row-limit probe (engine.models.row_limit), on a fake product whose rounding depends on its row count,
and the even split of a batch into pieces."""

import pytest
import torch

from engine.models.row_limit import CANDIDATE_LIMITS, largest_invariant_limit, split_rows


class BatchSensitiveLinear:
    """Row sums, nudged by one ulp when a product holds more than ``kernel_switch`` rows (a kernel change)."""

    def __init__(self, kernel_switch: int | None) -> None:
        self.kernel_switch = kernel_switch
        self.row_limit = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self._product(x[a:b]) for a, b in split_rows(x.shape[0], self.row_limit)])

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        out = x.sum(dim=1, keepdim=True)
        if self.kernel_switch is not None and x.shape[0] > self.kernel_switch:
            out = torch.nextafter(out, torch.full_like(out, float("inf")))
        return out


@pytest.mark.parametrize(("kernel_switch", "expected"), [(None, None), (32, 32), (100, 64), (40, 32), (5, 4),
                                                         (300, 256)])
def test_the_probe_finds_the_largest_limit_below_a_kernel_switch(kernel_switch, expected):
    x = torch.randn(1100, 8, generator=torch.Generator().manual_seed(0))
    assert largest_invariant_limit(BatchSensitiveLinear(kernel_switch), x) == expected


class RowCountSensitiveLinear(BatchSensitiveLinear):
    """Every row count rounds its own way: no limit helps."""

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1, keepdim=True) * (1 + x.shape[0] * 2**-20)


def test_a_product_that_never_agrees_gets_the_smallest_limit():
    x = torch.randn(1100, 8, generator=torch.Generator().manual_seed(0))
    assert largest_invariant_limit(RowCountSensitiveLinear(None), x) == CANDIDATE_LIMITS[-1]


@pytest.mark.parametrize(("num_rows", "limit", "expected"), [
    (33, 32, [(0, 17), (17, 33)]), (32, 32, [(0, 32)]), (1, 32, [(0, 1)]), (1100, None, [(0, 1100)]),
    (65, 32, [(0, 22), (22, 44), (44, 65)])])
def test_rows_are_split_into_even_pieces_within_the_limit(num_rows, limit, expected):
    assert split_rows(num_rows, limit) == expected
