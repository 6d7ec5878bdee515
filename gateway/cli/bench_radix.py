"""`radixgate bench radix`: replay a token-id trace through the radix cache."""

import typer


def register(app: typer.Typer) -> None:
    app.command("radix")(radix)


def radix(trace: str = typer.Option(None, help="Path to a token-id trace (.npz); default: a generated one.")) -> None:
    """Replay a token-id trace through the radix cache (placeholder until the bench lands)."""
    raise typer.Exit("bench radix is not implemented yet")
