"""bench rag: the prefix-heavy RAG workload, radix cache on vs off, and baselines."""
