"""bench rag: the prefix-heavy RAG workload, radix cache on vs off, and baselines."""

BASELINE_WARMUP_TOKENS = 8  # each baseline's untimed warm-up: this many prompt tokens, two new ones
