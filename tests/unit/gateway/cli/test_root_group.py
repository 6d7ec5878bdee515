"""`radixgate bench` is found by name only when asked for (gateway/cli/root_group.py): the serve path imports
no bench code and no matplotlib; `radixgate bench --help` lists every bench; without the extra, an install hint."""

import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gateway.cli import app, root_group
from tests.support.paths import REPO_ROOT

BENCHES = ("radix", "agent", "rag", "policy", "fairness", "decode", "stats", "structured", "hostile", "load",
           "accuracy", "cluster", "tier")

SERVE_PATH_IMPORTS_NO_BENCH = """
import sys
import gateway.cli, gateway.cli.serve, gateway.main
from gateway.cli import app
from gateway.settings import Settings
gateway.main.create_app(Settings())
try:
    app(["serve", "--help"])
except SystemExit as exit:
    assert exit.code == 0, exit.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("bench", "matplotlib"))
assert not loaded, loaded
"""


def test_the_serve_path_imports_nothing_from_bench_nor_matplotlib(tmp_path):
    """A fresh interpreter: the CLI, the app factory, a built app and `serve --help` leave bench/ unimported."""
    env = {"RADIXGATE_DB_URL": f"sqlite:///{tmp_path / 'radixgate.db'}"}
    subprocess.run([sys.executable, "-c", SERVE_PATH_IMPORTS_NO_BENCH], cwd=REPO_ROOT, check=True, timeout=120,
                   env={**os.environ, **env}, stdout=subprocess.DEVNULL)


def listed_commands(help_text: str) -> list[str]:
    """The names in the Commands panel of typer's rich help, in order (continuation lines start with spaces)."""
    panel = help_text.split("Commands")[-1]
    return [match[1] for match in re.finditer(r"^│ ([a-z][a-z-]*)  ", panel, re.MULTILINE)]


def test_bench_help_lists_every_bench():
    result = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert set(BENCHES) <= set(listed_commands(result.output)), result.output


def test_top_level_help_lists_bench_after_the_plain_commands():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    commands = listed_commands(result.output)
    assert commands[:5] == ["serve", "dashboard", "doctor", "warmup", "bench"], commands


@pytest.mark.parametrize("args", [["bench"], ["bench", "--help"], ["bench", "agent", "--requests", "3"]])
def test_without_the_bench_extra_bench_prints_the_install_hint(monkeypatch, args):
    def absent(name):
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")

    monkeypatch.setattr(root_group.importlib, "import_module", absent)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "pip install 'radixgate[bench]'" in result.output
    assert "matplotlib" in result.output
