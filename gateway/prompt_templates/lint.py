"""lint_template(): what in a template breaks prefix caching.

Rules (rule id: severity):
  syntax: error              the template does not parse
  unsupported-tag: error     extends/include/import (the sandbox has no loader)
  nested-block: error        a block inside a block (it would render twice)
  section-order: error       a section comes after one that canonically follows it
                             (system, tools, context, history, dynamic, question, generation)
  dynamic-before-question: error  a clock, id, random value, per-user value or the
                             `dynamic` section is used before the question
  unsorted-tools: warning    `for ... in tools` without `|sort_tools` / `|sort`
  text-outside-blocks: warning    text outside blocks is never rendered
  missing-question: warning  the template never renders `question`
A section is placed by its block (a block named after it) or, outside such a
block, by the first line that uses its variable.
"""

from __future__ import annotations

from dataclasses import dataclass

from jinja2 import TemplateSyntaxError, nodes

from gateway.prompt_templates.sandbox import make_environment

CANONICAL_ORDER = ("system", "tools", "context", "history", "dynamic", "question", "generation")
EARLY_SECTIONS = ("system", "tools", "context", "history")
DYNAMIC_NAMES = frozenset({
    "now", "utcnow", "today", "time", "timestamp", "date", "datetime", "uuid", "uuid4", "random", "randint",
    "request_id", "req_id", "trace_id", "session_id", "user", "user_id", "user_name", "username", "name",
    "customer", "customer_name", "email", "strftime_now", "dynamic",
})
DYNAMIC_ATTRS = frozenset({"now", "utcnow", "today", "timestamp", "uuid", "uuid4", "random", "randint", "request_id", "trace_id", "session_id", "user_name", "username"})
SORT_FILTERS = frozenset({"sort", "sort_tools"})
VARIABLE_SECTION = {"generation_prompt": "generation", **{name: name for name in CANONICAL_ORDER}}


@dataclass(frozen=True)
class LintFinding:
    severity: str  # "error" | "warning"
    rule: str
    message: str
    line: int

    def to_dict(self) -> dict:
        return {"severity": self.severity, "rule": self.rule, "message": self.message, "line": self.line}


def lint_template(source: str) -> list[LintFinding]:
    """Findings for `source`, sorted by line then rule."""
    try:
        tree = make_environment().parse(source)
    except TemplateSyntaxError as exc:
        return [LintFinding("error", "syntax", exc.message or str(exc), exc.lineno or 1)]
    findings = [*structure_findings(tree), *order_findings(tree), *dynamic_findings(tree), *tools_findings(tree)]
    if not any(node.name == "question" for node in tree.find_all(nodes.Name)) and not has_block(tree, "question"):
        findings.append(LintFinding("warning", "missing-question", "the template never renders `question`", 1))
    return sorted(findings, key=lambda finding: (finding.line, finding.rule))


def has_block(tree: nodes.Template, name: str) -> bool:
    return any(block.name == name for block in tree.find_all(nodes.Block))


def structure_findings(tree: nodes.Template) -> list[LintFinding]:
    findings = []
    for node in tree.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)):
        tag = type(node).__name__.lower()
        findings.append(LintFinding("error", "unsupported-tag", f"{{% {tag} %}} is not available in the sandbox", node.lineno))
    for block in tree.find_all(nodes.Block):
        for inner in block.find_all(nodes.Block):
            findings.append(LintFinding("error", "nested-block", f"block {inner.name!r} nests inside {block.name!r}", inner.lineno))
    if has_any_block(tree):
        for node in tree.body:
            if isinstance(node, nodes.Output) and any(not is_blank(child) for child in node.nodes):
                findings.append(LintFinding("warning", "text-outside-blocks", "output outside {% block %} is never rendered", node.lineno))
    return findings


def has_any_block(tree: nodes.Template) -> bool:
    return next(iter(tree.find_all(nodes.Block)), None) is not None


def is_blank(node: nodes.Node) -> bool:
    return isinstance(node, nodes.TemplateData) and not node.data.strip()


