"""KeyToucher: last_used_at is written off the request path, on a real (migrated) SQLite database."""

from __future__ import annotations

from sqlalchemy import event

from gateway.db.migrate import upgrade
from gateway.db.models import ApiKey
from gateway.db.session import make_engine, make_session_factory, session_scope
from gateway.tenants import service as tenants
from gateway.tenants.key_touch import KeyToucher
from tests.support.db import SqliteOutage


def test_a_touch_while_the_database_is_locked_returns_and_lands_once_it_is_free(tmp_path):
    path = tmp_path / "touch.db"
    upgrade(f"sqlite:///{path}")
    engine = make_engine(f"sqlite:///{path}")
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        key_id = tenants.create_tenant(session, "acme").api_key.id
    updates = []
    event.listen(engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *args: updates.append(statement) if statement.startswith("UPDATE") else None)
    toucher = KeyToucher(factory)
    outage = SqliteOutage(f"sqlite:///{path}")
    outage.go_away()  # this thread holds the write lock: a synchronous touch would wait it out and fail
    try:
        for _ in range(5):
            toucher.touch(key_id)
    finally:
        outage.come_back()
    toucher.close()
    with session_scope(factory) as session:
        assert session.get(ApiKey, key_id).last_used_at is not None
    assert 1 <= len(updates) <= 2, updates  # five touches of one waiting key coalesce
    toucher.touch(key_id)  # after close: dropped, not raised
    engine.dispose()
