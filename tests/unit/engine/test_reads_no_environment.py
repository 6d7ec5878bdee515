"""The engine reads no environment (STYLE.md): everything arrives through EngineConfig, so no module
under engine/ names os.environ, os.getenv, os.putenv or imports them."""

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

ENVIRONMENT = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(tree: ast.AST) -> list[int]:
    """Line numbers of `os.<environment name>` attributes and of `from os import <environment name>`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT and isinstance(node.value, ast.Name) \
                and node.value.id == "os":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os" \
                and any(alias.name in ENVIRONMENT for alias in node.names):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "engine").rglob("*.py")), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_engine_module_reads_no_environment(path: Path):
    assert not environment_reads(ast.parse(path.read_text(), filename=str(path))), path


def test_the_scan_finds_every_spelling():
    source = "import os\nfrom os import getenv\na = os.environ.get('X')\nb = os.getenv('Y')\nc = os.path.join('z')\n"
    assert sorted(environment_reads(ast.parse(source))) == [2, 3, 4]
