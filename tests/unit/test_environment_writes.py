"""Library code never changes the process environment; only a process owner may (gateway/cli/serve.py,
which sets litellm's import-time flag before anything imports litellm)."""

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

PACKAGES = ("engine", "gateway", "dashboard")
PROCESS_OWNERS = {"gateway/cli/serve.py"}
WRITERS = {"putenv", "unsetenv"}
ENVIRON_WRITES = {"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) \
        and node.value.id == "os"


def environment_writes(tree: ast.AST) -> list[int]:
    """Lines that assign or delete os.environ[...], call a mutating os.environ method, or os.putenv/unsetenv."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            lines += [node.lineno for t in targets if isinstance(t, ast.Subscript) and is_environ(t.value)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if is_environ(func.value) and func.attr in ENVIRON_WRITES:
                lines.append(node.lineno)
            elif func.attr in WRITERS and isinstance(func.value, ast.Name) and func.value.id == "os":
                lines.append(node.lineno)
    return lines


def library_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO_ROOT / package).rglob("*.py")
                  if str(p.relative_to(REPO_ROOT)) not in PROCESS_OWNERS)


@pytest.mark.parametrize("path", library_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_library_module_leaves_the_environment_alone(path: Path):
    assert not environment_writes(ast.parse(path.read_text(), filename=str(path))), path


def test_the_scan_finds_each_kind_of_write():
    source = ("import os\nos.environ['A'] = '1'\nos.environ.setdefault('B', '1')\ndel os.environ['C']\n"
              "os.putenv('D', '1')\nenv = {**os.environ, 'E': '1'}\nx = os.environ.get('F')\n")
    assert sorted(environment_writes(ast.parse(source))) == [2, 3, 4, 5]
