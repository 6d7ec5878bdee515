"""The `[bench]` extra: the modules the benches need beyond the product's own dependencies.

`require_extras()` raises ModuleNotFoundError naming the first one that is absent, without importing any
of them (matplotlib stays out of sys.modules until a bench draws a plot). bench/cli.py calls it on import,
so `radixgate bench` either loads whole or answers with the install hint (gateway/cli/root_group.py).
Keep this list in step with `[project.optional-dependencies] bench` in pyproject.toml.
"""

from __future__ import annotations

import importlib.util

BENCH_EXTRA = ("matplotlib", "tqdm")


def require_extras(modules: tuple[str, ...] = BENCH_EXTRA) -> None:
    """Returns when every module in `modules` can be imported; raises ModuleNotFoundError otherwise."""
    for name in modules:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
