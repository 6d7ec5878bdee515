"""The request-log writer on SQLite and PostgreSQL: batches arrive, retries never duplicate, a full
queue drops and counts, shutdown flushes, and a database that goes away mid-run never blocks a
request — the rows it queued arrive when the database comes back."""

from __future__ import annotations

import gc
import logging
import time
import uuid
from datetime import datetime, timezone

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import OperationalError

from gateway.db import RequestLog, make_engine, make_session_factory
from gateway.db.log_writer import LogWriter
from gateway.insight.metrics import Metrics
from tests.support.db import PostgresOutage, SqliteOutage


def make_row(index: int, **overrides) -> dict:
    row = {
        "id": uuid.uuid4(),
        "created_at": datetime.now(timezone.utc),
        "tenant_id": 1 + index % 3,
        "template": "agent",
        "prompt_tokens": 100 + index,
        "cached_tokens": index,
        "completion_tokens": 8,
        "ttft_ms": 12.5,
        "latency_ms": 40.0,
        "status": "ok",
        "system_hash": "abc123",
        "sections_found": ["system", "question"],
    }
    row.update(overrides)
    return row


def stored_ids(factory) -> list[uuid.UUID]:
    with factory() as session:
        return list(session.scalars(select(RequestLog.id)))


def wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.02)


@pytest.fixture
def factory(migrated_url):  # noqa: F811
    engine = make_engine(migrated_url)
    yield make_session_factory(engine)
    engine.dispose()


def test_rows_arrive_in_batches_with_their_values(factory):
    writer = LogWriter(factory, max_queue=5000, batch_size=100, flush_interval_s=0.05)
    writer.start()
    rows = [make_row(i) for i in range(1000)]
    assert all(writer.enqueue(row) for row in rows)
    writer.stop(flush=True)
    assert sorted(stored_ids(factory)) == sorted(row["id"] for row in rows)
    assert writer.num_written == 1000 and writer.num_dropped == 0 and writer.queue_depth == 0
    with factory() as session:
        stored = session.get(RequestLog, rows[7]["id"])
    assert (stored.prompt_tokens, stored.cached_tokens, stored.sections_found) == (107, 7, "system,question")
    assert stored.created_at.tzinfo is not None and stored.canonicalized is True


def test_a_row_written_twice_is_stored_once(factory):
    writer = LogWriter(factory, batch_size=10, flush_interval_s=0.05)
    writer.start()
    row = make_row(1)
    writer.enqueue(row)
    wait_for(lambda: writer.num_written == 1)
    writer.enqueue(dict(row))  # the same id again, as a retry after an ambiguous commit would send it
    writer.enqueue(make_row(2))
    writer.stop(flush=True)
    assert len(stored_ids(factory)) == 2


class CommitReplyLost:
    """A session factory whose first `num_lost` commits succeed in the database but then raise, as
    when the connection drops before the server's reply arrives (an ambiguous commit)."""

    def __init__(self, factory, num_lost: int) -> None:
        self.factory = factory
        self.num_lost = num_lost

    def __call__(self):
        session = self.factory()
        if self.num_lost > 0:
            self.num_lost -= 1
            event.listen(session, "after_commit", self.lose_reply)
        return session

    @staticmethod
    def lose_reply(session) -> None:
        raise OperationalError("COMMIT", {}, ConnectionError("connection lost before the commit reply"))


def test_batch_retried_after_an_ambiguous_commit_is_not_written_twice(factory):
    writer = LogWriter(CommitReplyLost(factory, num_lost=2), batch_size=100, flush_interval_s=0.05, max_backoff_s=0.1)
    writer.start()
    rows = [make_row(i) for i in range(50)]
    for row in rows:
        writer.enqueue(row)
    writer.stop(flush=True)
    ids = stored_ids(factory)
    assert writer.num_retries == 2 and writer.num_dropped == 0
    assert len(ids) == 50 and set(ids) == {row["id"] for row in rows}


