"""No source module over MAX_LINES (STYLE.md, Sizes): past that, split it by noun.

Covers every .py file under the product's packages and migrations/, generated Alembic versions
included (ours are written by hand and stay small); tests/ is not covered.
"""

from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

MAX_LINES = 300
FOLDERS = ("engine", "gateway", "dashboard", "bench", "migrations")


def source_files() -> list[Path]:
    return sorted(p for folder in FOLDERS if (REPO_ROOT / folder).is_dir() for p in (REPO_ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_module_stays_within_the_size_limit(path: Path):
    num_lines = len(path.read_text().splitlines())
    assert num_lines <= MAX_LINES, f"{path.relative_to(REPO_ROOT)} has {num_lines} lines (limit {MAX_LINES})"
