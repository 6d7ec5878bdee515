"""How many rows one packed product takes, so that a row's bits never depend on its batch.

oneDNN picks a matmul's blocking by its shape, the number of rows included.
Where every blocking gives a row the same bits, a product may take any number
of rows (``ANY``; a lone row runs as two, since a one-row product takes a gemv
kernel that rounds differently). Where it does not (bfloat16 on AMX: products
of a few rows and products of a few hundred rows form families that round some
rows differently), a cache hit would change an answer: the same question
computed in a small decode batch and in a long suffix step would come out
different.

So a PackedLinear runs every product with between ``min_rows`` and ``max_rows``
rows: a batch larger than ``max_rows`` is cut into even pieces, a smaller one
than ``min_rows`` is padded with copies of its last row. The range is the first of
``CANDIDATES`` under which random rows, multiplied in calls of many sizes, all
give every row the same bits in this process. Candidates go from the most
efficient to the safest: no limit; then ranges up to 256 rows (large batches
run in large pieces, small ones are padded up to the family's lower bound);
then ever smaller pieces. The probe runs at first use, once per weight shape,
dtype and thread count, on random weights: the kernel depends on the shape, not
the values. This module only measures: the product under test comes from its
caller (``invariant_row_range(build, ...)``), so it imports no kernel.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import NamedTuple

import torch

logger = logging.getLogger(__name__)


class RowRange(NamedTuple):
    min_rows: int  # smaller products are padded (copies of their last row) up to this
    max_rows: int | None  # larger ones are cut into even pieces; None = any size


ANY = RowRange(2, None)  # a lone row runs as two: a one-row product takes a gemv kernel that rounds differently
CANDIDATES = (ANY, RowRange(33, 256), RowRange(64, 256), RowRange(64, 128), RowRange(2, 32), RowRange(2, 16),
              RowRange(2, 8), RowRange(2, 4), RowRange(2, 2))
PROBE_ROWS = 1100  # above the default step budget of 1,024 tokens (+1/16 for a chunk's short tail)
# call sizes, the likeliest to disagree first: oneDNN's kernel has been seen to change at 33, 64, ~300, ~500
# and ~1,000 rows (docs/performance.md)
CALL_SIZES = (33, 1100, 257, 64, 24, 512, 1024, 300, 100, 48, 5, 3, 2, 17, 8, 1)
CALLS_PER_SIZE = 8  # a small size is checked on this many calls, not on every probe row
REFERENCE_SIZE = 16


def split_rows(num_rows: int, max_rows: int | None) -> list[tuple[int, int]]:
    """[start, end) pieces of at most max_rows rows, as even as possible (33 rows at 32: 17 + 16, not 32 + 1:
    a one-row piece would read the whole weight for a single row)."""
    if max_rows is None or num_rows <= max_rows:
        return [(0, num_rows)]
    num_pieces = -(-num_rows // max_rows)
    base, extra = divmod(num_rows, num_pieces)
    bounds, start = [], 0
    for i in range(num_pieces):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


@functools.cache
def invariant_row_range(build: Callable, out_features: int, in_features: int, dtype: torch.dtype,
                        num_threads: int) -> RowRange:
    """The first candidate under which every row of a ``build(weight, rows=ANY)`` product gets the same bits in
    any batch (cached per product type, shape, dtype and thread count: oneDNN's blocking depends on all of them).
    ``build`` is the product's class (PackedLinear); its instances must take a settable ``rows``."""
    gen = torch.Generator().manual_seed(0)
    linear = build((torch.randn(out_features, in_features, generator=gen) * 0.05).to(dtype), rows=ANY)
    rows = first_invariant_range(linear, torch.randn(PROBE_ROWS, in_features, generator=gen).to(dtype))
    name = f"{str(dtype).removeprefix('torch.')} linears of shape {out_features}x{in_features}"
    if rows == CANDIDATES[-1]:
        logger.warning("no row range made packed %s batch-invariant on %d threads: cached and uncached answers "
                       "may differ in the last bits", name, num_threads)
    elif rows != ANY:
        logger.info("packed %s run %d-%d rows per product on %d threads (other sizes round some rows differently "
                    "here)", name, rows.min_rows, rows.max_rows, num_threads)
    return rows


def first_invariant_range(linear, x: torch.Tensor) -> RowRange:
    """Try CANDIDATES on ``linear`` (a callable with a settable ``rows``) in order: the first under which every
    call size agrees, else the last candidate."""
    for rows in CANDIDATES:
        linear.rows = rows
        if _is_invariant(linear, x, rows):
            return rows
    return CANDIDATES[-1]


def _is_invariant(linear, x: torch.Tensor, rows: RowRange) -> bool:
    """Every call size agrees with calls of REFERENCE_SIZE (or min_rows) rows. Under a bound, products never
    exceed it, so sizes up to about twice the bound, on a few bounds' worth of rows, exercise every product
    that can occur."""
    if rows.max_rows is None:
        sizes, num_rows = CALL_SIZES, x.shape[0]
    else:
        bound = rows.max_rows
        edges = {bound - 1, bound, bound + 1, rows.min_rows - 1, rows.min_rows, rows.min_rows + 1} - {0}
        sizes = [s for s in CALL_SIZES if s <= 2 * bound + 1] + sorted(edges - set(CALL_SIZES))
        num_rows = min(x.shape[0], 4 * bound + 8)
    reference_size = min(max(REFERENCE_SIZE, rows.min_rows), rows.max_rows or REFERENCE_SIZE)
    reference = _in_calls(linear, x[:num_rows], reference_size)
    for size in sizes:
        checked = min(num_rows, size * CALLS_PER_SIZE)
        if not torch.equal(_in_calls(linear, x[:checked], size), reference[:checked]):
            return False
    return True


@torch.inference_mode()
def _in_calls(linear, x: torch.Tensor, size: int) -> torch.Tensor:
    return torch.cat([linear(x[start:start + size]) for start in range(0, x.shape[0], size)])
