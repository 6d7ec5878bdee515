"""`radixgate tenant ...` commands."""

import typer

app = typer.Typer(help="tenant commands.", no_args_is_help=True)
