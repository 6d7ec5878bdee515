"""LogSpool: request-log rows in local append-only files until the database has them.

Every row the LogWriter accepts is appended (one JSON line) to the spool's current
segment *before* it is queued in memory, so a row survives a crash of the process
(kill -9) once `append` has returned; with `fsync` it also survives the machine losing
power. Segments are `NNNNNNNN.jsonl` files in one directory:

    spool/00000007.jsonl   sealed: rows up to sequence S7, some maybe not committed yet
    spool/00000008.jsonl   current: appends go here

Contract:
- `append(row, seq)` writes the row and returns True, or returns False (writing nothing) when
  the spool already holds `max_bytes`; the caller then keeps the row in memory only.
- `seal()` closes the current segment (if it has rows) and returns it with the highest
  sequence number in it; a segment may be deleted once every row up to that sequence is
  committed (`discard`), or must be replayed (`read_segment`) if any of its rows never reached
  the in-memory queue (it was full) or the process restarted.
- `read_segment` yields each row id's LAST version (a row may be spooled twice: provisional,
  then complete), so a replay writes the most complete row.
- Replaying is idempotent because inserts skip existing ids (log_insert.insert_ignoring_duplicates),
  so a crash between a commit and the discard of its segment writes nothing twice.
Not thread-safe: the LogWriter serializes `append`/`seal` under its lock.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime
from pathlib import Path

from gateway.db.log_row import to_uuid

log = logging.getLogger(__name__)
SUFFIX = ".jsonl"


def encode_row(row: dict) -> bytes:
    values = {key: (str(value) if key == "id" else value.isoformat() if isinstance(value, datetime) else value)
              for key, value in row.items()}
    return (json.dumps(values, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


def decode_row(line: bytes) -> dict:
    row = json.loads(line)
    row["id"] = to_uuid(row["id"])
    if isinstance(row.get("created_at"), str):
        row["created_at"] = datetime.fromisoformat(row["created_at"])
    return row


class LogSpool:
    def __init__(self, directory: str | Path, max_bytes: int, fsync: bool = False) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.fsync = fsync
        existing = self.segments()
        self.num_bytes = sum(path.stat().st_size for path in existing)
        self._next_number = int(existing[-1].stem) + 1 if existing else 1
        self._file = None
        self._path: Path | None = None
        self._max_seq = -1

    def segments(self) -> list[Path]:
        """Every segment on disk, oldest first (the current one included)."""
        return sorted(p for p in self.directory.glob(f"*{SUFFIX}") if p.stem.isdigit())

    def append(self, row: dict, seq: int) -> bool:
        data = encode_row(row)
        if self.num_bytes + len(data) > self.max_bytes:
            return False
        if self._file is None:
            self._path = self.directory / f"{self._next_number:08d}{SUFFIX}"
            self._next_number += 1
            self._file = open(self._path, "ab", buffering=0)  # unbuffered: each row reaches the OS at once
        self._file.write(data)
        if self.fsync:
            os.fsync(self._file.fileno())
        self.num_bytes += len(data)
        self._max_seq = max(self._max_seq, seq)
        return True

    def seal(self) -> tuple[Path, int] | None:
        """Close the current segment; (its path, the highest sequence in it), or None if it has no rows."""
        if self._file is None:
            return None
        self._file.close()
        sealed = (self._path, self._max_seq)
        self._file, self._path, self._max_seq = None, None, -1
        return sealed

    def discard(self, path: Path) -> None:
        try:
            size = path.stat().st_size
            path.unlink()
            self.num_bytes = max(0, self.num_bytes - size)
        except FileNotFoundError:
            pass

    @staticmethod
    def read_segment(path: Path) -> list[dict]:
        """The segment's rows, one per id (its last version); a torn last line (crash mid-write) is skipped."""
        rows: dict = {}
        with open(path, "rb") as file:
            for number, line in enumerate(file, 1):
                try:
                    row = decode_row(line)
                except (ValueError, KeyError):
                    log.warning("log spool %s line %d unreadable (torn write?); skipped", path.name, number)
                    continue
                rows.pop(row["id"], None)
                rows[row["id"]] = row
        return list(rows.values())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
