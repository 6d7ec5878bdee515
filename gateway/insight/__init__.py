"""Cache analytics: the raw-order shadow index, miss attribution, Prometheus metrics, and the
engine sampler that stores the embedded engine's cache statistics periodically (engine_snapshots)."""
