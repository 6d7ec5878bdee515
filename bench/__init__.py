"""`radixgate bench`: benchmarks that measure the product side by side in one run.

Each bench is a subpackage: `command.py` is its typer command (flags, printing,
plots; registered by bench.cli), `run.py` the measurement, which
returns a JSON-able dict. Benches that run the model in this process use the
engine through `engine`'s public API only. `workloads/` holds one generator per
workload shape (token-id traces, the RAG workload, the agent workload), each
also loading the shared file of that shape by path.
"""
