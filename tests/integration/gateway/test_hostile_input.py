"""Hostile input against a real loopback server over the shared engine: schemathesis over the app's own
OpenAPI schema (no 5xx, every error in its wire format's envelope), template bombs (400 naming the template and line,
other tenants served), unicode edge cases, and the body/field limits."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings

from gateway.main import create_app
from gateway.settings import Settings
from tests.support.app import ADMIN_KEY, chat_body
from tests.support.live_app import serve_app

pytestmark = pytest.mark.slow

SCHEMA = schemathesis.openapi.from_dict(create_app(Settings(admin_key=ADMIN_KEY)).openapi())
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
BOMBS = {
    "power": "{% block question %}{{ 3 ** (3 ** 15) }}{% endblock %}",
    "repeat": '{% block question %}{{ "x" * 200000000 }}{% endblock %}',
    "loop": "{% block question %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endblock %}",
    "recursion": "{% block question %}{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}{% endblock %}",
    "value_error": "{% block question %}\n{{ question.split('') }}{% endblock %}",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory, shared_engine):
    tmp = tmp_path_factory.mktemp("hostile")
    settings_ = Settings(db_url=f"sqlite:///{tmp / 'hostile.db'}", admin_key=ADMIN_KEY, rewarm_pins=False, default_max_tokens=4)
    with serve_app(create_app(settings_, engine=shared_engine)) as base_url:
        yield base_url


def new_tenant(base_url: str, **fields) -> dict:
    name = f"t-{uuid.uuid4().hex[:12]}"
    response = httpx.post(f"{base_url}/admin/tenants", json={"name": name, "pin_quota_tokens": 4096, **fields},
                          headers=ADMIN, timeout=30)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['api_key']['key']}"}


TENANTS_BY_PATH: dict[tuple[str, str], dict] = {}


def tenant_for(base_url: str, path: str) -> dict:
    """One tenant per server and operation path: cases of one operation share it (tenant creation was
    a good part of the fuzzing's time), other operations never see its state."""
    if (base_url, path) not in TENANTS_BY_PATH:
        TENANTS_BY_PATH[base_url, path] = new_tenant(base_url)
    return TENANTS_BY_PATH[base_url, path]


def assert_openai_error(response) -> None:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["message"], body


def assert_anthropic_error(response) -> None:
    body = response.json()
    assert set(body) == {"type", "error"} and body["type"] == "error", body
    assert set(body["error"]) == {"type", "message"} and body["error"]["message"], body


@SCHEMA.parametrize()
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_schema_fuzzing_never_gives_a_5xx_and_every_error_is_openai_shaped(case, server):
    headers = ADMIN if case.path.startswith("/admin") else tenant_for(server, case.path)
    if isinstance(case.body, dict):  # bounded generations: the fuzzing is about inputs, not long answers
        for field in ("max_tokens", "max_completion_tokens"):
            if isinstance(case.body.get(field), int) and case.body[field] > 4:
                case.body[field] = 4
    response = case.call(base_url=server, headers=headers, timeout=60)
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400:  # each wire format's own envelope: Anthropic's on the Messages API
        (assert_anthropic_error if case.path.startswith("/v1/messages") else assert_openai_error)(response)


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_template_bombs_are_400s_naming_template_and_line_while_others_are_served(server, name):
    attacker, victim = new_tenant(server), new_tenant(server)
    with httpx.Client(base_url=server, timeout=60) as client:
        inline = client.post("/v1/chat/completions", json=chat_body(template=BOMBS[name]), headers=attacker)
        stored = client.put(f"/v1/templates/{name}", json={"source": BOMBS[name]}, headers=attacker)
        if stored.status_code == 201:  # compiles: it is refused when it renders, by chat or by pin
            via_name = client.post("/v1/chat/completions", json=chat_body(template=name), headers=attacker)
            pin = client.post("/v1/pins", json={"system": "S " * 40, "template": name}, headers=attacker)
            for response in (via_name, pin):
                assert response.status_code == 400 and response.json()["error"]["code"] == "template_error", response.text
        served = client.post("/v1/chat/completions", json=chat_body(), headers=victim)
    assert inline.status_code == 400, inline.text
    assert_openai_error(inline)
    assert "template 'inline'" in inline.json()["error"]["message"] and "line" in inline.json()["error"]["message"]
    assert served.status_code == 200 and served.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("text", ["nul \x00 byte", "lone \ud800 surrogate \udfff", "rtl \u202e\u200f\u061c marks",
                                  "w" * 100_000])
def test_unicode_edge_cases_canonicalize_without_errors(server, text):
    body = {"messages": [{"role": "system", "content": f"Be brief. {text}"}, {"role": "user", "content": text}],
            "context": [{"id": text[:16], "text": text}]}
    raw = json.dumps(body, ensure_ascii=True)  # lone surrogates travel as \\ud800 escapes, as JSON allows
    response = httpx.post(f"{server}/v1/canonicalize", content=raw, timeout=120,
                          headers={**new_tenant(server), "content-type": "application/json"})
    if len(text) > 8192:  # canonicalized and tokenized, then refused by the exact token count (8192 here)
        assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded", response.text
        return
    assert response.status_code == 200, response.text
    assert response.json()["num_tokens"] > 0 and "\ufffd" in response.json()["rendered"] or "lone" not in text


def test_a_body_over_the_limit_is_413_before_authentication(server):
    big = b'{"model": "default", "messages": [' + b" " * (5 * 1024 * 1024) + b"]}"
    declared = requests.post(f"{server}/v1/chat/completions", data=big, timeout=60)
    chunked = requests.post(f"{server}/v1/chat/completions", data=iter([big[i:i + 65536] for i in range(0, len(big), 65536)]),
                            timeout=60)
    for response in (declared, chunked):
        assert response.status_code == 413
        assert_openai_error(response)
        assert response.json()["error"]["code"] == "request_too_large"


@pytest.mark.parametrize("fields, param, code", [
    ({"messages": [{"role": "user", "content": "hi"}] * 1025}, "messages", "too_many_items"),
    ({"stop": ["x" * 257]}, "stop", "stop_too_long"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", None),
    ({"seed": 2**70}, "seed", "invalid_seed"),
    ({"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]}, "tools", "too_many_items"),
    ({"context": ["doc"] * 257}, "context", "too_many_items"),
    ({"messages": [{"role": "user", "content": "x" * 1_000_001}]}, "messages[0].content", "string_too_long"),
])
def test_each_limit_is_a_400_naming_its_field(server, fields, param, code):
    response = httpx.post(f"{server}/v1/chat/completions", json=chat_body(**fields), headers=new_tenant(server), timeout=60)
    assert response.status_code == 400, response.text
    assert_openai_error(response)
    error = response.json()["error"]
    assert error["param"] == param and (code is None or error["code"] == code), error


def test_pin_ttl_over_the_limit_is_a_400_and_leaves_no_pin(server):
    headers = new_tenant(server)
    response = httpx.post(f"{server}/v1/pins", json={"system": "S " * 40, "ttl_seconds": 10**12}, headers=headers, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["param"] == "ttl_seconds", response.text
    assert httpx.get(f"{server}/v1/pins", headers=headers).json()["data"] == []
