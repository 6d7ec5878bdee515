"""GET /v1/stats, GET /admin/stats and GET /metrics after real requests through the app."""

from __future__ import annotations

import pytest
from tests.support.app import admin_headers, chat_body, create_tenant, make_client, wait_for_log_rows

pytestmark = pytest.mark.slow


def test_stats_report_the_callers_own_requests_and_hit_rate(client):
    acme = create_tenant(client, "acme")
    other = create_tenant(client, "other")
    usages = [client.post("/v1/chat/completions", json=chat_body(), headers=acme["headers"]).json()["usage"] for _ in range(3)]
    client.post("/v1/chat/completions", json=chat_body(n=3), headers=acme["headers"])
    client.post("/v1/chat/completions", json=chat_body(), headers=other["headers"])
    wait_for_log_rows(client.app.state.gw, 5)
    stats = client.get("/v1/stats", params={"bucket": "day"}, headers=acme["headers"]).json()
    assert stats["tenant"] == "acme" and stats["requests"] == 4 and stats["errors"] == 1
    assert stats["prompt_tokens"] == sum(u["prompt_tokens"] for u in usages)
    assert stats["cached_tokens"] == sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    assert 0 < stats["hit_rate"] < 1 and stats["raw_hit_rate"] is not None
    assert stats["ttft_p50_ms"] is not None
    everyone = client.get("/admin/stats", headers=admin_headers()).json()["data"]
    assert {row["tenant"]: row["requests"] for row in everyone} == {"acme": 4, "other": 1}
    assert client.get("/admin/stats", headers=acme["headers"]).status_code == 401
    assert client.get("/v1/stats", params={"since": "2030-01-01T00:00:00Z", "until": "2029-01-01T00:00:00Z"},
                      headers=acme["headers"]).status_code == 400


def test_metrics_expose_request_token_and_engine_series(client):
    acme = create_tenant(client, "acme")
    for _ in range(2):
        client.post("/v1/chat/completions", json=chat_body(), headers=acme["headers"])
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'radixgate_requests_total{status="ok",tenant="acme"} 2.0' in text
    assert 'radixgate_cached_tokens_total{tenant="acme"}' in text
    assert "radixgate_ttft_seconds_bucket" in text and "radixgate_log_queue_depth" in text


def test_app_stores_engine_cache_snapshots_for_the_dashboard(tmp_path, engine):
    from sqlalchemy import select

    from gateway.db.models import EngineStatSnapshot

    with make_client(tmp_path, engine) as client:
        tenant = create_tenant(client, "snap")
        assert client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"]).status_code == 200
        gw = client.app.state.gw
    with gw.session_factory() as session:  # the lifespan's shutdown takes a last snapshot
        rows = session.scalars(select(EngineStatSnapshot)).all()
    assert rows and rows[-1].cached_tokens > 0
