"""The top-level `radixgate` group: its own sub-commands, plus `bench`, found by module name when asked for.

The product never imports the benchmarks (the direction is bench -> gateway -> engine). `radixgate serve` and
every other command run without `bench` in sys.modules; `bench.cli` is imported only when click asks this group
for the `bench` command: `radixgate bench ...`, `radixgate bench --help`, or the top-level `--help` listing.
If `bench.cli` does not import (the package or its extra is absent: bench/cli.py checks the extra first),
`bench` is a stand-in command that prints how to install it and exits 1.
"""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperGroup

BENCH = "bench"
BENCH_MODULE = "bench.cli"  # a name, not an import: the import-direction test forbids gateway -> bench
INSTALL_HINT = "pip install 'radixgate[bench]'"


class RootGroup(TyperGroup):
    """A TyperGroup that lists `bench` after the plain commands and loads it on the first `get_command`."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        names = super().list_commands(ctx)
        if BENCH in names:
            return names
        num_plain = sum(not isinstance(self.commands[name], TyperGroup) for name in names)
        return [*names[:num_plain], BENCH, *names[num_plain:]]

    def get_command(self, ctx: typer.Context, cmd_name: str):
        if cmd_name == BENCH and BENCH not in self.commands:
            self.add_command(load_bench(), BENCH)
        return super().get_command(ctx, cmd_name)


def load_bench():
    """The click command for `radixgate bench`: the bench's typer app, or the install hint when it is absent."""
    try:
        module = importlib.import_module(BENCH_MODULE)
    except ImportError as error:
        return missing_bench(error)
    command = typer.main.get_group(module.app)
    command.name = BENCH
    return command


def missing_bench(error: ImportError):
    """A `bench` command that accepts any arguments (`--help` too), says what is missing and how to install it,
    and exits 1."""
    message = f"radixgate bench needs the bench extra ({error}): {INSTALL_HINT}"
    stub = typer.Typer(add_completion=False)

    @stub.command(
        name=BENCH, help="Benchmarks (not installed: radixgate's bench extra is absent).",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True}, add_help_option=False,
    )
    def bench(ctx: typer.Context) -> None:
        typer.echo(message, err=True)
        raise typer.Exit(1)

    return typer.main.get_command(stub)
