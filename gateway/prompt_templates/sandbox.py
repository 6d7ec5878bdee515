"""The sandboxed Jinja2 environment every template (built-in or tenant) renders in.

Templates are rendered *block by block*: each `{% block NAME %}` is one segment
(NAME, text), in the order the blocks appear. Text outside blocks is not
rendered. Blocks must not nest (a nested block would render twice). Tenant
code only sees the variables and helpers the registry passes in; there is no
loader (no extends/include/import), no clock and no randomness.

Every render is bounded (bounds.py): the growth operators are intercepted (so
Jinja never folds them at compile time), `~` and every `for` loop are rewritten
at compile time into checked helpers, every call and filter is size-checked,
and a render (like a compile) runs under a deadline. Any failure — a limit,
a Python error, a RecursionError — is a TemplateError naming the template and
its line.

Client text never becomes a chat marker: the environment's `finalize` is a
Fence, so every `{{ expression }}` output is fenced as client text unless it is
MarkedText (the marker helpers); render_blocks unwraps each block into a
MarkedText. Markers must therefore be template text or helper output — a
marker built by an expression (a string literal, `~`, a filter, a macro or a
set block) renders as plain text; `+` on helper output keeps the markers.
"""

from __future__ import annotations

import functools

from jinja2 import StrictUndefined, TemplateError as JinjaTemplateError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import _PassArg
from jinja2.visitor import NodeTransformer

from gateway.canonicalize.marked_text import Fence, MarkedText
from gateway.canonicalize.sections import Doc
from gateway.canonicalize.tools import to_json, tool_name
from gateway.prompt_templates.bounds import (
    TemplateLimitError, TemplateLimits, budget, bounded_concat, bounded_iter, check_amplifier, check_arguments,
    check_binop, check_brace_format, check_result, tick,
)
from gateway.prompt_templates.errors import TemplateError

LOOP_FILTER = "_rg_bounded_loop"
CONCAT_FILTER = "_rg_bounded_concat"
RENDER_ERRORS = (
    TypeError, ValueError, KeyError, AttributeError, IndexError, ArithmeticError, RecursionError, MemoryError,
    UnicodeError,
)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """An immutable sandbox whose every growth operator, call, filter, loop and `~` is bounded by `limits`."""

    intercepted_binops = frozenset({"**", "*", "+", "%"})

    def __init__(self, limits: TemplateLimits, **options) -> None:
        super().__init__(**options)
        self.limits = limits

    def call_binop(self, context, operator: str, left, right):
        check_binop(operator, left, right, self.limits)
        return check_result(super().call_binop(context, operator, left, right), self.limits, f"'{operator}'")

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (Jinja's own signature)
        limits = __self.limits
        tick()
        check_arguments((*args, *kwargs.values()), limits, "a call")
        receiver, name = getattr(__obj, "__self__", None), getattr(__obj, "__name__", "")
        if isinstance(receiver, str) and name == "join" and args:
            check_amplifier("join", args[0], (receiver,), {}, limits)
        elif isinstance(receiver, str) and name == "replace":
            check_amplifier("replace", receiver, args, kwargs, limits)
        result = super().call(__context, __obj, *args, **kwargs)
        return check_result(result, limits, "a call")

    def wrap_str_format(self, value):
        """str.format/format_map, with the format string's widths checked when it is read."""
        wrapper = super().wrap_str_format(value)
        if wrapper is not None:
            check_brace_format(value.__self__, self.limits)
        return wrapper

    def getattr(self, obj, attribute):
        tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj, argument):
        tick()
        return super().getitem(obj, argument)

    def _generate(self, source, name, filename, defer_init=False):
        tree = LoopAndConcatRewriter().visit(source)
        tree.set_environment(self)
        return super()._generate(tree, name, filename, defer_init=defer_init)


class LoopAndConcatRewriter(NodeTransformer):
    """At compile time: every `for` iterates through LOOP_FILTER, every `a ~ b` becomes CONCAT_FILTER([a, b])."""

    def visit_For(self, node: nodes.For) -> nodes.For:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, LOOP_FILTER, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Filter:
        self.generic_visit(node)
        items = nodes.List(list(node.nodes), lineno=node.lineno)
        return nodes.Filter(items, CONCAT_FILTER, [], [], None, None, lineno=node.lineno)


