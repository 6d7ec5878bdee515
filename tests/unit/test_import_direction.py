"""Imports run one way (STYLE.md): gateway -> engine (through engine/__init__ only),
dashboard -> gateway.db (plus the key check of gateway.tenants, so a dashboard sign-in hashes
and looks keys up exactly as the gateway does), bench -> gateway, engine (engine internals
allowed, bench/__init__.py); the engine imports no web, database or gateway code; nothing in
engine, gateway or dashboard imports bench; and no package imports itself in a circle."""

import ast
import re
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

PACKAGES = ("engine", "gateway", "dashboard", "bench")
PRODUCT = ("engine", "gateway", "dashboard")
BENCH_ALLOWED = {"bench", "gateway", "engine"}  # of the first-party packages
ENGINE_FORBIDDEN = {"gateway", "dashboard", "fastapi", "sqlalchemy", "litellm", "starlette", "streamlit", "pydantic"}
WEB_STACK = {"fastapi", "starlette", "uvicorn"}
DASHBOARD_KEY_CHECK = {"gateway.tenants.service", "gateway.tenants.admin_keys", "gateway.tenants"}
NARRATION = re.compile(r"Xeon|EPYC|Sapphire Rapids|Ryzen|[0-9.]+ ?ms per (step|layer|token)|[0-9.]+x faster")


def source_files(package: str) -> list[Path]:
    return sorted((REPO_ROOT / package).rglob("*.py"))


def rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def import_nodes(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every absolute import in the module, at any depth, except those under `if TYPE_CHECKING:`."""
    found = []

    def visit(node: ast.AST) -> None:
        if is_type_checking_block(node):
            return
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return found


def imported_modules(path: Path) -> set[str]:
    """Dotted names the module imports; `from a.b import c` counts as a.b.c where that is a module."""
    names = set()
    for node in import_nodes(path):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        names.add(node.module)
        for alias in node.names:
            candidate = f"{node.module}.{alias.name}"
            if (REPO_ROOT / Path(*candidate.split("."))).with_suffix(".py").is_file() or (
                REPO_ROOT / Path(*candidate.split(".")) / "__init__.py"
            ).is_file():
                names.add(candidate)
    return names


@pytest.mark.parametrize("path", source_files("engine"), ids=rel)
def test_engine_imports_nothing_from_gateway_dashboard_or_web_stack(path):
    roots = {name.split(".")[0] for name in imported_modules(path)}
    assert not roots & ENGINE_FORBIDDEN


@pytest.mark.parametrize("path", source_files("gateway") + source_files("dashboard"), ids=rel)
def test_gateway_and_dashboard_use_the_engine_only_through_its_package(path):
    internals = sorted(name for name in imported_modules(path) if name.startswith("engine."))
    assert not internals, f"{rel(path)} reaches past engine/__init__: {internals}"


@pytest.mark.parametrize("path", source_files("dashboard"), ids=rel)
def test_dashboard_uses_only_the_gateway_database_layer(path):
    names = imported_modules(path)
    gateway_imports = {m for m in names if m.split(".")[0] == "gateway"}
    allowed = [m for m in gateway_imports if m == "gateway.db" or m.startswith("gateway.db.") or m in DASHBOARD_KEY_CHECK]
    assert len(allowed) == len(gateway_imports), gateway_imports
    assert not {m.split(".")[0] for m in names} & WEB_STACK


@pytest.mark.parametrize("path", [p for package in PRODUCT for p in source_files(package)], ids=rel)
def test_the_product_imports_nothing_from_bench(path):
    roots = {name.split(".")[0] for name in imported_modules(path)}
    assert "bench" not in roots, f"{rel(path)} imports the bench (radixgate bench is found by name at run time)"


@pytest.mark.parametrize("path", source_files("bench"), ids=rel)
def test_bench_imports_only_gateway_and_engine_of_the_first_party_packages(path):
    first_party = {name.split(".")[0] for name in imported_modules(path)} & {*PACKAGES, "tests", "migrations"}
    assert first_party <= BENCH_ALLOWED, f"{rel(path)} imports {sorted(first_party - BENCH_ALLOWED)}"


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for package in PACKAGES for path in source_files(package)}
    return {name: {m for m in imported_modules(path) if m in modules and m != name} for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_no_module_imports_itself_in_a_circle():
    assert find_cycle(import_graph()) is None


def test_find_cycle_reports_a_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("path", [p for package in PACKAGES for p in source_files(package)], ids=rel)
def test_source_states_contracts_not_machines_or_timings(path):
    """Measurements belong in docs/performance.md and commit messages (STYLE.md)."""
    hits = [line.strip() for line in path.read_text().splitlines() if NARRATION.search(line)]
    assert not hits, hits
