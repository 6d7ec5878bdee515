"""`radixgate template ...` commands."""

import typer

app = typer.Typer(help="template commands.", no_args_is_help=True)
