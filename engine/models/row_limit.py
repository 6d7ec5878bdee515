"""How many rows one packed product may take, measured, so that a row's bits never depend on its batch.

oneDNN picks a matmul's blocking by its shape, the number of rows included. On
AVX-512 and AVX2 machines (float32, and AVX512-BF16 bfloat16) the packed weight
gave a row the same bits at every row count from 1 to 1,100. On a Sapphire
Rapids Xeon with AMX, bfloat16 did not: products of 1 to 32 rows all agreed,
but from 33 rows on a different blocking rounded 1-15% of the rows differently
(and it changed again at ~500 and ~1,000 rows). A cache hit would then change an
answer: the same question computed in a 24-token decode batch and in a
1,059-token suffix step came out different.

So each PackedLinear runs at most ``row_limit`` rows per product, the largest of
CANDIDATE_LIMITS for which this process's kernels measured invariant: random
rows are multiplied in calls of many sizes, each split into pieces of at most
the limit, and every split must give every row the same bits. The probe runs
once per weight shape, dtype and thread count (a few hundred ms for SmolLM2's
five shapes), on random weights: the kernel depends on the shape, not the values.
"""

from __future__ import annotations

import functools
import logging

import torch

logger = logging.getLogger(__name__)

CANDIDATE_LIMITS: tuple[int | None, ...] = (None, 256, 128, 64, 32, 16, 8, 4, 2)  # None = no limit
PROBE_ROWS = 1100  # above the default step budget of 1,024 tokens (+1/16 for a chunk's short tail)
# call sizes, the likeliest to disagree first: kernel changes were seen at 33, ~500 and ~1,000 rows
CALL_SIZES = (33, 1100, 257, 64, 24, 512, 1024, 100, 48, 5, 3, 2, 17, 8)
REFERENCE_SIZE = 16


def split_rows(num_rows: int, row_limit: int | None) -> list[tuple[int, int]]:
    """[start, end) pieces of at most row_limit rows, as even as possible (33 rows at 32: 17 + 16, not 32 + 1:
    a one-row piece would read the whole weight for a single row)."""
    if row_limit is None or num_rows <= row_limit:
        return [(0, num_rows)]
    num_pieces = -(-num_rows // row_limit)
    base, extra = divmod(num_rows, num_pieces)
    bounds, start = [], 0
    for i in range(num_pieces):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


@functools.cache
def invariant_row_limit(out_features: int, in_features: int, dtype: torch.dtype, num_threads: int) -> int | None:
    """The largest candidate limit under which every row of a packed product gets the same bits in any batch
    (cached per shape, dtype and thread count: oneDNN's blocking depends on all three)."""
    from engine.models.packed_linear import PackedLinear

    gen = torch.Generator().manual_seed(0)
    linear = PackedLinear((torch.randn(out_features, in_features, generator=gen) * 0.05).to(dtype), row_limit=None)
    limit = largest_invariant_limit(linear, torch.randn(PROBE_ROWS, in_features, generator=gen).to(dtype))
    name = f"{str(dtype).removeprefix('torch.')} linears of shape {out_features}x{in_features}"
    if limit is None:
        return None
    if limit == CANDIDATE_LIMITS[-1]:
        logger.warning("no row limit made packed %s batch-invariant on %d threads: cached and uncached answers "
                       "may differ in the last bits", name, num_threads)
    else:
        logger.info("packed %s run at most %d rows per product on %d threads (larger products round some rows "
                    "differently here)", name, limit, num_threads)
    return limit


def largest_invariant_limit(linear, x: torch.Tensor) -> int | None:
    """Try CANDIDATE_LIMITS on ``linear`` (a callable with a settable ``row_limit``), largest first; the
    first under which every call size agrees, else the smallest candidate."""
    references: dict[int, torch.Tensor] = {}  # products of `size` rows: the same under every limit >= size
    for limit in CANDIDATE_LIMITS:
        size = min(REFERENCE_SIZE, limit or REFERENCE_SIZE)
        linear.row_limit = None
        if size not in references:
            references[size] = _in_calls(linear, x, size)
        linear.row_limit = limit
        if _is_invariant(linear, x, references[size], limit):
            return limit
    return CANDIDATE_LIMITS[-1]


def _is_invariant(linear, x: torch.Tensor, reference: torch.Tensor, limit: int | None) -> bool:
    """Every call size agrees with the reference. Under a limit, products never exceed it, so sizes up to
    about twice the limit, on a few limits' worth of rows, exercise every piece size that can occur."""
    if limit is None:
        sizes, num_rows = CALL_SIZES, x.shape[0]
    else:
        sizes = sorted({s for s in CALL_SIZES if s <= 2 * limit + 1} | {limit - 1, limit, limit + 1}, reverse=True)
        num_rows = min(x.shape[0], 4 * limit + 8)
    return all(torch.equal(_in_calls(linear, x[:num_rows], size), reference[:num_rows]) for size in sizes)


@torch.inference_mode()
def _in_calls(linear, x: torch.Tensor, size: int) -> torch.Tensor:
    return torch.cat([linear(x[start:start + size]) for start in range(0, x.shape[0], size)])
