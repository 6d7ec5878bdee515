"""SideWriter: best-effort writes (last_used_at, template samples) leave the request path, on a real migrated
SQLite database whose file another connection holds locked."""

from __future__ import annotations

import threading
import time
from functools import partial

from sqlalchemy import event, text

from gateway.db.migrate import upgrade
from gateway.db.models import ApiKey
from gateway.db.session import make_engine, make_session_factory, session_scope
from gateway.db.side_writer import SideWriter
from gateway.prompt_templates import samples
from gateway.tenants import service as tenants
from tests.support.db import SqliteOutage


def migrated(tmp_path):
    url = f"sqlite:///{tmp_path / 'side.db'}"
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        tenant = tenants.create_tenant(session, "acme")
        ids = tenant.api_key.tenant_id, tenant.api_key.id
    return url, engine, factory, ids


def test_writes_during_a_lock_return_at_once_and_land_once_it_is_free(tmp_path):
    url, engine, factory, (tenant_id, key_id) = migrated(tmp_path)
    updates = []
    event.listen(engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *args: updates.append(statement) if statement.startswith("UPDATE") else None)
    writer = SideWriter(factory)
    outage = SqliteOutage(url)
    outage.go_away()  # this thread holds the write lock: a synchronous write would wait it out and fail
    try:
        started = time.perf_counter()
        for i in range(5):
            writer.submit(partial(tenants.touch_key, key_id=key_id), key=("last_used_at", key_id))
            writer.submit(partial(samples.record_sample, tenant_id=tenant_id, template="agent", body={"n": i}, limit=10))
        submitting = time.perf_counter() - started
    finally:
        outage.come_back()
    assert submitting < 0.5, submitting  # one write waits the busy timeout out on the writer's thread, not here
    writer.flush()
    with session_scope(factory) as session:
        assert session.get(ApiKey, key_id).last_used_at is not None
        kept = [s.body["n"] for s in samples.list_samples(session, tenant_id, "agent", 10)]
    assert 1 <= len(updates) <= 2, updates  # five touches of one waiting key coalesce
    # the first sample may have met the lock (logged, dropped); every later one landed, in order
    assert kept in ([0, 1, 2, 3, 4], [1, 2, 3, 4]), kept
    writer.close()
    assert writer.submit(partial(tenants.touch_key, key_id=key_id)) is False  # after close: dropped, not raised
    writer.flush()  # returns at once
    engine.dispose()


def test_a_full_backlog_drops_and_counts_and_a_failing_job_does_not_stop_the_thread(tmp_path):
    _, engine, factory, _ = migrated(tmp_path)
    running, gate = threading.Event(), threading.Event()
    ran = []
    writer = SideWriter(factory, max_pending=2)
    assert writer.submit(lambda session: (running.set(), gate.wait()))
    running.wait()  # a running job no longer waits
    assert writer.submit(lambda session: 1 / 0)  # logged with its traceback; the thread goes on
    assert writer.submit(lambda session: ran.append("a"), key="k")
    assert not writer.submit(lambda session: ran.append("b"), key="k")  # its key waits: the same write is queued
    assert not writer.submit(lambda session: ran.append("c"))  # two wait: the backlog is full
    assert writer.dropped == 1
    gate.set()
    writer.flush()
    assert ran == ["a"]
    assert writer.submit(lambda session: ran.append("d"), key="k")  # the key's job ran: it queues again
    writer.close()
    assert ran == ["a", "d"]
    engine.dispose()


def test_a_failed_write_rolls_its_session_back_and_the_next_one_lands(tmp_path, caplog):
    _, engine, factory, (tenant_id, key_id) = migrated(tmp_path)
    writer = SideWriter(factory)

    def half_then_fail(session):
        samples.record_sample(session, tenant_id, "agent", {"n": "half"}, 10)
        session.execute(text("SELECT * FROM no_such_table"))

    writer.submit(half_then_fail)
    writer.submit(partial(samples.record_sample, tenant_id=tenant_id, template="agent", body={"n": "next"}, limit=10))
    writer.close()
    with session_scope(factory) as session:
        assert [s.body["n"] for s in samples.list_samples(session, tenant_id, "agent", 10)] == ["next"]
    assert "side write half_then_fail failed: OperationalError" in caplog.text
    engine.dispose()
