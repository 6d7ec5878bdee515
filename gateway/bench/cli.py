"""`radixgate bench ...`: side-by-side benchmarks, printed and written as JSON.

Each benchmark registers itself from its own module (bench_<name>.py) so the
owners of different benchmarks never edit the same file.
"""

import typer

from gateway.bench.agent import command as bench_agent
from gateway.bench.decode import command as bench_decode
from gateway.bench.policy import command as bench_policy
from gateway.bench.radix import command as bench_radix
from gateway.bench.rag import command as bench_rag
from gateway.bench.stats import command as bench_stats

app = typer.Typer(help="Benchmarks: ratios measured side by side in one run.", no_args_is_help=True)
bench_radix.register(app)
bench_agent.register(app)
bench_rag.register(app)
bench_policy.register(app)
bench_decode.register(app)
bench_stats.register(app)
