"""radixgate's own CPU kernels (C++ next to this file), compiled for this CPU on first use.

    native_kernels()   the compiled module, or None where it cannot be built (no compiler, a failed
                       build): callers then keep torch's kernels
    native_for(dtype, device)   the module for rows of that dtype there: float32 and bfloat16 on a CPU
                       (one build serves both)
    is_built()         whether the build is cached already (`radixgate warmup` reports it)

Whether an engine uses them at all is EngineConfig.native_kernels, passed down to each kernel's
constructor (``native=``); this module reads no environment.

The build (torch.utils.cpp_extension, ~1 minute once) goes to torch's extension cache under a name that
carries a hash of the sources, the compiler flags and this CPU's model and flags, so a cache shared by
machines never hands one CPU a build for another's instruction set.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

SOURCE_NAMES = ("native_bindings.cpp", "decode_attention.cpp", "chunk_attention.cpp", "rms_norm.cpp", "rotary.cpp", "silu_mul.cpp",
                "dense_rows.cpp", "int4_rows.cpp", "int4_dot_rows.cpp", "int8_rows.cpp", "int8_dot_rows.cpp")
SOURCES = tuple(Path(__file__).with_name(name) for name in SOURCE_NAMES)
HEADERS = tuple(sorted(Path(__file__).parent.glob("*.h")))  # every one: a header edit must change the build name
CFLAGS = ("-O3", "-march=native", "-ffp-contract=fast", "-std=c++20", "-fopenmp")


def _cpu_signature() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    lines = [line for line in text.splitlines() if line.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(lines)))


def build_name() -> str:
    digest = hashlib.sha256()
    for source in SOURCES + HEADERS:
        digest.update(source.read_bytes())
    digest.update(" ".join(CFLAGS).encode())
    digest.update(_cpu_signature().encode())
    return f"radixgate_cpu_{digest.hexdigest()[:16]}"


def is_built() -> bool:
    """Whether this CPU's build is already in torch's extension cache, so native_kernels() only loads it."""
    from torch.utils.cpp_extension import _get_build_directory  # the folder load() builds in (creates it)

    name = build_name()
    return (Path(_get_build_directory(name, verbose=False)) / f"{name}.so").is_file()


@functools.cache
def native_kernels():
    from torch.utils.cpp_extension import load

    logger.info("loading radixgate's native CPU kernels (the first use on a machine compiles them: ~1 minute)")
    started = time.perf_counter()
    try:
        module = load(name=build_name(), sources=[str(s) for s in SOURCES], extra_cflags=list(CFLAGS),
                      verbose=False)
    except Exception as exc:  # no compiler, missing headers, a failed build: keep torch's kernels
        logger.warning("could not build radixgate's native CPU kernels (%s: %s); decode attention runs on "
                       "torch's kernels", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
        return None
    logger.info("native CPU kernels ready in %.1f s", time.perf_counter() - started)
    return module


def native_for(dtype: torch.dtype, device: torch.device, enabled: bool = True):
    """native_kernels() for float32 or bfloat16 rows on a CPU; None for any other dtype or device, or when
    not ``enabled``."""
    if not enabled or torch.device(device).type != "cpu" or dtype not in (torch.float32, torch.bfloat16):
        return None
    return native_kernels()
