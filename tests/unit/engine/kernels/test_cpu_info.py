"""CPU facts: the L2 size is read from sysfs, at first use, once; importing the engine reads and times nothing."""

import subprocess
import sys

from tests.support.paths import REPO_ROOT

from engine.kernels.cpu import cpu_info

NOTHING_CACHED_AFTER_IMPORT = """
import engine
from engine.kernels.cpu import cpu_info, dtype_probe, row_range
cached = [f.__name__ for f in (cpu_info.l2_cache_bytes, dtype_probe.measured_cpu_dtype, row_range.invariant_row_range)
          if f.cache_info().currsize]
assert not cached, cached
"""


def test_the_l2_size_is_read_from_the_level_2_cache_entry(tmp_path, monkeypatch):
    for name, level, size in (("index0", "1", "48K"), ("index2", "2", "2048K"), ("index3", "3", "480M")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "level").write_text(level + "\n")
        (tmp_path / name / "size").write_text(size + "\n")
    monkeypatch.setattr(cpu_info, "CACHE_DIR", tmp_path)
    cpu_info.l2_cache_bytes.cache_clear()
    try:
        assert cpu_info.l2_cache_bytes() == 2 << 20
    finally:
        cpu_info.l2_cache_bytes.cache_clear()


def test_no_sysfs_means_no_size(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_info, "CACHE_DIR", tmp_path / "missing")
    cpu_info.l2_cache_bytes.cache_clear()
    try:
        assert cpu_info.l2_cache_bytes() is None
    finally:
        cpu_info.l2_cache_bytes.cache_clear()


def test_importing_the_engine_reads_no_sysfs_and_runs_no_probe():
    """A fresh interpreter: after ``import engine`` no CPU fact or probe verdict has been computed yet."""
    subprocess.run([sys.executable, "-c", NOTHING_CACHED_AFTER_IMPORT], cwd=REPO_ROOT, check=True, timeout=120)
