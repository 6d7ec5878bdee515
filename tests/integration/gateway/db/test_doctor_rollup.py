"""The doctor's hourly roll-up on SQLite and PostgreSQL: rows seeded the way `radixgate bench stats`
seeds them (its bulk paths: executemany on SQLite, COPY on PostgreSQL), then loss_groups over many
windows, aligned or not, equals the same sums taken from the rows alone."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone


from bench.stats.run import seed
from gateway.db import doctor_queries, make_engine, make_session_factory

END = datetime(2026, 6, 1, 12, 30, tzinfo=timezone.utc)


def by_causes(groups) -> dict:
    return {(g.order_cause, g.cold_cause): g for g in groups}


def test_loss_groups_from_the_rollup_equal_the_rows_for_any_window(db_url):
    seed(db_url, num_rows=4000, num_tenants=3, days=2, end=END, seed_value=5)
    engine = make_engine(db_url)
    rng = random.Random(1)
    windows = [(None, None), (END - timedelta(hours=30), END - timedelta(hours=2)),
               (END - timedelta(minutes=50), None), (None, END - timedelta(hours=20, minutes=17))]
    for _ in range(6):
        start = END - timedelta(minutes=rng.randint(1, 48 * 60), seconds=rng.random())
        windows.append((start, start + timedelta(minutes=rng.randint(1, 30 * 60))))
    with make_session_factory(engine)() as session:
        for since, until in windows:
            for tenant_id in (1, 3):
                got = by_causes(doctor_queries.loss_groups(session, tenant_id, since, until))
                want = by_causes(doctor_queries.raw_loss_groups(session, tenant_id, since, until))
                assert got == want, (since, until, tenant_id)
                assert got or since is not None  # the unbounded window holds every tenant's rows
    engine.dispose()


def test_a_row_with_unknown_cached_tokens_is_logged_and_adds_nothing_it_lacks(migrated_url):
    """A remote that reports no cached tokens logs NULL: the trigger must take the row (it runs in the
    insert's transaction: a failure there would lose the row) and sum it as the rows do."""
    import uuid

    from gateway.db.log_insert import insert_ignoring_duplicates

    engine = make_engine(migrated_url)
    row = {"id": uuid.uuid4(), "created_at": END, "tenant_id": 1, "prompt_tokens": 100, "cached_tokens": None,
           "completion_tokens": 3, "status": "ok", "canonicalized": False, "was_canonical": False,
           "dynamic_hoisted": False}
    with make_session_factory(engine).begin() as session:
        session.execute(insert_ignoring_duplicates(engine.dialect.name), [row])
    with make_session_factory(engine)() as session:
        got = by_causes(doctor_queries.loss_groups(session, 1, None, None))
        assert got == by_causes(doctor_queries.raw_loss_groups(session, 1, None, None))
        assert sum(g.requests for g in got.values()) == 1
    engine.dispose()
