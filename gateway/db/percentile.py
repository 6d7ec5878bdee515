"""Percentiles as PostgreSQL's percentile_cont computes them: linear interpolation between the two
nearest ranks of the sorted values."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile_cont(sorted_values: Sequence[float], fraction: float) -> float | None:
    """The `fraction` (0..1) percentile of ascending `sorted_values`; None if there are none."""
    check_fraction(fraction)
    if not sorted_values:
        return None
    return interpolate(lambda index: sorted_values[index], len(sorted_values), fraction)


def interpolate(value_at, num_values: int, fraction: float) -> float:
    position = fraction * (num_values - 1)
    lower = math.floor(position)
    upper = min(lower + 1, num_values - 1)
    low_value = value_at(lower)
    return low_value + (value_at(upper) - low_value) * (position - lower)


def check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be within [0, 1], got {fraction}")
