"""`radixgate bench ...`: side-by-side benchmarks, printed and written as JSON.

Each benchmark registers its own command from bench/<name>/command.py,
so the owners of different benchmarks never edit the same file. Importing this module raises
ModuleNotFoundError when the `[bench]` extra is absent (bench/extras.py), before any bench loads.
"""

import typer

from bench.extras import require_extras

require_extras()  # before the benches import: a missing extra fails here, with its name

from bench.accuracy import command as accuracy
from bench.agent import command as agent
from bench.claude_code import command as claude_code
from bench.cluster import command as cluster
from bench.decode import command as decode
from bench.fairness import command as fairness
from bench.hostile import command as hostile
from bench.load import command as load
from bench.policy import command as policy
from bench.radix import command as radix
from bench.rag import command as rag
from bench.stats import command as stats
from bench.structured import command as structured
from bench.tier import command as tier

app = typer.Typer(help="Benchmarks: ratios measured side by side in one run.", no_args_is_help=True)
for bench in (radix, agent, rag, policy, fairness, decode, stats, structured, hostile, load, accuracy, cluster, tier,
              claude_code):
    bench.register(app)
