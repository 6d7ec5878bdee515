"""Where a bench's result goes besides the terminal: a JSON file and a PNG, each only when asked for."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer


def verdict(passed: bool) -> str:
    """A target's outcome as rich markup: a green "ok" or a red "MISSED"."""
    return "[green]ok[/green]" if passed else "[red]MISSED[/red]"


def write_json(result: object, path: Path | None) -> None:
    """Write `result` as indented JSON to `path`, creating its folder (nothing when None), and say so."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2, default=str) + "\n")
        typer.echo(f"wrote {path}")


def write_plot(plot: Callable[[dict, Path], None], result: dict, path: Path | None) -> None:
    """Draw `result` with `plot` into `path` (nothing when None) and say so."""
    if path:
        plot(result, path)
        typer.echo(f"wrote {path}")
