"""Cache analytics: the raw-order shadow index, miss attribution, Prometheus metrics."""
