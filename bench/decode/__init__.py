"""bench decode: decode and prefill throughput of the model runner."""
