"""`radixgate bench structured`: schema-valid rate of forced outputs with the grammar vs without, one run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.engine_environment import environment_fields
from bench.output import write_json


def register(app: typer.Typer) -> None:
    app.command("structured")(structured)


def structured(
    num_prompts: int = typer.Option(50, min=1, help="Varied requests (json_schema, named tool, required tool in turn)."),
    max_tokens: int = typer.Option(96, min=8, help="Completion budget per request."),
    temperature: float = typer.Option(0.0, min=0.0, help="0: greedy."),
    seed: int = typer.Option(0, help="Seed of the request generator."),
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here."),
) -> None:
    """Prints how many answers are schema-valid with constrained decoding and without (same prompts)."""
    from engine import Engine, EngineConfig
    from bench.structured.prompts import make_bodies
    from bench.structured.run import format_validity, run_validity
    from gateway.prompt_templates import TemplateRegistry

    templates = TemplateRegistry()  # the built-in templates
    with Engine(EngineConfig(**environment_fields(), model=model, kv_cache_tokens=65536)) as engine:
        result = run_validity(engine, templates, make_bodies(num_prompts, seed), max_tokens, temperature)
    for line in format_validity(result):
        typer.echo(line)
    write_json(result, json_out)
