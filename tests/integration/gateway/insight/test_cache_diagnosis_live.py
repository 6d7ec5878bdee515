"""Cache diagnosis through the full request path: the real engine and model, one change per test, and the
reason the x-radixgate-cache-diagnosis header (and the asked-for field) reports is the true one."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from tests.support.app import create_tenant, make_client, wait_for_log_rows

pytestmark = pytest.mark.slow

SYSTEM = (
    "You are the support assistant of the Lindenwood public library. Answer questions about opening hours, "
    "borrowing rules, fines, room bookings and the catalogue. Keep answers short and friendly. Refer people "
    "to the front desk for anything about their personal account. The library lends books for three weeks, "
    "films for one week and board games for two weeks; each loan can be renewed twice unless someone else "
    "reserved the item. Study rooms can be booked up to seven days ahead for at most three hours a day."
)
TOOLS = [
    {"type": "function", "function": {"name": "search_catalogue", "description": "Search the catalogue by title.",
                                      "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "book_room", "description": "Book a study room.",
                                      "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}}},
]
HISTORY = [
    {"role": "user", "content": "Hello, I would like to ask about loans and about the rooms on the first floor."},
    {"role": "assistant", "content": "Of course. What would you like to know about loans or the study rooms?"},
    {"role": "user", "content": "How long can I keep a film, and can I renew it if nobody reserved it?"},
    {"role": "assistant", "content": "Films are lent for one week and can be renewed twice."},
]


@pytest.fixture(scope="module")
def client(tmp_path_factory, shared_engine) -> Iterator:
    with make_client(tmp_path_factory.mktemp("diagnosis"), shared_engine) as test_client:
        yield test_client


@pytest.fixture()
def tenant(client, request):
    return create_tenant(client, request.node.name[:60])


def body(question: str, *, system: str = SYSTEM, tools=TOOLS, history=(), **fields) -> dict:
    messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    return {"model": "default", "messages": messages, "tools": tools, "max_tokens": 2, "temperature": 0, **fields}


def send(client, tenant, payload: dict) -> tuple[dict, dict]:
    """(the diagnosis header as JSON, the response body)."""
    response = client.post("/v1/chat/completions", json=payload, headers=tenant["headers"])
    assert response.status_code == 200, response.text
    return json.loads(response.headers["x-radixgate-cache-diagnosis"]), response.json()


def first_then(client, tenant, first: dict, second: dict) -> dict:
    send(client, tenant, first)
    diagnosis, _ = send(client, tenant, second)
    return diagnosis


def test_first_request_is_a_cold_start_and_the_next_question_reuses_the_prefix(client, tenant):
    cold, _ = send(client, tenant, body("When do you open on Saturdays?"))
    assert cold["reason"] == "cold_start" and cold["is_miss"]
    hit, answer = send(client, tenant, body("Can I bring my dog?"))
    assert hit["reason"] == "hit" and not hit["is_miss"] and hit["missed_tokens"] == 0
    cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert hit["cached_tokens"] == cached >= hit["expected_cached_tokens"] > 0


def test_a_changed_tool_is_tools_changed_in_the_header_and_the_request_log(client, tenant):
    renamed = [TOOLS[0], {**TOOLS[1], "function": {**TOOLS[1]["function"], "description": "Reserve a study room."}}]
    diagnosis = first_then(client, tenant, body("Opening hours?"), body("Opening hours?", tools=renamed))
    assert diagnosis["reason"] == "tools_changed" and diagnosis["section"] == "tools" and diagnosis["missed_tokens"] > 0
    rows = [row for row in wait_for_log_rows(client.app.state.gw, 1) if row.tenant_id == tenant["id"]]
    deadline = time.monotonic() + 10
    while len(rows) < 2 and time.monotonic() < deadline:
        rows = [row for row in wait_for_log_rows(client.app.state.gw, 1) if row.tenant_id == tenant["id"]]
    assert [row.miss_cause for row in rows] == ["cold_start", "tools_changed"]  # the doctor's and dashboard's source


def test_a_changed_system_prompt_is_system_changed(client, tenant):
    other = SYSTEM.replace("Keep answers short and friendly.", "Keep answers formal.")
    diagnosis = first_then(client, tenant, body("Opening hours?"), body("Opening hours?", system=other))
    assert diagnosis["reason"] == "system_changed" and diagnosis["section"] == "system"


def test_an_edited_middle_message_is_messages_changed(client, tenant):
    edited = [*HISTORY[:2], {"role": "user", "content": "How long can I keep a board game?"}, HISTORY[3]]
    diagnosis = first_then(client, tenant, body("And books?", history=HISTORY), body("And books?", history=edited))
    assert diagnosis["reason"] == "messages_changed" and diagnosis["section"] == "history"
    assert 0 < diagnosis["expected_cached_tokens"] < diagnosis["reusable_tokens"]


def test_a_date_inserted_in_a_middle_message_is_dynamic_content(client, tenant):
    dated = [{"role": "user", "content": HISTORY[0]["content"] + " Today is 2026-12-07."}, *HISTORY[1:]]
    diagnosis = first_then(client, tenant, body("And books?", history=HISTORY), body("And books?", history=dated))
    assert diagnosis["reason"] == "dynamic_content" and diagnosis["section"] == "history" and diagnosis["is_miss"]


def test_a_date_in_the_raw_system_prompt_is_dynamic_content_and_a_miss(client, tenant):
    dated = SYSTEM + " Today is Monday, December 7, 2026."
    first = body("Opening hours?", system=SYSTEM + " Today is Sunday, December 6, 2026.", canonicalize=False)
    diagnosis = first_then(client, tenant, first, body("Opening hours?", system=dated, canonicalize=False))
    assert diagnosis["reason"] == "dynamic_content" and diagnosis["section"] == "system" and diagnosis["is_miss"]


def test_a_date_in_the_canonicalized_system_prompt_is_hoisted_and_no_miss(client, tenant):
    dated = SYSTEM + " Today is Monday, December 7, 2026."
    diagnosis = first_then(client, tenant, body("Opening hours?"), body("Opening hours?", system=dated))
    assert diagnosis["reason"] == "dynamic_content" and not diagnosis["is_miss"] and diagnosis["missed_tokens"] == 0


def test_reordered_raw_tools_are_section_order(client, tenant):
    first = body("Opening hours?", canonicalize=False)
    diagnosis = first_then(client, tenant, first, body("Opening hours?", tools=TOOLS[::-1], canonicalize=False))
    assert diagnosis["reason"] == "section_order" and diagnosis["section"] == "tools" and diagnosis["is_miss"]


def test_a_reorder_the_canonicalizer_fixes_is_section_order_without_a_miss(client, tenant):
    diagnosis = first_then(client, tenant, body("Opening hours?"), body("Opening hours?", tools=TOOLS[::-1]))
    assert diagnosis["reason"] == "section_order" and not diagnosis["is_miss"]


def test_an_evicted_prefix_is_evicted(client, tenant, shared_engine):
    send(client, tenant, body("Opening hours?"))
    shared_engine.flush_cache()
    diagnosis, answer = send(client, tenant, body("Can I bring my dog?"))
    assert diagnosis["reason"] == "evicted" and diagnosis["is_miss"]
    assert diagnosis["cached_tokens"] == answer["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert diagnosis["cached_tokens"] < diagnosis["expected_cached_tokens"]


def test_another_cache_salt_is_another_cache_domain(client, tenant):
    first = body("Opening hours?", cache_salt="team-a")
    diagnosis = first_then(client, tenant, first, body("Opening hours?", cache_salt="team-b"))
    assert diagnosis["reason"] == "cache_domain" and diagnosis["is_miss"]


def test_chat_field_and_responses_field_when_a_comparison_response_is_named(client, tenant):
    _, first = send(client, tenant, body("Opening hours?"))
    asked = body("Opening hours?", system=SYSTEM + " Never mention fines.",
                 prompt_cache_options={"comparison_response_id": first["id"]})
    _, second = send(client, tenant, asked)
    field = second["prompt_cache_diagnostics"]
    assert field["type"] == "cache_miss" and field["reason"] == "input_changed"
    assert field["radixgate"]["reason"] == "system_changed" and field["cache_missed_tokens"] > 0
    responses = {"model": "default", "instructions": SYSTEM, "input": "Opening hours?", "max_output_tokens": 2,
                 "prompt_cache_options": {"comparison_response_id": "resp_" + "0" * 32}}
    unknown = client.post("/v1/responses", json=responses, headers=tenant["headers"])
    assert unknown.status_code == 200, unknown.text
    assert unknown.json()["prompt_cache_diagnostics"]["type"] == "comparison_response_not_found"
    named = {**responses, "prompt_cache_options": {"comparison_response_id": unknown.json()["id"]}}
    again = client.post("/v1/responses", json=named, headers=tenant["headers"])
    assert again.json()["prompt_cache_diagnostics"]["type"] == "cache_hit"
    assert json.loads(again.headers["x-radixgate-cache-diagnosis"])["previous_id"] == unknown.json()["id"]


def test_a_stream_carries_the_diagnosis_known_before_its_first_byte(client, tenant):
    send(client, tenant, body("Opening hours?"))
    payload = body("Opening hours?", system=SYSTEM + " Never mention fines.", stream=True)
    with client.stream("POST", "/v1/chat/completions", json=payload, headers=tenant["headers"]) as response:
        assert response.status_code == 200
        diagnosis = json.loads(response.headers["x-radixgate-cache-diagnosis"])
        response.read()
    assert diagnosis["reason"] == "system_changed" and diagnosis["cached_tokens"] is None
