"""No pooled connection within db_pool_timeout_s (every connection busy) is a 503 with Retry-After,
never a 500; authentication then serves the (stale) cached caller, so a known key still gets the
routes that need no database, and an unknown key gets the same 503."""

from __future__ import annotations

from fastapi.testclient import TestClient

from gateway.main import create_app
from tests.support.app import create_tenant, make_settings


def test_a_pool_timeout_is_503_and_known_keys_authenticate_from_the_cache(tmp_path):
    settings = make_settings(tmp_path, db_pool_size=1, db_pool_max_overflow=0, db_pool_timeout_s=0.2,
                             engine={"enabled": False}, canonical_shadow=False)
    with TestClient(create_app(settings)) as client:
        gw = client.app.state.gw
        known = create_tenant(client, "known")
        assert client.get("/v1/models", headers=known["headers"]).status_code == 200  # caches the caller
        with gw.db_engine.connect():  # the pool's only connection is now taken
            models = client.get("/v1/models", headers=known["headers"])
            pins = client.get("/v1/pins", headers=known["headers"])
            stranger = client.get("/v1/models", headers={"Authorization": "Bearer sk-never-seen"})
        assert models.status_code == 200, models.text
        for refused in (pins, stranger):
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "database_unavailable"
            assert int(refused.headers["retry-after"]) >= 1
        assert client.get("/v1/pins", headers=known["headers"]).status_code == 200  # the pool is back
