"""`radixgate doctor` on a seeded SQLite file: the rich report and the JSON name the known top cause."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gateway.cli import app
from tests.support.dashboard_seed import create_seeded_db


@pytest.fixture(scope="module")
def seeded_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('doctor') / 'seeded.db'}"
    create_seeded_db(url)
    return url


def test_doctor_report_puts_the_top_cause_first(seeded_url):
    result = CliRunner().invoke(app, ["doctor", "--tenant", "globex", "--db", seeded_url])
    assert result.exit_code == 0, result.output
    assert "Fix first: Dynamic content in the prefix" in result.output
    assert "date_iso" in result.output and "prefill speedup" in result.output


def test_doctor_json_ranks_causes_with_shares(seeded_url):
    result = CliRunner().invoke(app, ["doctor", "--tenant", "umbrella", "--db", seeded_url, "--json"])
    assert result.exit_code == 0, result.output
    diagnosis = json.loads(result.output)
    assert [c["code"] for c in diagnosis["causes"]] == ["isolation", "cold_start"]
    # uncached: 1000 + 2 x 200 + 3 x 100; a cache group would have served the first 800-token system prefix
    assert diagnosis["speedup"]["speedup"] == pytest.approx(1700 / 900) == diagnosis["causes"][0]["speedup"]
    assert diagnosis["canonical_hit_rate"] == diagnosis["attainable_hit_rate"] == pytest.approx(4300 / 6000)
    assert "TTFT" in diagnosis["speedup"]["ttft_model"]


def test_doctor_rejects_unknown_tenants_and_missing_files(seeded_url, tmp_path):
    unknown = CliRunner().invoke(app, ["doctor", "--tenant", "nobody", "--db", seeded_url])
    assert unknown.exit_code == 2 and "no tenant named 'nobody'" in unknown.output
    missing = tmp_path / "missing.db"
    result = CliRunner().invoke(app, ["doctor", "--tenant", "acme", "--db", f"sqlite:///{missing}"])
    assert result.exit_code == 2 and not missing.exists()


def test_doctor_process_imports_neither_the_model_stack_nor_the_settings(seeded_url):
    """The command a user runs: a fresh interpreter importing only the database layer and typer."""
    code = (
        "import sys\nfrom gateway.cli import app\n"
        f"sys.argv = ['radixgate', 'doctor', '--tenant', 'globex', '--db', {seeded_url!r}, '--json']\n"
        "try:\n    app()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "heavy = ('torch', 'transformers', 'litellm', 'streamlit', 'pandas', 'numpy', 'engine', 'gateway.settings')\n"
        "print('IMPORTED', [name for name in heavy if name in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '"tenant_name": "globex"' in result.stdout
    assert "IMPORTED []" in result.stdout
