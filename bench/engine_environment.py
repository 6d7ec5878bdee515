"""The machine-level engine settings a bench takes from the environment, as `radixgate serve` does.

`native_kernels` (RADIXGATE_ENGINE__NATIVE_KERNELS or RADIXGATE_NATIVE_KERNELS) and `cache_dir`
(RADIXGATE_ENGINE__CACHE_DIR or RADIXGATE_CACHE_DIR) reach the engine only through EngineConfig
(the engine reads no environment); a bench that builds its own EngineConfig adds these.
"""

from __future__ import annotations


def environment_fields() -> dict:
    """{"native_kernels", "cache_dir"} as the gateway's settings read them from the environment."""
    from gateway.settings import Settings

    engine = Settings().engine
    return {"native_kernels": engine.native_kernels, "cache_dir": engine.cache_dir}
