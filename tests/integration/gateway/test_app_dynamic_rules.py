"""Tenant dynamic-content rules end to end: admin API -> database -> canonicalizer on the chat path.

Real SQLite, the real engine and model. A tenant whose rule marks "Ticket #N" sentences as
dynamic gets them hoisted out of the system prompt, so two requests differing only in the
ticket number share the whole static prefix; a tenant without the rule does not.
"""

from __future__ import annotations

import pytest
from tests.support.app import admin_headers, create_tenant

pytestmark = pytest.mark.slow

TICKET_RULE = {"ticket": r"Ticket #\d+"}
STATIC_TAIL = (
    "You are the support assistant for Acme Corporation. Be friendly and precise. "
    "Never reveal internal notes, never promise refunds, and always answer in one short sentence. "
    "If the customer asks about billing, point them to the billing portal."
)


def ticket_body(ticket: int) -> dict:
    system = f"Ticket #{ticket} is open.\n{STATIC_TAIL}"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "How do I reset my password?"}]
    return {"model": "default", "messages": messages, "max_tokens": 4, "temperature": 0}


def cached_tokens(client, tenant: dict, body: dict) -> int:
    response = client.post("/v1/chat/completions", json=body, headers=tenant["headers"])
    assert response.status_code == 200, response.text
    return response.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def preview(client, tenant: dict, body: dict) -> dict:
    response = client.post("/v1/canonicalize", json=body, headers=tenant["headers"])
    assert response.status_code == 200, response.text
    return response.json()


def test_tenant_rule_hoists_ticket_line_so_requests_share_the_static_prefix(client, engine):
    with_rule = create_tenant(client, "with-rule", dynamic_rules=TICKET_RULE)
    without_rule = create_tenant(client, "without-rule")

    shown = preview(client, with_rule, ticket_body(123))
    assert shown["sections"]["dynamic"] == ["Ticket #123 is open."]
    assert "Ticket" not in shown["sections"]["system"]
    assert "ticket" in shown["signals"]["dynamic_patterns"]
    plain = preview(client, without_rule, ticket_body(123))
    assert plain["sections"]["dynamic"] == [] and "Ticket #123" in plain["sections"]["system"]

    page_size = engine.config.page_size
    assert cached_tokens(client, with_rule, ticket_body(123)) == 0
    hit = cached_tokens(client, with_rule, ticket_body(456))
    prefix_len = shown["static_prefix_len"]
    assert prefix_len >= shown["section_tokens"]["system"] > 0
    assert hit >= prefix_len - prefix_len % page_size > 0  # the whole static prefix, page-aligned

    assert cached_tokens(client, without_rule, ticket_body(123)) == 0
    miss = cached_tokens(client, without_rule, ticket_body(456))
    assert miss < page_size * 2 < hit  # only the chat header before "Ticket #" can match


def test_rules_are_listed_updated_by_patch_and_bad_regex_is_a_400(client):
    create_tenant(client, "acme")
    patched = client.patch("/admin/tenants/acme", json={"dynamic_rules": TICKET_RULE}, headers=admin_headers())
    assert patched.status_code == 200, patched.text
    assert patched.json()["dynamic_rules"] == TICKET_RULE
    listed = client.get("/admin/tenants", headers=admin_headers()).json()["data"]
    assert listed[0]["dynamic_rules"] == TICKET_RULE

    bad = {"name": "broken", "dynamic_rules": {"ticket": "Ticket #(\\d+"}}
    created = client.post("/admin/tenants", json=bad, headers=admin_headers())
    assert created.status_code == 400
    error = created.json()["error"]
    assert "ticket" in error["message"] and error["param"] == "dynamic_rules"
    assert error["type"] == "invalid_request_error"
    patch_bad = client.patch("/admin/tenants/acme", json={"dynamic_rules": {"oops": "(["}}, headers=admin_headers())
    assert patch_bad.status_code == 400 and "oops" in patch_bad.json()["error"]["message"]
    assert client.patch("/admin/tenants/nobody", json={}, headers=admin_headers()).status_code == 404
    names = [t["name"] for t in client.get("/admin/tenants", headers=admin_headers()).json()["data"]]
    assert names == ["acme"]
