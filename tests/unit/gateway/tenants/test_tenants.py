"""Tenants, API keys and the admin key bootstrap, on a real (migrated) SQLite database."""

from __future__ import annotations

import pytest

from gateway.tenants import service as tenants

from gateway.tenants import admin_keys
from gateway.db.migrate import upgrade
from gateway.db.models import AdminKey, ApiKey
from gateway.db.session import make_engine, make_session_factory, session_scope
from gateway.settings import Settings


@pytest.fixture()
def session_factory(tmp_path):
    url = f"sqlite:///{tmp_path / 'tenants.db'}"
    upgrade(url)
    engine = make_engine(url)
    yield make_session_factory(engine)
    engine.dispose()


def test_issued_key_is_stored_only_as_its_hash_and_prefix(session_factory):
    with session_scope(session_factory) as session:
        issued = tenants.create_tenant(session, "acme", pin_quota_tokens=500)
    with session_scope(session_factory) as session:
        stored = session.get(ApiKey, issued.api_key.id)
        assert stored.key_hash == tenants.hash_key(issued.key) != issued.key
        assert issued.key.startswith(stored.prefix) and len(stored.prefix) < len(issued.key) // 2
        assert issued.key not in {stored.key_hash, stored.prefix}


def test_authenticate_resolves_the_tenant_and_touches_last_used(session_factory):
    with session_scope(session_factory) as session:
        issued = tenants.create_tenant(session, "acme")
    with session_scope(session_factory) as session:
        tenant, api_key = tenants.authenticate(session, issued.key)
        assert tenant.name == "acme" and api_key.last_used_at is not None
        assert tenants.authenticate(session, issued.key + "x") is None


def test_revoked_key_no_longer_authenticates_and_other_keys_still_do(session_factory):
    with session_scope(session_factory) as session:
        first = tenants.create_tenant(session, "acme")
        second = tenants.issue_key(session, tenants.require_tenant(session, "acme"))
    with session_scope(session_factory) as session:
        revoked_at = tenants.revoke_key(session, first.api_key.id).revoked_at
        assert tenants.revoke_key(session, first.api_key.id).revoked_at == revoked_at
    with session_scope(session_factory) as session:
        assert tenants.authenticate(session, first.key) is None
        assert tenants.authenticate(session, second.key)[0].name == "acme"


def test_duplicate_tenant_name_and_unknown_names_raise(session_factory):
    with session_scope(session_factory) as session:
        tenants.create_tenant(session, "acme")
    with pytest.raises(tenants.TenantExistsError), session_scope(session_factory) as session:
        tenants.create_tenant(session, "acme")
    with pytest.raises(tenants.TenantNotFoundError), session_scope(session_factory) as session:
        tenants.require_tenant(session, "nobody")
    with pytest.raises(tenants.KeyNotFoundError), session_scope(session_factory) as session:
        tenants.revoke_key(session, 12345)


def test_bootstrap_generates_an_admin_key_once_and_stores_only_its_hash(session_factory, capsys):
    key = admin_keys.bootstrap_admin_key(session_factory, Settings(admin_key=None))
    assert key and key in capsys.readouterr().out
    assert admin_keys.bootstrap_admin_key(session_factory, Settings(admin_key=None)) is None
    assert key not in capsys.readouterr().out
    with session_scope(session_factory) as session:
        hashes = [a.key_hash for a in session.query(AdminKey)]
        assert hashes == [tenants.hash_key(key)]
        assert admin_keys.is_admin_key(session, key) and not admin_keys.is_admin_key(session, "sk-rgadmin-wrong")


def test_configured_admin_key_is_accepted_and_hashed_without_printing(session_factory, capsys):
    settings = Settings(admin_key="sk-configured-admin")
    assert admin_keys.bootstrap_admin_key(session_factory, settings) is None
    assert "sk-configured-admin" not in capsys.readouterr().out
    with session_scope(session_factory) as session:
        assert admin_keys.is_admin_key(session, "sk-configured-admin")
        assert admin_keys.is_admin_key(session, "sk-configured-admin", settings)
        assert [a.key_hash for a in session.query(AdminKey)] == [tenants.hash_key("sk-configured-admin")]


def test_generated_keys_are_unique_and_long():
    keys = {tenants.generate_key() for _ in range(100)}
    assert len(keys) == 100 and all(len(k) > 40 and k.startswith(tenants.TENANT_KEY_PREFIX) for k in keys)


def test_tenant_cli_creates_lists_and_issues_keys(tmp_path):
    from typer.testing import CliRunner

    from gateway.cli import app

    db = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    created = runner.invoke(app, ["tenant", "create", "acme", "--pin-quota", "4096", "--cache-group", "g1", "--db", db])
    assert created.exit_code == 0, created.output
    key = created.output.strip().split()[-1]
    assert key.startswith(tenants.TENANT_KEY_PREFIX)
    listed = runner.invoke(app, ["tenant", "list", "--db", db])
    assert listed.exit_code == 0 and "acme" in listed.output and "4096" in listed.output and "g1" in listed.output
    assert key not in listed.output
    second = runner.invoke(app, ["tenant", "key", "acme", "--db", db])
    assert second.exit_code == 0 and second.output.strip().split()[-1] != key
    assert runner.invoke(app, ["tenant", "create", "acme", "--db", db]).exit_code != 0
    assert runner.invoke(app, ["tenant", "key", "nobody", "--db", db]).exit_code != 0
    engine = make_engine(db)
    with session_scope(make_session_factory(engine)) as session:
        assert tenants.authenticate(session, key)[0].pin_quota_tokens == 4096
    engine.dispose()
