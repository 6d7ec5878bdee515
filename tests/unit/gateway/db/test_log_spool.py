"""LogSpool: rows round-trip through segment files; a replay keeps each id's last version; size is bounded."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from gateway.db.log_spool import LogSpool


def row(row_id: uuid.UUID, **fields) -> dict:
    return {"id": row_id, "created_at": datetime(2026, 12, 2, tzinfo=timezone.utc), "status": "ok", **fields}


def test_rows_round_trip_and_a_replay_keeps_the_last_version_of_each_id(tmp_path):
    spool = LogSpool(tmp_path, max_bytes=10_000)
    first, second = uuid.uuid4(), uuid.uuid4()
    assert spool.append(row(first, canonical_cached_tokens=None), -1)
    assert spool.append(row(second, prompt_tokens=5), 0)
    assert spool.append(row(first, canonical_cached_tokens=32), 1)
    path, max_seq = spool.seal()
    assert max_seq == 1
    rows = LogSpool.read_segment(path)
    assert [(r["id"], r.get("canonical_cached_tokens")) for r in rows] == [(second, None), (first, 32)]
    assert rows[0]["created_at"] == datetime(2026, 12, 2, tzinfo=timezone.utc)


def test_append_refuses_past_max_bytes_and_discard_frees_the_room(tmp_path):
    spool = LogSpool(tmp_path, max_bytes=300)
    num_accepted = sum(spool.append(row(uuid.uuid4()), seq) for seq in range(10))
    assert 0 < num_accepted < 10
    path, _ = spool.seal()
    spool.discard(path)
    assert spool.num_bytes == 0 and spool.append(row(uuid.uuid4()), 11)


def test_a_torn_last_line_is_skipped_and_segments_survive_a_new_spool(tmp_path):
    spool = LogSpool(tmp_path, max_bytes=10_000)
    kept = uuid.uuid4()
    spool.append(row(kept), 0)
    path, _ = spool.seal()
    with open(path, "ab") as file:
        file.write(b'{"id": "half')
    reopened = LogSpool(tmp_path, max_bytes=10_000)
    assert reopened.segments() == [path]
    assert [r["id"] for r in LogSpool.read_segment(path)] == [kept]
    reopened.append(row(uuid.uuid4()), 0)
    assert reopened.seal()[0] != path  # a new segment, never the old one reopened
