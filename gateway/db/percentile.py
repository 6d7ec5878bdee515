"""Percentiles as PostgreSQL's percentile_cont computes them (linear interpolation between the two
nearest ranks), exactly from sorted values, or from a fine histogram with a bounded error."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate


def percentile_cont(sorted_values: Sequence[float], fraction: float) -> float | None:
    """The `fraction` (0..1) percentile of ascending `sorted_values`; None if there are none."""
    check_fraction(fraction)
    if not sorted_values:
        return None
    return interpolate(lambda index: sorted_values[index], len(sorted_values), fraction)


def histogram_percentile(buckets: Sequence[tuple[int, int]], width: float, fraction: float) -> float | None:
    """Percentile from ascending (bucket index, count) pairs, bucket i covering [i*width, (i+1)*width).

    The k values in a bucket are taken as evenly spread inside it, so the result differs from
    percentile_cont over the raw values by at most one bucket width.
    """
    check_fraction(fraction)
    ends = list(accumulate(count for _, count in buckets))
    if not ends or ends[-1] == 0:
        return None

    def value_at(rank: int) -> float:
        position = bisect_right(ends, rank)
        index, count = buckets[position]
        start = ends[position] - count
        return (index + (rank - start + 0.5) / count) * width

    return interpolate(value_at, ends[-1], fraction)


def interpolate(value_at, num_values: int, fraction: float) -> float:
    position = fraction * (num_values - 1)
    lower = math.floor(position)
    upper = min(lower + 1, num_values - 1)
    low_value = value_at(lower)
    return low_value + (value_at(upper) - low_value) * (position - lower)


def check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be within [0, 1], got {fraction}")