def make_environment(limits: TemplateLimits | None = None) -> BoundedSandbox:
    """A fresh bounded sandbox with radixgate's filters (sort_tools, by_id, canonical_json)
    and its own Fence as `finalize`."""
    limits = limits or TemplateLimits()
    env = BoundedSandbox(
        limits,
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
    env.filters = {name: bounded_filter(name, f, limits) for name, f in env.filters.items()}
    env.filters[LOOP_FILTER] = lambda iterable: bounded_iter(iterable, limits)
    env.filters[CONCAT_FILTER] = lambda parts: bounded_concat(parts, limits)
    return env


def bounded_filter(name: str, function, limits: TemplateLimits):
    """`function` with its int arguments, known amplification and result size checked (pass_* kept)."""
    passes_context = _PassArg.from_obj(function) is not None

    @functools.wraps(function)
    def bounded(*args, **kwargs):
        tick()
        plain = args[1:] if passes_context else args  # pass_context/_environment filters get that first
        check_arguments((*plain[1:], *kwargs.values()), limits, f"filter {name!r}")
        if plain:
            check_amplifier(name, plain[0], tuple(plain[1:]), kwargs, limits)
        return check_result(function(*args, **kwargs), limits, f"filter {name!r}")

    return bounded


def sort_by_id(docs: list) -> list:
    """Documents in id order (anonymous ones last, in their order)."""
    def doc_id(doc):
        return doc.id if isinstance(doc, Doc) else (doc.get("id") if isinstance(doc, dict) else None)

    return sorted(docs, key=lambda doc: (doc_id(doc) is None, doc_id(doc) or ""))


def compile_template(env: BoundedSandbox, source: str, name: str):
    """Compile `source` under the limits (size, deadline); syntax errors and nested blocks raise TemplateError."""
    if not isinstance(source, str):
        raise TemplateError(f"template {name!r}: source must be a string")
    if len(source) > env.limits.max_source_chars:
        raise TemplateLimitError(
            f"template {name!r}: source has {len(source)} characters; the limit is {env.limits.max_source_chars}")
    try:
        with budget(env.limits):
            parsed = env.parse(source)
            template = env.from_string(source)
    except TemplateError as exc:
        raise TemplateError(f"template {name!r}: {exc}") from exc
    except JinjaTemplateError as exc:
        raise TemplateError(f"template {name!r}: {describe(exc)}") from exc
    except RENDER_ERRORS as exc:
        raise TemplateError(f"template {name!r}: {type(exc).__name__}: {exc}") from exc
    for block in parsed.find_all(nodes.Block):
        inner = next(iter(block.find_all(nodes.Block)), None)
        if inner is not None:
            raise TemplateError(f"template {name!r}, line {inner.lineno}: block {inner.name!r} nests inside {block.name!r}")
    if not template.blocks:
        raise TemplateError(f"template {name!r}: no {{% block %}} found; put each section in its own block")
    return template


def render_blocks(template, variables: dict, name: str) -> list[tuple[str, MarkedText]]:
    """Render each block of `template` alone, in source order -> [(block_name, text)], all blocks
    together within the environment's limits; `template` must come from make_environment."""
    env = template.environment
    fence, limits = env.finalize, env.limits
    segments, num_chars = [], 0
    with budget(limits):
        context = template.new_context(variables)
        for block_name, render in template.blocks.items():
            pieces = []
            try:
                for piece in render(context):
                    num_chars += len(piece)
                    if num_chars > limits.max_output_chars:
                        raise TemplateLimitError(f"output passes {limits.max_output_chars} characters")
                    tick()
                    pieces.append(piece)
                segments.append((block_name, fence.unwrap("".join(pieces))))
            except (JinjaTemplateError, *RENDER_ERRORS) as exc:
                raise render_error(template, name, block_name, exc) from exc
    return segments


def render_error(template, name: str, block_name: str, exc: BaseException) -> TemplateError:
    """A TemplateError naming the template, the block and the template line the error came from."""
    line = getattr(exc, "lineno", None) or template_line(template, exc)
    where = f"template {name!r}, block {block_name!r}" + (f", line {line}" if line else "")
    message = exc.message if isinstance(exc, JinjaTemplateError) and exc.message else str(exc)
    kind = "" if isinstance(exc, TemplateError) else f"{type(exc).__name__}: "
    return TemplateLimitError(f"{where}: {kind}{message}") if isinstance(exc, TemplateLimitError) else \
        TemplateError(f"{where}: {kind}{message}")


def template_line(template, exc: BaseException) -> int | None:
    """The template line of the innermost compiled-template frame in `exc`'s traceback."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = template.get_corresponding_lineno(tb.tb_lineno)
        tb = tb.tb_next
    return line


def describe(exc: Exception) -> str:
    line = getattr(exc, "lineno", None)
    kind = type(exc).__name__
    return f"line {line}: {kind}: {exc.message if hasattr(exc, 'message') else exc}" if line else f"{kind}: {exc}"
