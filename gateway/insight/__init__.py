"""Cache analytics: the raw-order shadow index, miss attribution, Prometheus metrics, the engine sampler that
stores the embedded engine's cache statistics periodically (engine_snapshots), and the per-request cache
diagnosis (prompt_fingerprint -> diagnosis_store -> cache_diagnosis, rendered by diagnosis_render): why a
prompt missed against its caller's previous one, in the vocabulary the doctor's causes also name."""
