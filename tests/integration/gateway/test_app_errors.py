"""Error paths of the chat API in-process: every error is OpenAI-shaped with the right status code."""

from __future__ import annotations

import pytest
from tests.support.app import chat_body, create_tenant, make_client

pytestmark = pytest.mark.slow

ERROR_FIELDS = {"message", "type", "param", "code"}


@pytest.fixture()
def client(tmp_path, shared_engine):
    with make_client(tmp_path, shared_engine) as test_client:
        yield test_client


@pytest.fixture()
def tenant(client) -> dict:
    return create_tenant(client, "acme")


def assert_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == ERROR_FIELDS
    if code is not None:
        assert error["code"] == code
    return error


def test_bad_or_missing_key_is_401(client):
    assert_error(client.post("/v1/chat/completions", json=chat_body()), 401, "invalid_api_key")
    bad = client.post("/v1/chat/completions", json=chat_body(), headers={"Authorization": "Bearer sk-nope"})
    assert_error(bad, 401, "invalid_api_key")


def test_n_greater_than_one_is_a_clear_400(client, tenant):
    error = assert_error(client.post("/v1/chat/completions", json=chat_body(n=2), headers=tenant["headers"]), 400)
    assert error["param"] == "n" and "n > 1" in error["message"]


def test_malformed_bodies_are_400(client, tenant):
    headers = tenant["headers"]
    assert_error(client.post("/v1/chat/completions", json={"model": "default"}, headers=headers), 400)
    assert_error(client.post("/v1/chat/completions", json=chat_body(temperature=5), headers=headers), 400)
    bad_role = {"model": "default", "messages": [{"role": "wizard", "content": "hi"}]}
    assert_error(client.post("/v1/chat/completions", json=bad_role, headers=headers), 400)
    not_json = client.post("/v1/chat/completions", content=b"{", headers={**headers, "content-type": "application/json"})
    assert_error(not_json, 400)


def test_unknown_template_is_400(client, tenant):
    response = client.post("/v1/chat/completions", json=chat_body(template="no-such-template"), headers=tenant["headers"])
    error = assert_error(response, 400, "template_not_found")
    assert error["param"] == "template"


def test_prompt_longer_than_the_context_is_400(client, tenant, shared_engine):
    long_question = "word " * (shared_engine.max_context + 100)
    response = client.post("/v1/chat/completions", json=chat_body(long_question), headers=tenant["headers"])
    assert_error(response, 400, "context_length_exceeded")


def test_unknown_model_and_unknown_route_are_404(client, tenant):
    assert_error(client.post("/v1/chat/completions", json=chat_body(model="gpt-9"), headers=tenant["headers"]), 404)
    assert_error(client.get("/v1/nothing-here", headers=tenant["headers"]), 404)


def test_tenant_over_its_concurrency_limit_gets_429_and_recovers(client):
    tenant = create_tenant(client, "limited", max_concurrency=1)
    limits = client.app.state.gw.tenant_limits
    assert limits.try_acquire(tenant["id"], 1)  # one request of this tenant is in flight
    try:
        response = client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"])
        assert_error(response, 429, "rate_limit_exceeded")
        assert response.headers["retry-after"]
    finally:
        limits.release(tenant["id"])
    assert client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"]).status_code == 200
    assert limits.num_active(tenant["id"]) == 0


def test_full_engine_queue_is_503_with_retry_after(tmp_path, shared_engine):
    from engine import Engine, EngineConfig, SamplingParams

    # A second, never-started engine over the same weights: its waiting queue only fills.
    stalled = Engine(EngineConfig(max_queue=1, kv_cache_tokens=4096), runner=shared_engine.runner)
    stalled.submit([1, 2, 3], SamplingParams(max_tokens=1), lambda output: None)
    with make_client(tmp_path, stalled) as client:
        tenant = create_tenant(client, "acme")
        response = client.post("/v1/chat/completions", json=chat_body(), headers=tenant["headers"])
        assert_error(response, 503, "overloaded")
        assert int(response.headers["retry-after"]) >= 1
        streamed = client.post("/v1/chat/completions", json=chat_body(stream=True), headers=tenant["headers"])
        assert_error(streamed, 503, "overloaded")
        assert client.app.state.gw.tenant_limits.num_active(tenant["id"]) == 0


def test_malformed_context_is_400_and_the_app_keeps_serving(client, tenant):
    headers = tenant["headers"]
    for bad in (chat_body(context=[{"id": "d1"}]), chat_body(context=[7]), chat_body(tools=[{"type": "function"}])):
        assert_error(client.post("/v1/chat/completions", json=bad, headers=headers), 400)
    assert client.post("/v1/chat/completions", json=chat_body(max_tokens=2), headers=headers).status_code == 200
