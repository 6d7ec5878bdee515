"""Benchmarks of the engine (each returns a JSON-able dict; the CLI prints and plots)."""

from collections.abc import Callable

Progress = Callable[[str, int], None]  # (label, num_done) after each finished request
BASELINE_WARMUP_TOKENS = 8  # each baseline's untimed warm-up: this many prompt tokens, two new ones
