"""Pins API in-process with the real default model and a real database.

A pinned static prefix must be hit token for token by chat requests with the same system prompt
and tools; pins count against the tenant's quota (409 with the numbers), expire softly after
ttl_seconds, and are re-warmed when the app starts again.
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from engine import Engine, EngineConfig
from gateway.main import create_app
from gateway.settings import Settings

pytestmark = pytest.mark.slow

ADMIN_KEY = "sk-test-admin-key"
SYSTEM = (
    "You are the support assistant of Nimbus Storage. Answer questions about buckets, lifecycle rules, "
    "billing and network access. Keep answers short and exact. Call a tool when account data is needed. "
    "Never disclose internal notes. Put configuration keys in code formatting. Reply in the customer's language."
)
TOOLS = [
    {"type": "function", "function": {"name": "get_account", "description": "Look up an account.",
                                      "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}},
]


@pytest.fixture(scope="module")
def engine():
    with Engine(EngineConfig(kv_cache_tokens=16384, max_batch_tokens=2048)) as shared:
        yield shared


@pytest.fixture()
def settings(tmp_path) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path / 'pins.db'}", admin_key=ADMIN_KEY)


@pytest.fixture()
def client(settings, engine):
    with TestClient(create_app(settings, engine=engine)) as test_client:
        yield test_client


def new_tenant(client, name: str, quota: int) -> dict:
    response = client.post(
        "/admin/tenants", json={"name": name, "pin_quota_tokens": quota}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    )
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['api_key']['key']}"}


def chat(client, auth: dict, question: str) -> dict:
    body = {"model": "default", "max_tokens": 2, "temperature": 0, "tools": TOOLS,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}
    response = client.post("/v1/chat/completions", json=body, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()["usage"]


def test_pinned_prefix_is_hit_by_chat_requests_and_counts_hits(client):
    auth = new_tenant(client, "acme", 4096)
    created = client.post("/v1/pins", json={"system": SYSTEM, "tools": TOOLS}, headers=auth)
    assert created.status_code == 201, created.text
    pin = created.json()
    assert pin["num_tokens"] > 0 and pin["num_tokens"] % 16 == 0 and pin["is_warm"]
    usage = chat(client, auth, "How do I enable versioning on a bucket?")
    assert usage["prompt_tokens_details"]["cached_tokens"] >= pin["num_tokens"]
    listed = client.get("/v1/pins", headers=auth).json()
    assert [p["id"] for p in listed["data"]] == [pin["id"]] and listed["data"][0]["hits"] >= 1
    assert listed["num_pinned_tokens"] == pin["num_tokens"]


def test_over_quota_is_a_409_with_the_numbers(client):
    auth = new_tenant(client, "small", 32)
    refused = client.post("/v1/pins", json={"system": SYSTEM, "tools": TOOLS}, headers=auth)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "pin_quota_exceeded" and "quota is 32 tokens" in error["message"]
    assert client.get("/v1/pins", headers=auth).json()["data"] == []


def test_delete_unpins_and_only_the_owner_can(client):
    owner, stranger = new_tenant(client, "acme", 4096), new_tenant(client, "other", 4096)
    pin_id = client.post("/v1/pins", json={"system": SYSTEM}, headers=owner).json()["id"]
    assert client.delete(f"/v1/pins/{pin_id}", headers=stranger).status_code == 404
    deleted = client.delete(f"/v1/pins/{pin_id}", headers=owner)
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert client.get("/v1/pins", headers=owner).json()["data"] == []
    assert client.delete(f"/v1/pins/{pin_id}", headers=owner).status_code == 404


def test_soft_pin_expires_after_its_ttl(client):
    auth = new_tenant(client, "acme", 4096)
    pin = client.post("/v1/pins", json={"system": SYSTEM, "ttl_seconds": 1}, headers=auth).json()
    assert pin["expires_at"] is not None
    deadline = time.monotonic() + 10
    while client.get("/v1/pins", headers=auth).json()["data"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.get("/v1/pins", headers=auth).json()["data"] == []


def wait_until_warm(client, auth, timeout_s: float = 60.0) -> list[dict]:
    """The tenant's pins once all are warm again (re-warming runs beside serving), or as they are at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = client.get("/v1/pins", headers=auth).json()["data"]
        if all(p["is_warm"] for p in listed) or time.monotonic() > deadline:
            return listed
        time.sleep(0.1)


def test_stored_pins_are_rewarmed_when_the_app_starts(settings, engine, caplog):
    with TestClient(create_app(settings, engine=engine)) as first:
        auth = new_tenant(first, "acme", 4096)
        pin = first.post("/v1/pins", json={"system": SYSTEM, "tools": TOOLS}, headers=auth).json()
        engine_pin_id = first.app.state.gw.pins.book.live[pin["id"]].engine_pin_id
    engine.unpin(engine_pin_id)  # what a restart does to the engine: nothing pinned, nothing cached
    engine.flush_cache()
    with caplog.at_level("INFO", logger="gateway.pins.service"), TestClient(create_app(settings, engine=engine)) as second:
        listed = wait_until_warm(second, auth)
        assert [(p["id"], p["is_warm"]) for p in listed] == [(pin["id"], True)]
        usage = chat(second, auth, "What does lifecycle expiration do?")
        assert usage["prompt_tokens_details"]["cached_tokens"] >= pin["num_tokens"]
    assert "re-warmed 1/1" in caplog.text


def test_unknown_template_and_malformed_bodies_are_400s(client):
    auth = new_tenant(client, "acme", 4096)
    unknown = client.post("/v1/pins", json={"system": SYSTEM, "template": "no-such-template"}, headers=auth)
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "template_not_found"
    assert client.post("/v1/pins", json={"tools": TOOLS}, headers=auth).status_code == 400
    assert client.post("/v1/pins", json={"system": SYSTEM, "ttl_seconds": 0}, headers=auth).status_code == 400
    assert client.get("/v1/pins").status_code == 401