def placements(tree: nodes.Template) -> list[tuple[str, int, int]]:
    """(section, position, line) per section in document order: its block, or the
    first use of its variable outside section blocks."""
    placed: dict[str, tuple[int, int]] = {}
    for position, (node, block_name) in enumerate(walk(tree, None)):
        if isinstance(node, nodes.Block) and node.name in CANONICAL_ORDER:
            placed.setdefault(node.name, (position, node.lineno))
        elif isinstance(node, nodes.Name) and node.name in VARIABLE_SECTION and block_name not in CANONICAL_ORDER:
            placed.setdefault(VARIABLE_SECTION[node.name], (position, node.lineno))
    return sorted(((name, pos, line) for name, (pos, line) in placed.items()), key=lambda item: item[1])


def order_findings(tree: nodes.Template) -> list[LintFinding]:
    findings, latest = [], None
    for section, _, line in placements(tree):
        rank = CANONICAL_ORDER.index(section)
        if latest is not None and rank < CANONICAL_ORDER.index(latest):
            findings.append(LintFinding(
                "error", "section-order",
                f"section {section!r} comes after {latest!r}; canonical order is {', '.join(CANONICAL_ORDER)}", line))
        elif latest is None or rank > CANONICAL_ORDER.index(latest):
            latest = section
    return findings


def question_position(tree: nodes.Template) -> int | None:
    positions = [pos for section, pos, _ in placements(tree) if section in ("dynamic", "question")]
    return min(positions) if positions else None


def dynamic_findings(tree: nodes.Template) -> list[LintFinding]:
    """Dynamic values inside early-section blocks, or before the question outside blocks."""
    cut, findings, flagged_lines = question_position(tree), [], set()
    local_names = {node.name for node in tree.find_all(nodes.Name) if node.ctx in ("store", "param")}
    for position, (node, block_name) in enumerate(walk(tree, None)):
        label = dynamic_label(node, local_names)
        if label is None or node.lineno in flagged_lines:
            continue
        is_early = block_name in EARLY_SECTIONS or (block_name is None and (cut is None or position < cut))
        if is_early:
            flagged_lines.add(node.lineno)
            where = f"in block {block_name!r}" if block_name else "before the question"
            findings.append(LintFinding(
                "error", "dynamic-before-question",
                f"{label} {where} changes per request and breaks the cached prefix; move it to the dynamic or question block",
                node.lineno))
    return findings


def dynamic_label(node: nodes.Node, local_names: set[str]) -> str | None:
    """A label for a per-request value: a free dynamic variable (not a loop or set
    variable of the template) or a clock/id/random attribute (`x.now()`)."""
    if isinstance(node, nodes.Name) and node.ctx == "load" and node.name in DYNAMIC_NAMES - local_names:
        return f"`{node.name}`"
    if isinstance(node, nodes.Getattr) and node.attr in DYNAMIC_ATTRS:
        return f"`.{node.attr}`"
    return None


def tools_findings(tree: nodes.Template) -> list[LintFinding]:
    findings = []
    for loop in tree.find_all(nodes.For):
        if mentions_tools(loop.iter) and not is_sorted(loop.iter):
            findings.append(LintFinding(
                "warning", "unsorted-tools",
                "tools are iterated without `|sort_tools` (or `|sort(attribute='function.name')`): tool order then follows the client",
                loop.lineno))
    return findings


def mentions_tools(node: nodes.Node) -> bool:
    names = [node] if isinstance(node, nodes.Name) else list(node.find_all(nodes.Name))
    attrs = [node] if isinstance(node, nodes.Getattr) else list(node.find_all(nodes.Getattr))
    return any(name.name == "tools" for name in names) or any(attr.attr == "tools" for attr in attrs)


def is_sorted(node: nodes.Node) -> bool:
    filters = [node] if isinstance(node, nodes.Filter) else list(node.find_all(nodes.Filter))
    return any(item.name in SORT_FILTERS for item in filters)


def walk(node: nodes.Node, block_name: str | None):
    """Yield (node, enclosing block name) depth-first."""
    for child in node.iter_child_nodes():
        inner = child.name if isinstance(child, nodes.Block) else block_name
        yield child, inner
        yield from walk(child, inner)
