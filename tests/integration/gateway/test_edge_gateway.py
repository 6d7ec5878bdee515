"""An edge gateway (no embedded engine) in front of two real OpenAI-compatible servers on loopback.

The servers are tiny ones (tests/support/tiny_openai.py) so each test can make a node fail at a
chosen point; the gateway, litellm, the tokenizer (the default model's own files) and the database
are the real ones. Shown here: chats, canonicalize and the request log work without an engine;
tenants' cache salts (per tenant, shared in a cache group, never the client's); remote cached
tokens logged (NULL when unknown) beside the predicted hit; failover before the first token,
streams included; an error event after it; no upstream text, name or URL reaching a tenant.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from gateway.main import create_app
from tests.support.app import admin_headers, chat_body, create_tenant, make_settings, sse_payloads, wait_for_log_rows
from tests.support.tiny_openai import UPSTREAM_SECRET, TinyOpenAI

pytestmark = pytest.mark.slow  # the tokenizer comes from the default model's cached files


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[TinyOpenAI]]:
    with TinyOpenAI("a") as a, TinyOpenAI("b") as b:
        yield [a, b]


@pytest.fixture()
def edge(tmp_path, nodes) -> Iterator[TestClient]:
    yield from edge_client(tmp_path, nodes, "vllm")


def edge_client(tmp_path, nodes, kind: str) -> Iterator[TestClient]:
    for node in nodes:
        node.mode, node.received[:] = "ok", []
    remotes = [{"name": n.name, "model": "tiny", "api_base": n.url, "kind": kind, "cooldown_s": 60} for n in nodes]
    settings = make_settings(tmp_path, engine={"enabled": False}, remotes=remotes, routing={"health_interval_s": 0})
    with TestClient(create_app(settings)) as client:
        yield client


def received(nodes) -> list[dict]:
    """Every body the nodes received, in arrival order."""
    return sorted((body for node in nodes for body in node.received), key=lambda b: b["_arrival"])


def chat(edge, tenant, **fields):
    return edge.post("/v1/chat/completions", json=chat_body(**fields), headers=tenant["headers"])


def stream_payloads(edge, tenant, **fields) -> list:
    body = chat_body(stream=True, stream_options={"include_usage": True}, **fields)
    with edge.stream("POST", "/v1/chat/completions", json=body, headers=tenant["headers"]) as response:
        assert response.status_code == 200
        return sse_payloads(response.iter_lines())


def test_edge_serves_chat_canonicalize_and_logs_without_an_engine(edge, nodes):
    tenant = create_tenant(edge, "acme")
    assert edge.app.state.gw.engine is None
    for _ in range(2):
        response = chat(edge, tenant)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "hello world"
    preview = edge.post("/v1/canonicalize", json=chat_body(), headers=tenant["headers"])
    assert preview.status_code == 200 and preview.json()["num_tokens"] > 10
    rows = wait_for_log_rows(edge.app.state.gw, 2)
    assert rows[0].backend in ("a", "b") and rows[1].backend == rows[0].backend  # same prefix, same node
    assert [r.cached_tokens for r in rows] == [16, 16]  # vLLM takes the salt: its figure is trusted
    assert rows[0].predicted_cached_tokens == 0 and rows[1].predicted_cached_tokens > 0
    assert rows[0].prompt_tokens == 20 and rows[0].failovers == 0
    assert len(received(nodes)) == 2


def test_cache_salts_per_tenant_shared_in_a_group_never_from_the_client(edge, nodes):
    tenants = [create_tenant(edge, "solo-1"), create_tenant(edge, "solo-2"),
               create_tenant(edge, "team-1", cache_group="team"), create_tenant(edge, "team-2", cache_group="team")]
    for tenant in tenants:
        assert chat(edge, tenant).status_code == 200
    assert chat(edge, tenants[0], cache_salt="client-chosen-salt").status_code == 200
    salts = [body["cache_salt"] for body in received(nodes)]
    assert len(salts) == 5 and all(len(salt) == 64 for salt in salts)
    solo_1, solo_2, team_1, team_2, solo_1_with_client_salt = salts
    assert solo_1 != solo_2 and team_1 == team_2 and team_1 not in (solo_1, solo_2)
    assert "client-chosen-salt" not in salts and solo_1_with_client_salt not in (solo_2, team_1)


def test_remote_without_salt_logs_cached_tokens_as_unknown(tmp_path, nodes):
    for edge in edge_client(tmp_path, nodes, "openai"):
        tenant = create_tenant(edge, "plain")
        response = chat(edge, tenant)
        assert response.status_code == 200
        assert response.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert "cache_salt" not in received(nodes)[-1]
        assert wait_for_log_rows(edge.app.state.gw, 1)[0].cached_tokens is None


def test_a_node_failing_mid_stream_before_its_first_token_is_retried_on_the_other(edge, nodes):
    tenant = create_tenant(edge, "failover")
    nodes[0].mode = "fail_before"
    answers = []
    for i in range(6):  # distinct prefixes: some rank node a first until it is marked down
        payloads = stream_payloads(edge, tenant, messages=[{"role": "system", "content": f"System {i}."},
                                                           {"role": "user", "content": "Hi"}])
        assert payloads[-1] == "[DONE]" and not any("error" in p for p in payloads[:-1])
        answers.append("".join(p["choices"][0]["delta"].get("content") or "" for p in payloads[:-1] if p["choices"]))
    assert answers == ["hello world"] * 6
    rows = wait_for_log_rows(edge.app.state.gw, 6)
    assert all(r.status == "ok" and r.backend == "b" for r in rows)
    assert sum(r.failovers for r in rows) == 1 == len(nodes[0].received)
    states = {b["name"]: b["state"] for b in edge.get("/admin/backends", headers=admin_headers()).json()["backends"]}
    assert states == {"a": "down", "b": "up"}


def test_after_the_first_token_the_stream_ends_with_our_error_event(edge, nodes):
    tenant = create_tenant(edge, "midway")
    for node in nodes:
        node.mode = "fail_after"
    payloads = stream_payloads(edge, tenant)
    assert payloads[-1] == "[DONE]" and "error" in payloads[-2]
    assert any(p["choices"] and p["choices"][0]["delta"].get("content") == "hello" for p in payloads[:-2])
    assert_no_upstream_detail(payloads[-2]["error"]["message"], nodes)
    assert len(received(nodes)) == 1  # output had reached the client: no retry
    row = wait_for_log_rows(edge.app.state.gw, 1)[0]
    assert row.status == "error" and row.error_code == "backend_stream_failed"


def test_every_node_failing_is_a_503_with_our_own_message(edge, nodes):
    tenant = create_tenant(edge, "doomed")
    for node in nodes:
        node.mode = "error_500"
    response = chat(edge, tenant)
    assert response.status_code == 503
    assert_no_upstream_detail(response.text, nodes)
    assert len(received(nodes)) == 2  # tried once, retried once elsewhere
    row = wait_for_log_rows(edge.app.state.gw, 1)[0]
    assert row.status == "error" and row.failovers == 1
    again = chat(edge, tenant)  # both cooling down: refused at once, still ours
    assert again.status_code == 503 and len(received(nodes)) == 2
    assert_no_upstream_detail(again.text, nodes)


def assert_no_upstream_detail(text: str, nodes) -> None:
    assert UPSTREAM_SECRET not in text and "127.0.0.1" not in text
    assert not any(str(node.port) in text for node in nodes)


def test_every_turn_of_a_responses_conversation_goes_to_the_node_of_its_first_turn(edge, nodes):
    """Each turn has its own instructions (Responses does not carry them over), so its static prefix,
    the key without a chain, differs from turn to turn; the conversation is the key instead."""
    tenant = create_tenant(edge, "chains")
    conversations = []
    for c in range(10):
        previous, ids = None, []
        for turn in range(3):
            body = {"model": "default", "input": f"question {turn}", "max_output_tokens": 4,
                    "instructions": f"You are assistant number {c * 10 + turn}. " + "Answer briefly. " * 8}
            if previous:
                body["previous_response_id"] = previous
            response = edge.post("/v1/responses", json=body, headers=tenant["headers"])
            assert response.status_code == 200, response.text
            previous = response.json()["id"]
            ids.append(previous)
        conversations.append(ids)
    rows = {str(r.id): r for r in wait_for_log_rows(edge.app.state.gw, 30)}
    by_id = {row_id.replace("-", ""): row for row_id, row in rows.items()}
    placed = [[by_id[i.removeprefix("resp_")].backend for i in ids] for ids in conversations]
    assert all(len(set(backends)) == 1 for backends in placed), placed
    assert {backends[0] for backends in placed} == {"a", "b"}, placed  # the key is each conversation's, not one
