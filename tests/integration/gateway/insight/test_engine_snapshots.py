"""EngineSnapshotter stores the engine's cache statistics periodically, and survives failures."""

import json
import time

import pytest
from sqlalchemy import select

from gateway.db import EngineStatSnapshot, make_engine, make_session_factory
from gateway.insight.engine_snapshots import EngineSnapshotter

STATS = {"num_running": 2, "cache": {"cached_tokens": 4096, "pinned_tokens": 256, "evictable_tokens": 1024,
                                      "evicted_nodes": 3, "namespaces": {"t1": {"hit_tokens": 10}}}}


@pytest.fixture
def factory(migrated_url):  # noqa: F811
    engine = make_engine(migrated_url)
    yield make_session_factory(engine)
    engine.dispose()


def snapshots(factory) -> list[EngineStatSnapshot]:
    with factory() as session:
        return list(session.scalars(select(EngineStatSnapshot).order_by(EngineStatSnapshot.id)))


def test_snapshots_are_written_periodically_and_on_stop(factory):
    snapshotter = EngineSnapshotter(factory, lambda: STATS, interval_s=0.05).start()
    deadline = time.monotonic() + 30  # a slow host writes late, never not at all
    while snapshotter.num_written < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    snapshotter.stop()
    rows = snapshots(factory)
    assert len(rows) >= 3 and len(rows) == snapshotter.num_written
    last = rows[-1]
    assert (last.cached_tokens, last.pinned_tokens, last.evictable_tokens, last.num_evictions) == (4096, 256, 1024, 3)
    assert json.loads(last.stats_json)["num_running"] == 2 and last.created_at.tzinfo is not None


def test_a_failing_engine_is_logged_and_skipped(factory, caplog):
    calls = []

    def flaky() -> dict:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("engine busy")
        return STATS

    snapshotter = EngineSnapshotter(factory, flaky, interval_s=60)
    assert snapshotter.take_snapshot() is False
    assert snapshotter.take_snapshot() is True
    assert len(snapshots(factory)) == 1 and "snapshot skipped" in caplog.text
