"""Tenant dynamic rules: validation, canonical storage, the compiled-rules cache, the service and the CLI."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gateway.tenants import service as tenants
from gateway.cli import app
from gateway.db.migrate import upgrade
from gateway.db.session import make_engine, make_session_factory, session_scope
from gateway.tenants.dynamic_rules import compile_rules, dump_rules, load_rules, rules_for, validate_rules

TICKET_RULE = {"ticket": r"Ticket #\d+"}


def test_bad_regex_is_a_value_error_naming_the_rule():
    with pytest.raises(ValueError, match="ticket"):
        validate_rules({"ticket": "Ticket #(\\d+"})
    with pytest.raises(ValueError, match="empty"):
        validate_rules({"empty": ""})
    assert validate_rules(None) == {}


def test_storage_is_canonical_json_and_compiled_rules_are_cached_by_it():
    text = dump_rules({"b": "x", "a": "y"})
    assert text == dump_rules({"a": "y", "b": "x"}) and load_rules(text) == {"a": "y", "b": "x"}
    assert dump_rules({}) is None and load_rules(None) == {}
    assert compile_rules(dump_rules(TICKET_RULE)) is compile_rules(dump_rules(dict(TICKET_RULE)))
    assert "ticket" in compile_rules(dump_rules(TICKET_RULE)).names
    assert "ticket" not in rules_for(object()).names  # a tenant without rules: the defaults


@pytest.fixture()
def db_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'rules.db'}"
    upgrade(url)
    return url


def test_service_creates_and_updates_rules(db_url):
    factory = make_session_factory(make_engine(db_url))
    with session_scope(factory) as session:
        tenants.create_tenant(session, "acme", dynamic_rules=TICKET_RULE)
        with pytest.raises(ValueError, match="bad"):
            tenants.create_tenant(session, "other", dynamic_rules={"bad": "(["})
    with session_scope(factory) as session:
        tenant = tenants.require_tenant(session, "acme")
        assert "ticket" in rules_for(tenant).names
        tenants.update_tenant(session, "acme", {"dynamic_rules": None, "max_concurrency": 2})
    with session_scope(factory) as session:
        tenant = tenants.require_tenant(session, "acme")
        assert tenant.dynamic_rules is None and tenant.max_concurrency == 2
        assert tenants.get_tenant(session, "other") is None
        with pytest.raises(ValueError, match="name"):
            tenants.update_tenant(session, "acme", {"name": "renamed"})


def test_cli_create_takes_repeatable_dynamic_rules(db_url):
    runner = CliRunner()
    args = ["tenant", "create", "acme", "--dynamic-rule", r"ticket=Ticket #\d+", "--dynamic-rule", "case=Case \\w+"]
    result = runner.invoke(app, [*args, "--db", db_url])
    assert result.exit_code == 0, result.output
    with session_scope(make_session_factory(make_engine(db_url))) as session:
        assert load_rules(tenants.require_tenant(session, "acme").dynamic_rules) == {**TICKET_RULE, "case": "Case \\w+"}
    bad = runner.invoke(app, ["tenant", "create", "other", "--dynamic-rule", "oops=([", "--db", db_url])
    assert bad.exit_code != 0 and "oops" in bad.output
    assert runner.invoke(app, ["tenant", "create", "other", "--dynamic-rule", "no-equals", "--db", db_url]).exit_code != 0
