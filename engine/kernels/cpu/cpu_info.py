"""The CPU's per-core L2 cache size, read from Linux's sysfs (None elsewhere)."""

from __future__ import annotations

import functools
from pathlib import Path

CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
UNITS = {"K": 1024, "M": 1024 * 1024}


@functools.cache
def l2_cache_bytes() -> int | None:
    for index in sorted(CACHE_DIR.glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip()
                return int(size[:-1]) * UNITS[size[-1]] if size[-1] in UNITS else int(size)
        except (OSError, ValueError):
            return None
    return None
