"""`radixgate bench ...`: side-by-side benchmarks, printed and written as JSON.

Each benchmark registers its own command from gateway/bench/<name>/command.py,
so the owners of different benchmarks never edit the same file.
"""

import typer

from gateway.bench.accuracy import command as accuracy
from gateway.bench.agent import command as agent
from gateway.bench.cluster import command as cluster
from gateway.bench.decode import command as decode
from gateway.bench.fairness import command as fairness
from gateway.bench.hostile import command as hostile
from gateway.bench.load import command as load
from gateway.bench.policy import command as policy
from gateway.bench.radix import command as radix
from gateway.bench.rag import command as rag
from gateway.bench.stats import command as stats
from gateway.bench.structured import command as structured
from gateway.bench.tier import command as tier

app = typer.Typer(help="Benchmarks: ratios measured side by side in one run.", no_args_is_help=True)
for bench in (radix, agent, rag, policy, fairness, decode, stats, structured, hostile, load, accuracy, cluster, tier):
    bench.register(app)
