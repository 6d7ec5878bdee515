"""Admin API in-process with a real SQLite database: tenants, keys shown once, revocation, admin auth."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gateway.tenants import service as tenants
from gateway.db.models import ApiKey
from gateway.db.session import make_engine, make_session_factory, session_scope
from gateway.main import create_app
from gateway.settings import EngineSettings, Settings

ADMIN_KEY = "sk-test-admin-key"


@pytest.fixture()
def settings(tmp_path) -> Settings:
    return Settings(
        db_url=f"sqlite:///{tmp_path / 'admin.db'}", admin_key=ADMIN_KEY, engine=EngineSettings(enabled=False)
    )


@pytest.fixture()
def client(settings):
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def admin(key: str = ADMIN_KEY) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_create_tenant_returns_its_key_once_and_stores_only_the_hash(client, settings):
    response = client.post("/admin/tenants", json={"name": "acme", "pin_quota_tokens": 2048, "cache_group": "g1"}, headers=admin())
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["name"] == "acme" and body["pin_quota_tokens"] == 2048 and body["cache_group"] == "g1"
    key = body["api_key"]["key"]
    assert key.startswith(body["api_key"]["prefix"])
    listing = client.get("/admin/tenants", headers=admin()).text
    assert key not in listing and body["api_key"]["prefix"] in listing
    engine = make_engine(settings.db_url)
    with session_scope(make_session_factory(engine)) as session:
        stored = session.get(ApiKey, body["api_key"]["id"])
        assert stored.key_hash == tenants.hash_key(key)
    engine.dispose()


def test_issued_key_authenticates_as_its_tenant_until_revoked(client):
    first = client.post("/admin/tenants", json={"name": "acme"}, headers=admin()).json()["api_key"]
    second = client.post("/admin/tenants/acme/keys", headers=admin())
    assert second.status_code == 201 and second.json()["tenant"] == "acme"
    second_key = second.json()["key"]
    assert client.get("/v1/templates", headers=admin(first["key"])).status_code == 200
    revoked = client.delete(f"/admin/keys/{first['id']}", headers=admin())
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    refused = client.get("/v1/templates", headers=admin(first["key"]))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    assert client.get("/v1/templates", headers=admin(second_key)).status_code == 200
    keys = client.get("/admin/tenants", headers=admin()).json()["data"][0]["keys"]
    assert [k["revoked_at"] is not None for k in keys] == [True, False]


def test_admin_routes_refuse_tenant_keys_and_missing_keys(client):
    tenant_key = client.post("/admin/tenants", json={"name": "acme"}, headers=admin()).json()["api_key"]["key"]
    for headers in ({}, admin(tenant_key), admin("sk-wrong")):
        response = client.get("/admin/tenants", headers=headers)
        assert response.status_code == 401
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_admin_errors_are_openai_shaped(client):
    client.post("/admin/tenants", json={"name": "acme"}, headers=admin())
    duplicate = client.post("/admin/tenants", json={"name": "acme"}, headers=admin())
    assert duplicate.status_code == 409 and duplicate.json()["error"]["code"] == "tenant_exists"
    assert client.post("/admin/tenants/nobody/keys", headers=admin()).status_code == 404
    assert client.delete("/admin/keys/9999", headers=admin()).status_code == 404
    malformed = client.post("/admin/tenants", json={"name": "", "pin_quota_tokens": -1}, headers=admin())
    assert malformed.status_code == 400 and malformed.json()["error"]["type"] == "invalid_request_error"


def test_generated_admin_key_is_printed_once_and_works(tmp_path, capsys):
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'boot.db'}", engine=EngineSettings(enabled=False))
    with TestClient(create_app(settings)) as client:
        printed = capsys.readouterr().out
        key = client.app.state.gw.admin_key_generated
        assert key and key in printed
        assert client.get("/admin/tenants", headers=admin(key)).status_code == 200
    with TestClient(create_app(settings)) as client:
        assert client.app.state.gw.admin_key_generated is None
        assert key not in capsys.readouterr().out
        assert client.get("/admin/tenants", headers=admin(key)).status_code == 200
