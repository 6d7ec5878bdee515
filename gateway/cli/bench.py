"""`radixgate bench ...`: side-by-side benchmarks, printed and written as JSON.

Each benchmark registers itself from its own module (bench_<name>.py) so the
owners of different benchmarks never edit the same file.
"""

import typer

from gateway.cli import bench_agent, bench_radix
from gateway.cli import bench_policy, bench_rag
from gateway.cli import bench_decode
from gateway.cli import bench_stats

app = typer.Typer(help="Benchmarks: ratios measured side by side in one run.", no_args_is_help=True)
bench_radix.register(app)
bench_agent.register(app)
bench_rag.register(app)
bench_policy.register(app)
bench_decode.register(app)
bench_stats.register(app)