def test_full_queue_drops_and_counts(factory, caplog):
    metrics = Metrics()
    writer = LogWriter(factory, max_queue=10, batch_size=5, metrics=metrics)  # not started: nothing drains
    with caplog.at_level(logging.WARNING, logger="gateway.db.log_writer"):
        accepted = [writer.enqueue(make_row(i)) for i in range(15)]
    assert accepted == [True] * 10 + [False] * 5
    assert writer.num_dropped == 5 and writer.queue_depth == 10
    assert metrics.registry.get_sample_value("radixgate_log_dropped_rows_total") == 5
    assert "dropped 1 request-log rows" in caplog.text
    writer.start()
    writer.stop(flush=True)
    assert len(stored_ids(factory)) == 10


def test_stop_flushes_what_is_queued(factory):
    writer = LogWriter(factory, batch_size=1000, flush_interval_s=60.0)
    writer.start()
    for i in range(25):
        writer.enqueue(make_row(i))
    writer.stop(flush=True)
    assert len(stored_ids(factory)) == 25


def test_rejected_row_is_dropped_and_the_rest_of_its_batch_written(factory):
    writer = LogWriter(factory, batch_size=50, flush_interval_s=60.0)
    writer.start()
    for i in range(9):
        writer.enqueue(make_row(i))
    writer.enqueue(make_row(99, status=None))  # NOT NULL violation: never succeeds
    writer.stop(flush=True)
    assert len(stored_ids(factory)) == 9 and writer.num_dropped == 1


def test_over_long_strings_are_cut_to_the_column_length(factory):
    writer = LogWriter(factory, flush_interval_s=60.0)
    writer.start()
    row = make_row(1, dynamic_patterns="x" * 2000, error_code="e" * 100)
    writer.enqueue(row)
    writer.stop(flush=True)
    with factory() as session:
        stored = session.get(RequestLog, row["id"])
    assert (len(stored.dynamic_patterns), len(stored.error_code)) == (512, 64)


def test_unusable_row_is_refused_without_raising(factory):
    writer = LogWriter(factory)
    assert writer.enqueue({"created_at": "yesterday"}) is False
    assert writer.enqueue({"id": "not-a-uuid"}) is False
    assert writer.num_dropped == 2


@pytest.fixture
def outage(migrated_url):  # noqa: F811
    backend = SqliteOutage(migrated_url) if migrated_url.startswith("sqlite") else PostgresOutage(migrated_url)
    yield backend
    backend.close()


def test_database_outage_mid_run_keeps_requests_fast_and_loses_nothing(outage):
    engine = make_engine(outage.url, connect_args=outage.connect_args)
    factory = make_session_factory(engine)
    writer = LogWriter(factory, max_queue=10_000, batch_size=50, flush_interval_s=0.05, max_backoff_s=0.2)
    writer.start()
    rows = [make_row(i) for i in range(600)]
    for row in rows[:200]:
        writer.enqueue(row)
    wait_for(lambda: writer.num_written == 200)

    outage.go_away()
    durations = []
    gc.disable()  # a full collection of the test process's heap can stall any one call for ~1 s
    try:
        for row in rows[200:]:
            start = time.perf_counter()
            assert writer.enqueue(row) is True
            durations.append(time.perf_counter() - start)
    finally:
        gc.enable()
    wait_for(lambda: writer.num_retries >= 2)
    assert writer.num_written < 600 and writer.queue_depth > 0

    outage.come_back()
    wait_for(lambda: writer.num_written == 600)
    writer.stop(flush=True)
    ids = stored_ids(factory)
    engine.dispose()
    # An enqueue that waited on the database would take at least its busy timeout / connect timeout
    # (0.1 s / 2 s) every time; allow the OS scheduler four stalls out of 400 calls.
    assert sorted(durations)[-5] < 0.05, sorted(durations)[-5:]
    assert len(ids) == len(set(ids)) == 600
    assert set(ids) == {row["id"] for row in rows}
    assert writer.num_dropped == 0
