"""Benchmarks of the engine (each returns a JSON-able dict; the CLI prints and plots)."""
