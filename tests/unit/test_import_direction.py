"""Imports run one way: gateway -> engine, dashboard -> gateway.db (STYLE.md)."""

import ast
from pathlib import Path

import pytest
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
ENGINE_FORBIDDEN = {"gateway", "dashboard", "fastapi", "sqlalchemy", "litellm", "starlette", "streamlit", "pydantic"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def module_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "engine").rglob("*.py")), ids=str)
def test_engine_imports_nothing_from_gateway_dashboard_or_web_stack(path):
    assert not imported_roots(path) & ENGINE_FORBIDDEN


@pytest.mark.parametrize("path", sorted((ROOT / "dashboard").rglob("*.py")), ids=str)
def test_dashboard_uses_only_the_gateway_database_layer(path):
    gateway_imports = {m for m in module_imports(path) if m.split(".")[0] == "gateway"}
    assert all(m == "gateway.db" or m.startswith("gateway.db.") for m in gateway_imports), gateway_imports
