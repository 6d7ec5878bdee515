"""Tenant templates API in-process with a real database: versions kept, lint findings, 400 on syntax errors."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gateway.main import create_app
from gateway.settings import EngineSettings, Settings

ADMIN_KEY = "sk-test-admin-key"
GOOD = """{% block system %}<|im_start|>system
{{ system }}<|im_end|>
{% endblock %}{% block question %}<|im_start|>user
{{ question }}<|im_end|>
{% endblock %}"""
DYNAMIC_FIRST = """{% block system %}<|im_start|>system
Now: {{ now }} {{ system }}<|im_end|>
{% endblock %}{% block question %}<|im_start|>user
{{ question }}<|im_end|>
{% endblock %}"""


@pytest.fixture()
def client(tmp_path):
    settings = Settings(db_url=f"sqlite:///{tmp_path / 't.db'}", admin_key=ADMIN_KEY, engine=EngineSettings(enabled=False))
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def new_tenant(client, name: str) -> dict:
    response = client.post("/admin/tenants", json={"name": name}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    return {"Authorization": f"Bearer {response.json()['api_key']['key']}"}


def test_each_put_creates_a_new_version_and_every_version_is_kept(client):
    auth = new_tenant(client, "acme")
    first = client.put("/v1/templates/support", json={"source": GOOD}, headers=auth)
    second = client.put("/v1/templates/support", json={"source": GOOD.replace("system\n", "system \n")}, headers=auth)
    assert first.status_code == 201 and second.status_code == 201, second.text
    assert (first.json()["version"], second.json()["version"]) == (1, 2)
    assert second.json()["versions"] == [1, 2]
    latest = client.get("/v1/templates/support", headers=auth).json()
    assert latest["version"] == 2 and latest["source"] == second.json()["source"]
    assert client.get("/v1/templates/support?version=1", headers=auth).json()["source"] == GOOD
    assert client.get("/v1/templates/support?version=3", headers=auth).status_code == 404


def test_lint_findings_come_back_with_the_saved_version(client):
    auth = new_tenant(client, "acme")
    clean = client.put("/v1/templates/clean", json={"source": GOOD}, headers=auth).json()
    assert not [f for f in clean["lint"] if f["severity"] == "error"]
    flagged = client.put("/v1/templates/dyn", json={"source": DYNAMIC_FIRST}, headers=auth)
    assert flagged.status_code == 201
    rules = {f["rule"] for f in flagged.json()["lint"]}
    assert "dynamic-before-question" in rules


def test_syntax_errors_are_a_400_and_store_nothing(client):
    auth = new_tenant(client, "acme")
    broken = client.put("/v1/templates/broken", json={"source": "{% block system %}{{ system }"}, headers=auth)
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "template_syntax_error" and broken.json()["error"]["param"] == "source"
    assert client.get("/v1/templates/broken", headers=auth).status_code == 404


def test_list_shows_own_templates_and_builtins_but_not_other_tenants(client):
    acme, other = new_tenant(client, "acme"), new_tenant(client, "other")
    client.put("/v1/templates/mine", json={"source": GOOD}, headers=acme)
    listing = client.get("/v1/templates", headers=acme).json()["data"]
    own = [t for t in listing if not t["is_builtin"]]
    assert own == [{"name": "mine", "is_builtin": False, "latest_version": 1, "num_versions": 1}]
    assert {"agent", "rag", "chat"} <= {t["name"] for t in listing if t["is_builtin"]}
    assert [t for t in client.get("/v1/templates", headers=other).json()["data"] if not t["is_builtin"]] == []
    assert client.get("/v1/templates/mine", headers=other).status_code == 404


def test_builtin_templates_are_readable(client):
    auth = new_tenant(client, "acme")
    builtin = client.get("/v1/templates/rag", headers=auth).json()
    assert builtin["is_builtin"] is True and "{% block" in builtin["source"]
    assert client.get("/v1/templates/nope", headers=auth).status_code == 404


def test_templates_need_a_tenant_key(client):
    assert client.get("/v1/templates").status_code == 401
    assert client.put("/v1/templates/x", json={"source": GOOD}).status_code == 401
