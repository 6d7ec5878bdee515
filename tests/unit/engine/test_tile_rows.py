"""Attention tiles are sized by the L2 cache, read from sysfs."""

import pytest

from engine.kernels.cpu import cpu_info as cpu_cache
from engine.attention import tile_rows


@pytest.mark.parametrize(("l2_bytes", "expected"), [(None, 384), (1 << 20, 384), (2 << 20, 768), (512 << 10, 256),
                                                    (1280 << 10, 448), (64 << 20, 1536)])
def test_tiles_hold_384_query_rows_per_mib_of_l2(l2_bytes, expected):
    assert tile_rows(l2_bytes) == expected


def test_the_l2_size_is_read_from_the_level_2_cache_entry(tmp_path, monkeypatch):
    for name, level, size in (("index0", "1", "48K"), ("index2", "2", "2048K"), ("index3", "3", "480M")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "level").write_text(level + "\n")
        (tmp_path / name / "size").write_text(size + "\n")
    monkeypatch.setattr(cpu_cache, "CACHE_DIR", tmp_path)
    cpu_cache.l2_cache_bytes.cache_clear()
    try:
        assert cpu_cache.l2_cache_bytes() == 2 << 20
    finally:
        cpu_cache.l2_cache_bytes.cache_clear()


def test_no_sysfs_means_no_size(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_cache, "CACHE_DIR", tmp_path / "missing")
    cpu_cache.l2_cache_bytes.cache_clear()
    try:
        assert cpu_cache.l2_cache_bytes() is None
    finally:
        cpu_cache.l2_cache_bytes.cache_clear()
