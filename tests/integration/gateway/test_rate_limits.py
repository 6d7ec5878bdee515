"""Per-tenant requests- and tokens-per-minute, read back by the real `openai` client: every answer
carries OpenAI's x-ratelimit-* headers, the request past a limit is a 429 with retry-after (the
openai client raises RateLimitError), the tenant's own limit (admin API) wins over the settings'
default, and another tenant is not affected."""

from __future__ import annotations

import openai
import pytest
from fastapi.testclient import TestClient

from gateway.main import create_app
from tests.support.app import QUESTION, admin_headers, create_tenant, make_settings

pytestmark = pytest.mark.slow

HEADERS = ("x-ratelimit-limit-requests", "x-ratelimit-limit-tokens", "x-ratelimit-remaining-requests",
           "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")


def openai_client(test_client: TestClient, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url="http://testserver/v1", http_client=test_client, max_retries=0)


def ask(client: openai.OpenAI, stream: bool = False):
    messages = [{"role": "user", "content": QUESTION}]
    if stream:
        return client.chat.completions.with_raw_response.create(
            model="default", messages=messages, max_tokens=4, temperature=0, stream=True)
    return client.chat.completions.with_raw_response.create(model="default", messages=messages, max_tokens=4, temperature=0)


def test_rate_limit_headers_and_429_through_the_openai_client(tmp_path, engine):
    settings = make_settings(tmp_path, default_tenant_requests_per_minute=1000, default_tenant_tokens_per_minute=100_000)
    with TestClient(create_app(settings, engine=engine)) as test_client:
        limited = create_tenant(test_client, "limited", requests_per_minute=2)
        other = create_tenant(test_client, "other")
        client = openai_client(test_client, limited["key"])

        first = ask(client)
        assert first.parse().choices[0].message.content
        assert {name: first.headers[name] for name in HEADERS[:3:2]} == {
            "x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "1"}
        assert first.headers["x-ratelimit-limit-tokens"] == "100000"
        assert int(first.headers["x-ratelimit-remaining-tokens"]) < 100_000
        streamed = ask(client, stream=True)
        assert all(name in streamed.headers for name in HEADERS)
        assert streamed.headers["x-ratelimit-remaining-requests"] == "0"
        assert [chunk for chunk in streamed.parse()]

        with pytest.raises(openai.RateLimitError) as refused:
            ask(client)
        response = refused.value.response
        assert refused.value.code == "rate_limit_exceeded"
        assert int(response.headers["retry-after"]) >= 1
        assert response.headers["x-ratelimit-remaining-requests"] == "0"
        assert "requests-per-minute" in refused.value.message

        other_answer = ask(openai_client(test_client, other["key"]))
        assert other_answer.headers["x-ratelimit-limit-requests"] == "1000"

        raised = test_client.patch("/admin/tenants/limited", json={"requests_per_minute": 50}, headers=admin_headers())
        assert raised.status_code == 200 and raised.json()["requests_per_minute"] == 50
        assert ask(client).headers["x-ratelimit-limit-requests"] == "50"


def test_a_request_larger_than_the_token_limit_is_refused_before_the_engine(tmp_path, engine):
    with TestClient(create_app(make_settings(tmp_path), engine=engine)) as test_client:
        tenant = create_tenant(test_client, "tiny", tokens_per_minute=20)
        num_finished = engine.stats()["num_finished"]
        with pytest.raises(openai.RateLimitError) as refused:
            ask(openai_client(test_client, tenant["key"]))
        assert "tokens-per-minute" in refused.value.message
        assert refused.value.response.headers["x-ratelimit-limit-tokens"] == "20"
        assert engine.stats()["num_finished"] == num_finished
