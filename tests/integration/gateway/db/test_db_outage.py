"""The database goes away mid-run (PostgreSQL refusing connections, or the SQLite file locked by
another connection): chat requests keep succeeding — authentication falls back to the cached
caller, last_used_at is best effort, log rows queue in the LogWriter — and once the database is
back every request's log row arrives exactly once."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from gateway.db.models import ApiKey, RequestLog
from gateway.main import create_app
from gateway.settings import Settings
from tests.support.app import ADMIN_KEY, chat_body, create_tenant
from tests.support.db import make_outage

pytestmark = pytest.mark.slow

NUM_OUTAGE_REQUESTS = 3


@pytest.fixture
def outage(migrated_url):  # noqa: F811
    backend = make_outage(migrated_url)
    yield backend
    backend.close()


def count_rows(gw, tenant_id: int) -> tuple[int, int]:
    """(rows, distinct request ids) logged for the tenant."""
    with gw.session_factory() as session:
        query = select(func.count(RequestLog.id), func.count(func.distinct(RequestLog.id)))
        return tuple(session.execute(query.where(RequestLog.tenant_id == tenant_id)).one())


def wait_for_rows(gw, tenant_id: int, num_rows: int, timeout_s: float = 30.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            counts = count_rows(gw, tenant_id)
        except Exception:  # the database may still be reconnecting
            counts = (0, 0)
        if counts[0] >= num_rows or time.monotonic() > deadline:
            return counts
        time.sleep(0.2)


def test_requests_survive_a_database_outage_and_their_rows_arrive_once(outage, engine):
    settings = Settings(
        db_url=outage.url, admin_key=ADMIN_KEY, rewarm_pins=False, auth_cache_ttl_s=0.0, log_flush_interval_s=0.05
    )
    with TestClient(create_app(settings, engine=engine)) as client:
        gw = client.app.state.gw
        tenant = create_tenant(client, "outage")
        warm = client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"])
        assert warm.status_code == 200, warm.text
        assert wait_for_rows(gw, tenant["id"], 1) == (1, 1)

        outage.go_away()
        try:
            for index in range(NUM_OUTAGE_REQUESTS):
                body = chat_body(f"Name a colour, number {index}.")
                response = client.post("/v1/chat/completions", json=body, headers=tenant["headers"])
                assert response.status_code == 200, response.text
                assert response.json()["usage"]["completion_tokens"] > 0
            assert gw.log_writer.queue_depth + gw.log_writer.num_written >= 1 + NUM_OUTAGE_REQUESTS
        finally:
            outage.come_back()

        expected = 1 + NUM_OUTAGE_REQUESTS
        assert wait_for_rows(gw, tenant["id"], expected) == (expected, expected)
        assert gw.log_writer.num_dropped == 0
        time.sleep(0.5)  # a late retry would show up as an extra row
        assert count_rows(gw, tenant["id"]) == (expected, expected)


def test_a_revoked_key_is_not_served_from_the_cache_during_an_outage(outage, engine):
    settings = Settings(db_url=outage.url, admin_key=ADMIN_KEY, rewarm_pins=False, auth_cache_ttl_s=60.0)
    with TestClient(create_app(settings, engine=engine)) as client:
        tenant = create_tenant(client, "revoked")
        assert client.get("/v1/models", headers=tenant["headers"]).status_code == 200
        assert client.app.state.gw.auth_cache.num_entries == 1
        with client.app.state.gw.session_factory() as session:
            key_id = session.scalar(select(ApiKey.id).where(ApiKey.tenant_id == tenant["id"]))
        revoked = client.delete(f"/admin/keys/{key_id}", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        assert revoked.status_code == 200, revoked.text
        assert client.app.state.gw.auth_cache.num_entries == 0
        outage.go_away()
        try:
            response = client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"])
        finally:
            outage.come_back()
        assert response.status_code in (401, 503), response.text


TEMPLATE = """{% block system %}{{ turn_start("system") }}{{ system }}{{ turn_end("system") }}{% endblock %}
{% block question %}{{ turn_start("user") }}{{ question }}{{ turn_end("user") }}{% endblock %}
{% block generation %}{{ generation_prompt }}{% endblock %}"""
BUSY_TIMEOUT_S = 5.0  # sqlite3's default: a write on the request path would wait this long for the lock


def test_a_request_naming_its_template_does_not_wait_on_a_locked_file_and_its_sample_lands(tmp_path, engine):
    from gateway.db import migrate
    from tests.support.db import SqliteOutage

    url = f"sqlite:///{tmp_path / 'locked.db'}"
    migrate.upgrade(url)
    outage = SqliteOutage(url)
    settings = Settings(db_url=url, admin_key=ADMIN_KEY, rewarm_pins=False, log_flush_interval_s=0.05)
    with TestClient(create_app(settings, engine=engine)) as client:
        tenant = create_tenant(client, "sampled")
        put = client.put("/v1/templates/support", json={"source": TEMPLATE}, headers=tenant["headers"])
        assert put.status_code == 201, put.text
        body = chat_body("Which colour is the sky?", template="support", max_tokens=1)
        assert client.post("/v1/chat/completions", json=body, headers=tenant["headers"]).status_code == 200

        outage.go_away()  # WAL: the template still reads; the sample's write has to wait for the lock
        try:
            started = time.monotonic()
            locked = client.post("/v1/chat/completions", json=body | {"messages": body["messages"][:1] + [
                {"role": "user", "content": "Which colour is grass?"}]}, headers=tenant["headers"])
            elapsed = time.monotonic() - started
        finally:
            outage.come_back()
        assert locked.status_code == 200, locked.text
        assert elapsed < BUSY_TIMEOUT_S - 1, f"the request waited {elapsed:.1f} s on the lock"
        sampled = client.get("/v1/templates/support/samples", headers=tenant["headers"]).json()["data"]
        assert [s["body"]["messages"][-1]["content"] for s in sampled] == ["Which colour is the sky?", "Which colour is grass?"]
    outage.close()
