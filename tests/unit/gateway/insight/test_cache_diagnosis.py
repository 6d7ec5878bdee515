"""The cache diagnosis on fingerprints (no model): classify, the store's choice of the previous request,
and the three renderings (header, OpenAI's prompt_cache_diagnostics, Anthropic's diagnostics)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gateway.insight.cache_diagnosis import NOT_A_MISS, REASONS, CacheDiagnosis, classify
from gateway.insight.diagnosis_render import (
    anthropic_diagnostics,
    header_value,
    openai_prompt_cache_diagnostics,
    requested_comparison,
)
from gateway.insight.diagnosis_store import DiagnosisStore
from gateway.insight.prompt_fingerprint import PromptFingerprint, common_pages, page_chain

PAGE = 4
SECTIONS = {"system": "s1", "tools": "t1", "context": "c0", "history": "h0", "dynamic": "d0", "question": "q1",
            "static_system": "s1", "static_context": "c0"}


def fp(ids, *, response_id="r1", tenant_id=1, domain="tenant:1|m", model="m", template="agent@None", boundary=None,
       history=(), question=("q", "q"), order=("o", "o"), route_key=None, **sections) -> PromptFingerprint:
    return PromptFingerprint(
        response_id=response_id, tenant_id=tenant_id, domain=domain, model=model, template=template,
        num_tokens=len(ids), boundary=len(ids) if boundary is None else boundary,
        served_pages=page_chain(ids, PAGE), sections={**SECTIONS, **sections}, history=tuple(history),
        question=question, order=order, route_key=route_key,
    )


STATIC = list(range(100, 124))  # 6 pages
PREVIOUS = fp([*STATIC, 1, 2, 3, 4, 5], boundary=24)


def test_page_chain_shares_exactly_the_equal_leading_pages():
    left, right = page_chain(list(range(20)), 4), page_chain([*range(9), 99, *range(10, 20)], 4)
    assert len(left) == 5 and common_pages(left, right) == 2 and common_pages(left, left) == 5


def test_no_previous_is_a_cold_start_and_an_unknown_named_one_is_not_found():
    assert classify(None, PREVIOUS, page_size=PAGE).reason == "cold_start"
    missing = classify(None, PREVIOUS, page_size=PAGE, named_previous="msg_x")
    assert missing.reason == "previous_not_found" and not missing.is_miss


def test_a_new_question_after_the_same_prefix_is_a_hit_with_the_static_tokens_expected():
    current = fp([*STATIC, 9, 9, 9, 9, 9], response_id="r2", question=("q2", "q2"))
    diagnosis = classify(PREVIOUS, current, page_size=PAGE)
    assert (diagnosis.reason, diagnosis.is_miss) == ("hit", False)
    assert diagnosis.expected_cached_tokens == diagnosis.reusable_tokens == 24


def test_the_engine_reading_less_than_expected_is_eviction():
    current = fp([*STATIC, 9, 9, 9, 9, 9], response_id="r2")
    diagnosis = classify(PREVIOUS, current, page_size=PAGE).with_cached(8)
    assert diagnosis.reason == "evicted" and diagnosis.is_miss and diagnosis.missed_tokens == 16
    assert classify(PREVIOUS, current, page_size=PAGE).with_cached(24).reason == "hit"


@pytest.mark.parametrize("change, reason, section", [
    ({"model": "other"}, "model_changed", None),
    ({"domain": "tenant:1|m|salt:x"}, "cache_domain", None),
    ({"template": "rag@None"}, "template_changed", "system"),
    ({"system": "s2", "static_system": "s2"}, "system_changed", "system"),
    ({"tools": "t2"}, "tools_changed", "tools"),
    ({"context": "c2", "static_context": "c2"}, "messages_changed", "context"),
    ({"context": "c2"}, "dynamic_content", "context"),  # the documents differ only in dynamic sentences
])
def test_the_first_differing_part_names_the_reason(change, reason, section):
    ids = [*STATIC[:8], 7, *STATIC[9:], 9]  # the tokens diverge in page 2
    current = replace(fp(ids, response_id="r2"), **{k: v for k, v in change.items() if k in ("model", "domain", "template")})
    current = replace(current, sections={**current.sections, **{k: v for k, v in change.items() if k in SECTIONS}})
    diagnosis = classify(PREVIOUS, current, page_size=PAGE)
    assert (diagnosis.reason, diagnosis.section, diagnosis.is_miss) == (reason, section, True)
    assert diagnosis.expected_cached_tokens == 8 and diagnosis.missed_tokens == 16


def test_history_appended_is_no_change_but_an_edited_or_dated_message_is():
    previous = replace(PREVIOUS, history=(("a", "a"), ("b", "b")))
    appended = fp([*STATIC, 8], response_id="r2", history=[("a", "a"), ("b", "b"), ("q", "q"), ("x", "x")])
    assert classify(previous, appended, page_size=PAGE).reason == "hit"
    edited = fp([*STATIC, 8], response_id="r2", history=[("a", "a"), ("b2", "b2")])
    assert classify(previous, edited, page_size=PAGE).reason == "messages_changed"
    dated = fp([*STATIC, 8], response_id="r2", history=[("a", "a"), ("b3", "b")])
    assert classify(previous, dated, page_size=PAGE).reason == "dynamic_content"


def test_raw_order_and_hoisted_dynamic_content_break_a_raw_prompt_but_not_a_canonical_one():
    raw_previous = replace(PREVIOUS, template=None)
    moved = fp([*STATIC[:4], 5, *STATIC[5:], 9], response_id="r2", template=None, order=("o2", "o"))
    order = classify(raw_previous, moved, page_size=PAGE)
    assert (order.reason, order.section, order.is_miss) == ("section_order", "tools", True)
    dated = replace(moved, order=("o", "o"), sections={**SECTIONS, "dynamic": "d2"})
    assert classify(raw_previous, dated, page_size=PAGE).reason == "dynamic_content"
    canonical = fp([*STATIC, 9], response_id="r2", order=("o", "o2"))
    fixed = classify(PREVIOUS, canonical, page_size=PAGE)
    assert (fixed.reason, fixed.section, fixed.is_miss) == ("section_order", "history", False)


def test_the_store_compares_with_the_same_tenants_requests_only():
    store = DiagnosisStore(PAGE, max_records=8)
    store.remember(PREVIOUS)
    other_tenant = fp([*STATIC, 9], response_id="r9", tenant_id=2, domain="tenant:2|m")
    assert store.diagnose(other_tenant).reason == "cold_start"
    assert store.diagnose(other_tenant, "r1").reason == "previous_not_found"
    other_model = fp([*STATIC, 9], response_id="r2", domain="tenant:1|m2", model="m2")
    assert store.diagnose(other_model).reason == "model_changed"
    store.remember(other_model)
    same_domain = fp([*STATIC, 9], response_id="r3")
    assert store.diagnose(same_domain).previous_id == "r1"  # the caller's last in this domain, not the tenant's last
    assert store.diagnose(same_domain, "r2").reason == "model_changed"


def test_the_store_is_bounded():
    store = DiagnosisStore(PAGE, max_records=2)
    for index in range(4):
        store.remember(fp(STATIC, response_id=f"r{index}", tenant_id=index, domain=f"tenant:{index}|m"))
    assert store.diagnose(fp(STATIC, response_id="x", tenant_id=0, domain="tenant:0|m"), "r0").reason == "previous_not_found"
    assert store.diagnose(fp(STATIC, response_id="x", tenant_id=3, domain="tenant:3|m")).previous_id == "r3"


def diagnosis(reason: str, *, section=None, is_miss=True) -> CacheDiagnosis:
    return CacheDiagnosis(reason, section, 64, 256, is_miss, "msg_prev", cached_tokens=64)


def test_header_is_one_line_of_json_with_every_figure():
    value = header_value(diagnosis("tools_changed", section="tools"))
    decoded = json.loads(value)
    assert "\n" not in value and decoded["reason"] == "tools_changed" and decoded["missed_tokens"] == 192
    assert set(REASONS) >= {"hit", "cold_start", "evicted", "cache_domain", "dynamic_content", "section_order"}


@pytest.mark.parametrize("reason, section, expected", [
    ("model_changed", None, "model_changed"),
    ("system_changed", "system", "system_changed"),
    ("tools_changed", "tools", "tools_changed"),
    ("messages_changed", "history", "messages_changed"),
    ("dynamic_content", "system", "system_changed"),
    ("dynamic_content", "history", "messages_changed"),
    ("section_order", "tools", "tools_changed"),
])
def test_anthropic_shape_names_where_the_prompts_diverged(reason, section, expected):
    shaped = anthropic_diagnostics(diagnosis(reason, section=section), "msg_prev")
    assert shaped["cache_miss_reason"] == {"type": expected, "cache_missed_input_tokens": 192}
    assert shaped["radixgate"]["reason"] == reason


def test_anthropic_shape_is_null_without_a_previous_message_or_a_divergence():
    assert anthropic_diagnostics(diagnosis("cold_start"), None) is None
    assert anthropic_diagnostics(diagnosis("hit", is_miss=False), "msg_prev") is None
    assert anthropic_diagnostics(diagnosis("section_order", is_miss=False), "msg_prev") is None
    not_found = anthropic_diagnostics(diagnosis("previous_not_found", is_miss=False), "msg_gone")
    assert not_found["cache_miss_reason"] == {"type": "previous_message_not_found"}
    for radixgate_only in ("evicted", "cache_domain"):
        shaped = anthropic_diagnostics(diagnosis(radixgate_only), "msg_prev")
        assert shaped["cache_miss_reason"] == {"type": "unavailable"} and shaped["radixgate"]["reason"] == radixgate_only


def test_openai_shape():
    miss = openai_prompt_cache_diagnostics(diagnosis("system_changed", section="system"))
    assert (miss["type"], miss["reason"], miss["cache_missed_tokens"], miss["comparison_reusable_tokens"]) == (
        "cache_miss", "input_changed", 192, 256)
    assert openai_prompt_cache_diagnostics(diagnosis("cache_domain"))["reason"] == "prompt_cache_key_changed"
    assert openai_prompt_cache_diagnostics(diagnosis("hit", is_miss=False))["type"] == "cache_hit"
    gone = openai_prompt_cache_diagnostics(diagnosis("previous_not_found", is_miss=False))
    assert gone["type"] == "comparison_response_not_found"
    assert requested_comparison({"prompt_cache_options": {"comparison_response_id": "resp_1"}}) == "resp_1"
    assert requested_comparison({"prompt_cache_options": "x"}) is None and requested_comparison(None) is None


def test_the_doctor_and_the_request_log_speak_the_diagnosis_vocabulary():
    from gateway.doctor.fixes import DIAGNOSIS_REASONS, TITLES

    assert set(DIAGNOSIS_REASONS) == set(TITLES) and set(DIAGNOSIS_REASONS.values()) <= set(REASONS)
    for reason in set(REASONS) - set(NOT_A_MISS):  # these two are never a miss
        logged = diagnosis(reason).log_reason
        assert logged == reason and len(logged) <= 16  # RequestLog.miss_cause is String(16)
    assert diagnosis("hit", is_miss=False).log_reason is None
    assert classify(None, PREVIOUS, page_size=PAGE, named_previous="gone").log_reason is None


def test_the_store_prefers_the_same_session_then_the_domain():
    store = DiagnosisStore(PAGE)
    store.remember(replace(PREVIOUS, route_key="session-a"))
    store.remember(fp([*STATIC, 7], response_id="r2", route_key="session-b"))
    assert store.diagnose(fp(STATIC, response_id="r3", route_key="session-a")).previous_id == "r1"
    assert store.diagnose(fp(STATIC, response_id="r4", route_key="session-c")).previous_id == "r2"
