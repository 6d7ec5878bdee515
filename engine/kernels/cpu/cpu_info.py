"""Facts about this CPU that the kernels adapt to, read at first use (never at import).

  * l2_cache_bytes(): the per-core L2 size from Linux's sysfs (None elsewhere, or when unreadable);
    read once per process.
  * cpu_has_native_bfloat16(): AVX512-BF16 or AMX, as torch reports them; without either,
    bfloat16 matmuls are emulated.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

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


def cpu_has_native_bfloat16() -> bool:
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)
