"""Template labels and diffs through the API (no engine): labels move, a reference resolves, scope holds.

Requests naming `name@label` and the what-if estimate need the engine: test_template_studio.py.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gateway.main import create_app
from gateway.settings import EngineSettings, Settings

ADMIN_KEY = "sk-test-admin-key"
V1 = """{% block system %}<|im_start|>system
{{ system }}<|im_end|>
{% endblock %}{% block question %}<|im_start|>user
{{ question }}<|im_end|>
{% endblock %}"""
V2 = V1.replace("{{ question }}", "Question: {{ question }}")


@pytest.fixture()
def client(tmp_path):
    settings = Settings(db_url=f"sqlite:///{tmp_path / 't.db'}", admin_key=ADMIN_KEY, engine=EngineSettings(enabled=False))
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def new_tenant(client, name: str) -> dict:
    response = client.post("/admin/tenants", json={"name": name}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    return {"Authorization": f"Bearer {response.json()['api_key']['key']}"}


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_publish_moves_the_label_and_a_bare_name_serves_the_labelled_version(client):
    auth = new_tenant(client, "acme")
    assert client.put("/v1/templates/support", json={"source": V1, "label": "production"}, headers=auth).status_code == 201
    second = client.put("/v1/templates/support", json={"source": V2}, headers=auth).json()
    assert second["version"] == 2 and second["labels"] == {"production": 1} and second["published_version"] == 1
    assert client.get("/v1/templates/support?version=production", headers=auth).json()["source"] == V1
    moved = client.put("/v1/templates/support/labels/production", json={"version": 2}, headers=auth)
    assert moved.json()["labels"] == {"production": 2}
    assert client.get("/v1/templates/support", headers=auth).json()["published_version"] == 2
    client.put("/v1/templates/support/labels/staging", json={"version": 1}, headers=auth)
    rollback = client.put("/v1/templates/support/labels/production", json={"version": 1}, headers=auth)
    assert rollback.json()["labels"] == {"production": 1, "staging": 1}
    assert client.delete("/v1/templates/support/labels/staging", headers=auth).json()["labels"] == {"production": 1}


def test_bad_labels_and_versions_get_openai_style_errors(client):
    auth = new_tenant(client, "acme")
    client.put("/v1/templates/support", json={"source": V1}, headers=auth)
    assert error_of(client.put("/v1/templates/support/labels/9bad", json={"version": 1}, headers=auth), 400)["code"] == "invalid_label"
    assert error_of(client.put("/v1/templates/support/labels/prod", json={"version": 7}, headers=auth), 404)["param"] == "version"
    assert error_of(client.put("/v1/templates/support", json={"source": V1, "label": "a b"}, headers=auth), 400)["param"] == "label"
    assert error_of(client.delete("/v1/templates/support/labels/none", headers=auth), 404)["param"] == "label"
    assert error_of(client.get("/v1/templates/support?version=nope!", headers=auth), 400)["param"] == "version"
    assert error_of(client.get("/v1/templates/support?version=staging", headers=auth), 404)["param"] == "name"
    assert client.get("/v1/templates/support/labels").status_code == 401
    assert len(client.get("/v1/templates", headers=auth).json()["data"]) > 1  # nothing half-written by the 400s
    assert client.get("/v1/templates/support", headers=auth).json()["versions"] == [1]


def test_diff_of_a_draft_or_a_version_against_the_published_one(client):
    auth = new_tenant(client, "acme")
    client.put("/v1/templates/support", json={"source": V1, "label": "production"}, headers=auth)
    client.put("/v1/templates/support", json={"source": V2}, headers=auth)
    draft = client.post("/v1/templates/support/diff", json={"source": V2 + "\n{# note #}"}, headers=auth).json()
    assert draft["base_version"] == 1 and draft["num_added"] == 3 and draft["num_removed"] == 2  # the question line; the last line gains a newline and a comment
    assert "+Question: {{ question }}<|im_end|>" in draft["diff"] and "-{{ question }}<|im_end|>" in draft["diff"]
    versions = client.post("/v1/templates/support/diff", json={"version": 2, "base": "1"}, headers=auth).json()
    assert versions["num_added"] == 1 and versions["num_removed"] == 1
    same = client.post("/v1/templates/support/diff", json={"version": 1}, headers=auth).json()
    assert same["diff"] == "" and same["num_added"] == 0
    assert error_of(client.post("/v1/templates/support/diff", json={"source": V1, "version": 1}, headers=auth), 400)
    assert error_of(client.post("/v1/templates/support/diff", json={"version": 1, "base": "qa"}, headers=auth), 404)["param"] == "base"


def test_another_tenants_templates_labels_and_samples_are_not_found(client):
    acme, globex = new_tenant(client, "acme"), new_tenant(client, "globex")
    client.put("/v1/templates/support", json={"source": V1, "label": "production"}, headers=acme)
    assert error_of(client.get("/v1/templates/support/labels", headers=globex), 404)
    assert error_of(client.put("/v1/templates/support/labels/production", json={"version": 1}, headers=globex), 404)
    assert error_of(client.post("/v1/templates/support/diff", json={"version": 1}, headers=globex), 404)
    assert client.get("/v1/templates/support/samples", headers=globex).json()["data"] == []
    assert "support" not in {t["name"] for t in client.get("/v1/templates", headers=globex).json()["data"]}
    assert client.get("/v1/templates/support/labels", headers=acme).json()["labels"] == {"production": 1}


def test_the_estimate_needs_a_tokenizer_and_says_so_without_engine_or_remotes(client):
    auth = new_tenant(client, "acme")
    client.put("/v1/templates/support", json={"source": V1}, headers=auth)
    assert "tokenizer" in error_of(client.post("/v1/templates/support/estimate", json={"source": V1}, headers=auth), 400)["message"]
