"""The request-log spool on a real database: rows past a full memory queue during an outage are
spooled and replayed exactly once when the database returns; a writer that dies without flushing
(a crash) leaves its rows in the spool, and the next writer replays them with no duplicates."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from gateway.db import RequestLog, make_engine, make_session_factory
from gateway.db.log_spool import LogSpool
from gateway.db.log_writer import LogWriter
from tests.integration.gateway.db.test_log_writer import make_row, stored_ids, wait_for
from tests.support.db import make_outage


@pytest.fixture
def outage(migrated_url):  # noqa: F811
    backend = make_outage(migrated_url)
    yield backend
    backend.close()


def count_rows(factory) -> tuple[int, int]:
    with factory() as session:
        return tuple(session.execute(select(func.count(RequestLog.id), func.count(func.distinct(RequestLog.id)))).one())


def test_rows_past_a_full_queue_during_an_outage_are_spooled_and_replayed_once(outage, tmp_path):
    engine = make_engine(outage.url, connect_args=outage.connect_args)
    factory = make_session_factory(engine)
    spool = LogSpool(tmp_path / "spool", max_bytes=1 << 20)
    writer = LogWriter(factory, max_queue=5, batch_size=5, flush_interval_s=0.02, max_backoff_s=0.1, spool=spool)
    writer.start()
    try:
        outage.go_away()
        rows = [make_row(i) for i in range(40)]
        assert all(writer.enqueue(row) for row in rows)  # nothing dropped: the spool holds what memory cannot
        assert writer.num_dropped == 0 and writer.num_spooled_only > 0
        outage.come_back()
        wait_for(lambda: count_rows(factory)[0] >= len(rows) and not spool.segments())
        assert count_rows(factory) == (len(rows), len(rows))
        assert set(stored_ids(factory)) == {row["id"] for row in rows}
    finally:
        writer.stop()
        engine.dispose()


def test_a_crashed_writers_rows_are_replayed_by_the_next_one_without_duplicates(migrated_url, tmp_path):
    engine = make_engine(migrated_url)
    factory = make_session_factory(engine)
    try:
        first = LogWriter(factory, flush_interval_s=0.05, spool=LogSpool(tmp_path / "spool", 1 << 20))
        first.start()
        committed = [make_row(i) for i in range(5)]
        for row in committed:
            first.enqueue(row)
        wait_for(lambda: count_rows(factory)[0] == 5)
        first.stop(flush=False, timeout_s=0.1)  # the writer is gone; the spool may still hold committed rows
        crashed = LogWriter(factory, flush_interval_s=60.0, spool=LogSpool(tmp_path / "spool", 1 << 20))
        pending = [make_row(10 + i) for i in range(7)]
        for row in pending:  # accepted, never written: the thread is not even started (a crash)
            crashed.enqueue(row)
        provisional_id = uuid.uuid4()
        crashed.reserve(make_row(99, id=provisional_id, canonical_cached_tokens=None))
        crashed.enqueue(make_row(99, id=provisional_id, canonical_cached_tokens=48))
        assert count_rows(factory)[0] == 5
        successor = LogWriter(factory, flush_interval_s=0.05, spool=LogSpool(tmp_path / "spool", 1 << 20))
        successor.start()
        wait_for(lambda: count_rows(factory)[0] >= 13 and not LogSpool(tmp_path / "spool", 1 << 20).segments())
        successor.stop()
        assert count_rows(factory) == (13, 13)
        with factory() as session:
            assert session.scalar(select(RequestLog.canonical_cached_tokens).where(RequestLog.id == provisional_id)) == 48
    finally:
        engine.dispose()
