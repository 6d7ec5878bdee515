"""Imports run one way (STYLE.md): gateway -> engine (through engine/__init__ only),
dashboard -> gateway.db (plus the key check of gateway.tenants, so a dashboard sign-in hashes
and looks keys up exactly as the gateway does, and the cache doctor, whose diagnosis the doctor
page shows), bench -> gateway, engine (engine internals allowed, bench/__init__.py); the engine
imports no web, database or gateway code; nothing in engine, gateway or dashboard imports bench;
no module imports itself in a circle, and neither does a folder (a sub-package of engine/ or
gateway/)."""

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
# The doctor is analysis over gateway.db alone (its diagnosis and fix texts, no app state), so the
# dashboard's doctor page may call it as it calls the query modules; the doctor's own imports are
# held to gateway.db by test_doctor_reads_only_the_database_layer.
DASHBOARD_DOCTOR = "gateway.doctor"
# The gateway's engine settings take EngineConfig's fields and defaults at import (one source of truth);
# engine.config imports only the standard library (test_engine_config_is_standard_library_only), so the
# settings stay light where engine/__init__ would load torch into every command (migrations, --help).
ENGINE_CONFIG_READERS = {"gateway/settings/engine.py": {"engine.config"}}
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
    internals = sorted(name for name in imported_modules(path) if name.startswith("engine.")
                       and name not in ENGINE_CONFIG_READERS.get(rel(path), set()))
    assert not internals, f"{rel(path)} reaches past engine/__init__: {internals}"


def test_engine_config_is_standard_library_only():
    import sys

    roots = {name.split(".")[0] for name in imported_modules(REPO_ROOT / "engine" / "config.py")}
    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots


@pytest.mark.parametrize("path", source_files("dashboard"), ids=rel)
def test_dashboard_uses_only_the_gateway_database_layer(path):
    names = imported_modules(path)
    gateway_imports = {m for m in names if m.split(".")[0] == "gateway"}
    allowed = [m for m in gateway_imports if within(m, "gateway.db") or within(m, DASHBOARD_DOCTOR)
               or m in DASHBOARD_KEY_CHECK]
    assert len(allowed) == len(gateway_imports), gateway_imports
    assert not {m.split(".")[0] for m in names} & WEB_STACK


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


@pytest.mark.parametrize("path", source_files("gateway/doctor"), ids=rel)
def test_doctor_reads_only_the_database_layer(path):
    """What the dashboard may import must not pull the rest of the gateway in behind it."""
    gateway_imports = {m for m in imported_modules(path) if m.split(".")[0] == "gateway"}
    outside = sorted(m for m in gateway_imports if not within(m, "gateway.db") and not within(m, DASHBOARD_DOCTOR))
    assert not outside, f"{rel(path)} imports {outside}"


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


FOLDER_PACKAGES = ("engine", "gateway")


def folder_of(path: Path) -> str:
    """The folder node of a module: its sub-package under the top package (engine/kernels/cpu/native.py ->
    engine.kernels, nested folders included), or, for a module at the top package's root (app wiring,
    shared types: gateway/errors.py, engine/runner.py), the module itself."""
    parts = path.relative_to(REPO_ROOT).parts
    return ".".join(parts[:2]) if len(parts) >= 3 else module_name(path)


def folder_graph() -> dict[str, dict[str, list[str]]]:
    """folder -> {folder it imports: the module imports that make the edge}; imports inside one folder and
    under `if TYPE_CHECKING:` are not edges, imports inside functions are."""
    paths = {module_name(p): p for package in FOLDER_PACKAGES for p in source_files(package)}
    graph: dict[str, dict[str, list[str]]] = {folder_of(p): {} for p in paths.values()}
    for name, path in paths.items():
        for imported in imported_modules(path):
            if imported in paths and folder_of(paths[imported]) != folder_of(path):
                graph[folder_of(path)].setdefault(folder_of(paths[imported]), []).append(f"{name} -> {imported}")
    return graph


def test_no_import_cycle_between_folders():
    """Sub-packages of engine/ and gateway/ (and their root modules) import one another one way only."""
    graph = folder_graph()
    cycle = find_cycle({folder: set(edges) for folder, edges in graph.items()})
    assert cycle is None, "folders import each other in a circle: " + "; ".join(
        f"{a} -> {b} ({', '.join(graph[a][b][:2])})" for a, b in zip(cycle, cycle[1:]))


def test_folder_of_groups_nested_folders_and_keeps_root_modules_apart():
    assert folder_of(REPO_ROOT / "engine" / "kernels" / "cpu" / "native.py") == "engine.kernels"
    assert folder_of(REPO_ROOT / "gateway" / "db" / "models" / "__init__.py") == "gateway.db"
    assert folder_of(REPO_ROOT / "gateway" / "errors.py") == "gateway.errors"
    assert folder_of(REPO_ROOT / "engine" / "__init__.py") == "engine"


def test_find_cycle_reports_a_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("path", [p for package in PACKAGES for p in source_files(package)], ids=rel)
def test_source_states_contracts_not_machines_or_timings(path):
    """Measurements belong in docs/performance.md and commit messages (STYLE.md)."""
    hits = [line.strip() for line in path.read_text().splitlines() if NARRATION.search(line)]
    assert not hits, hits
