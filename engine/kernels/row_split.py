"""Which rows of a forward are generated tokens, and a linear over both kinds of rows.

A linear may carry ``by_row``: a kernel for the rows of generated tokens (decode and verify) that is
cheaper for a few rows than its own product (engine.kernels.cpu.row_linear). Each kind of row keeps to one
kernel, so a row's bits depend on its kind and never on the rows beside it; prompt rows keep the product
whose K/V the radix tree shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RowSplit:
    """``generated``/``prompt``: row indices of each kind; both None = every row is generated."""

    generated: torch.Tensor | None
    prompt: torch.Tensor | None

    @classmethod
    def of(cls, is_generated: list[bool], device) -> RowSplit | None:
        """None when no row is generated (every linear then runs its own product)."""
        if not any(is_generated):
            return None
        if all(is_generated):
            return cls(None, None)
        flags = torch.tensor(is_generated)
        return cls(flags.nonzero().squeeze(1).to(device), (~flags).nonzero().squeeze(1).to(device))

    def apply(self, linear, x: torch.Tensor) -> torch.Tensor:
        by_row = getattr(linear, "by_row", None)
        if by_row is None:
            return linear(x)
        if self.generated is None:
            return by_row(x)
        generated = by_row(x.index_select(0, self.generated))
        out = generated.new_empty(x.shape[0], generated.shape[1])
        out[self.generated] = generated
        out[self.prompt] = linear(x.index_select(0, self.prompt))
        return out


def split_rows(rows: RowSplit | None, linear, x: torch.Tensor) -> torch.Tensor:
    """``linear(x)`` with the generated rows of ``rows`` on its by-row kernel (all rows its own without)."""
    return linear(x) if rows is None else rows.apply(linear, x)
