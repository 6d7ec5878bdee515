"""Admin keys as revocable rows, in-process on SQLite: a configured key revokes the generated one,
`radixgate admin-key rotate|revoke|list` take effect at once, /metrics and /docs can require a token,
and a failed commit is a 5xx with nothing half-done."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner

from gateway.cli import app as cli
from gateway.db.models import Tenant
from gateway.main import create_app
from gateway.settings import EngineSettings, Settings
from gateway.tenants import service as tenants


def settings_for(tmp_path, **fields) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path / 'keys.db'}", engine=EngineSettings(enabled=False), **fields)


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_configuring_an_admin_key_revokes_the_generated_one(tmp_path):
    with TestClient(create_app(settings_for(tmp_path))) as client:
        generated = client.app.state.gw.admin_key_generated
        assert client.get("/admin/tenants", headers=bearer(generated)).status_code == 200
    with TestClient(create_app(settings_for(tmp_path, admin_key="sk-configured-1"))) as client:
        assert client.get("/admin/tenants", headers=bearer(generated)).status_code == 401
        assert client.get("/admin/tenants", headers=bearer("sk-configured-1")).status_code == 200
    with TestClient(create_app(settings_for(tmp_path, admin_key="sk-configured-2"))) as client:  # a changed key
        assert client.get("/admin/tenants", headers=bearer("sk-configured-1")).status_code == 401
        assert client.get("/admin/tenants", headers=bearer("sk-configured-2")).status_code == 200


def test_rotate_and_revoke_from_the_cli_take_effect_on_a_running_server(tmp_path):
    settings = settings_for(tmp_path, admin_key="sk-configured")
    db = ["--db", settings.db_url]
    with TestClient(create_app(settings)) as client:
        rotated = CliRunner().invoke(cli, ["admin-key", "rotate", *db])
        assert rotated.exit_code == 0, rotated.output
        new_key = rotated.output.strip().rsplit(" ", 1)[-1]
        assert client.get("/admin/tenants", headers=bearer("sk-configured")).status_code == 401
        assert client.get("/admin/tenants", headers=bearer(new_key)).status_code == 200
        listed = CliRunner().invoke(cli, ["admin-key", "list", *db]).output
        assert new_key not in listed and new_key[:12] in listed and "rotated" in listed
        new_id = int(rotated.output.split("(id ")[1].split(";")[0])
        assert CliRunner().invoke(cli, ["admin-key", "revoke", str(new_id), *db]).exit_code == 0
        assert client.get("/admin/tenants", headers=bearer(new_key)).status_code == 401
        assert CliRunner().invoke(cli, ["admin-key", "revoke", "999", *db]).exit_code != 0


def test_metrics_and_docs_can_require_a_token(tmp_path):
    open_settings = settings_for(tmp_path, admin_key="sk-admin")
    with TestClient(create_app(open_settings)) as client:
        assert client.get("/metrics").status_code == 200 and client.get("/openapi.json").status_code == 200
    closed = settings_for(tmp_path, admin_key="sk-admin", protect_metrics=True, protect_docs=True, metrics_token="scrape-me")
    with TestClient(create_app(closed)) as client:
        for path in ("/metrics", "/openapi.json", "/docs"):
            refused = client.get(path)
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key", path
            assert client.get(path, headers=bearer("sk-admin")).status_code == 200, path
        assert client.get("/metrics", headers=bearer("scrape-me")).status_code == 200
        assert client.get("/openapi.json", headers=bearer("scrape-me")).status_code == 401


def test_admin_keys_in_settings_are_secret(tmp_path):
    settings = settings_for(tmp_path, admin_key="sk-hidden", metrics_token="tok-hidden")
    assert "sk-hidden" not in repr(settings) and "tok-hidden" not in repr(settings)


def test_a_failed_commit_is_a_5xx_and_the_key_it_would_have_issued_does_not_exist(tmp_path, monkeypatch):
    from sqlalchemy.orm import Session

    settings = settings_for(tmp_path, admin_key="sk-admin")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        real_commit, real_issue = Session.commit, tenants.issue_key

        def issue_and_mark(session, tenant):  # the session that issues a key will fail to commit
            session.info["fail_commit"] = True
            return real_issue(session, tenant)

        def failing_commit(self):
            if self.info.pop("fail_commit", False):
                raise RuntimeError("disk full")
            return real_commit(self)

        monkeypatch.setattr(tenants, "issue_key", issue_and_mark)
        monkeypatch.setattr(Session, "commit", failing_commit)
        response = client.post("/admin/tenants", json={"name": "acme"}, headers=bearer("sk-admin"))
        monkeypatch.setattr(Session, "commit", real_commit)
        assert response.status_code == 500 and "key" not in response.text
        with client.app.state.gw.session_factory() as session:
            assert session.scalars(select(Tenant)).all() == []
