"""The sandboxed Jinja2 environment every template (built-in or tenant) renders in.

Templates are rendered *block by block*: each `{% block NAME %}` is one segment
(NAME, text), in the order the blocks appear. Text outside blocks is not
rendered. Blocks must not nest (a nested block would render twice). Tenant
code only sees the variables and helpers the registry passes in; there is no
loader (no extends/include/import), no clock and no randomness.

Client text never becomes a chat marker: the environment's `finalize` is a
Fence, so every `{{ expression }}` output is fenced as client text unless it is
MarkedText (the marker helpers); render_blocks unwraps each block into a
MarkedText. Markers must therefore be template text or helper output — a
marker built by an expression (a string literal, `~`, a filter, a macro or a
set block) renders as plain text; `+` on helper output keeps the markers.
"""

from __future__ import annotations

from jinja2 import StrictUndefined, TemplateError as JinjaTemplateError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gateway.canonicalize.marked_text import Fence, MarkedText
from gateway.canonicalize.sections import Doc
from gateway.canonicalize.tools import to_json, tool_name


class TemplateError(ValueError):
    """A template failed to compile or render; the message says where and why (HTTP 400)."""


def make_environment() -> ImmutableSandboxedEnvironment:
    """A fresh sandbox with radixgate's filters (sort_tools, by_id, canonical_json)
    and its own Fence as `finalize`."""
    env = ImmutableSandboxedEnvironment(
        autoescape=False,
        finalize=Fence(),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["sort_tools"] = lambda tools: sorted(tools, key=tool_name)
    env.filters["by_id"] = sort_by_id
    env.filters["canonical_json"] = to_json
    return env


def sort_by_id(docs: list) -> list:
    """Documents in id order (anonymous ones last, in their order)."""
    def doc_id(doc):
        return doc.id if isinstance(doc, Doc) else (doc.get("id") if isinstance(doc, dict) else None)

    return sorted(docs, key=lambda doc: (doc_id(doc) is None, doc_id(doc) or ""))


def compile_template(env: ImmutableSandboxedEnvironment, source: str, name: str):
    """Compile `source`; syntax errors and nested blocks raise TemplateError with the line."""
    if not isinstance(source, str):
        raise TemplateError(f"template {name!r}: source must be a string")
    try:
        parsed = env.parse(source)
        template = env.from_string(source)
    except JinjaTemplateError as exc:
        raise TemplateError(f"template {name!r}: {describe(exc)}") from exc
    for block in parsed.find_all(nodes.Block):
        inner = next(iter(block.find_all(nodes.Block)), None)
        if inner is not None:
            raise TemplateError(f"template {name!r}, line {inner.lineno}: block {inner.name!r} nests inside {block.name!r}")
    if not template.blocks:
        raise TemplateError(f"template {name!r}: no {{% block %}} found; put each section in its own block")
    return template


def render_blocks(template, variables: dict, name: str) -> list[tuple[str, MarkedText]]:
    """Render each block of `template` alone, in source order -> [(block_name, text)];
    `template` must come from make_environment (its finalize is the Fence)."""
    context = template.new_context(variables)
    fence = template.environment.finalize
    segments = []
    for block_name, render in template.blocks.items():
        try:
            segments.append((block_name, fence.unwrap("".join(render(context)))))
        except JinjaTemplateError as exc:
            raise TemplateError(f"template {name!r}, block {block_name!r}: {describe(exc)}") from exc
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, ZeroDivisionError) as exc:
            raise TemplateError(f"template {name!r}, block {block_name!r}: {type(exc).__name__}: {exc}") from exc
    return segments


def describe(exc: Exception) -> str:
    line = getattr(exc, "lineno", None)
    kind = type(exc).__name__
    return f"line {line}: {kind}: {exc.message if hasattr(exc, 'message') else exc}" if line else f"{kind}: {exc}"
