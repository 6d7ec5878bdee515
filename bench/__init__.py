"""`radixgate bench`: benchmarks that measure the product side by side in one run.

Each bench is a subpackage: `command.py` is its typer command (flags, printing,
plots; registered by bench.cli), `run.py` the measurement, which returns a
JSON-able dict. `workloads/` holds one generator per workload shape (token-id
traces, the RAG workload, the agent workload), each also loading the shared file
of that shape by path.

Imports run bench -> gateway -> engine: a bench may import gateway and engine,
never dashboard, and nothing in engine, gateway or dashboard imports bench
(`radixgate bench` is found by name, gateway/cli/root_group.py). Benches that
serve requests use the engine's public API (`from engine import Engine, ...`);
benches that drive the model runner directly import its parts from their own
modules (engine.runner, engine.models.loader, engine.forward_batch, ...), which
are engine internals, not API. Needs the `[bench]` extra (bench/extras.py).
"""
