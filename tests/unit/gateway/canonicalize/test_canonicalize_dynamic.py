"""Dynamic-content rules: what is hoisted, what stays, and how tenants extend them."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from gateway.canonicalize import DynamicRules, normalize_whitespace


@pytest.mark.parametrize("sentence, rule", [
    ("Current time: 2026-11-02T09:00:00Z.", "iso_datetime"),
    ("Generated 2026-11-02 14:03.", "iso_datetime"),
    ("Date: 2026/11/02.", "date_iso"),
    ("The date is 11/02/2026.", "date_numeric"),
    ("Heute ist der 02.11.2026.", "date_numeric"),
    ("It is November 2, 2026.", "date_words"),
    ("It is 2nd of Nov 2026.", "date_words"),
    ("It is Monday, November 2.", "weekday_date"),
    ("The clock says 9:41 pm.", "clock_time"),
    ("Logged at 17:45:10.", "clock_time"),
    ("Epoch 1793523600 seconds.", "unix_timestamp"),
    ("Session c78fec45-9a9e-994c-f1a9-a658de0f39a7 is open.", "uuid"),
    ("Trace 4bf92f3577b34da6a3ce929d0e0e4736 attached.", "hex_id"),
    ("Request id: req_8812.", "request_id"),
    ("trace_id=abc123", "request_id"),
    ("Current date is unknown to you.", "current_time"),
    ("Today is Tuesday.", "today_is"),
    ("You are speaking with Ines Duarte.", "speaking_with"),
    ("The user's name is Bill.", "user_name"),
])
def test_default_rules_flag_per_request_sentences(sentence, rule):
    assert rule in DynamicRules().match(sentence)


@pytest.mark.parametrize("sentence", [
    "You are Acme Cloud's support agent.",
    "Refunds above 500 USD require approval: explain that politely and open a ticket.",
    "Use Python 3.11.4 features only.",
    "Quote the request id when the user gives one.",
    "Keep answers under two hundred words unless the user asks for a full memo.",
    "Escalate outages to a human, e.g. by calling open_ticket with priority 'urgent'.",
    "May the user call you by name? Yes.",
])
def test_default_rules_leave_static_instructions_alone(sentence):
    assert DynamicRules().match(sentence) == []


def test_split_keeps_static_sentences_of_a_mixed_line_in_order():
    split = DynamicRules().split("Be kind. Today is Friday. Be brief.\nSecond line.")
    assert split.static == "Be kind. Be brief.\nSecond line."
    assert split.dynamic == ["Today is Friday."]
    assert split.patterns == ["today_is"]


def test_abbreviations_do_not_split_a_dynamic_sentence():
    split = DynamicRules().split("Today is Nov. 2, 2026. Stay calm.")
    assert split.dynamic == ["Today is Nov. 2, 2026."]
    assert split.static == "Stay calm."


def test_extend_adds_tenant_rules_and_keeps_defaults():
    rules = DynamicRules().extend({"order": r"\border #\d+"})
    assert "order" in rules.names and "uuid" in rules.names
    assert rules.split("Handling order #4411. Be nice.").dynamic == ["Handling order #4411."]
    assert "order" not in DynamicRules().names  # rule sets are immutable


def test_extend_with_a_default_name_replaces_that_rule():
    rules = DynamicRules().extend({"today_is": r"\bnever-matches-anything\b"})
    assert rules.match("Today is Friday.") == []


def test_invalid_tenant_regex_raises_value_error_naming_the_rule():
    with pytest.raises(ValueError, match="'broken'"):
        DynamicRules({"broken": "(unclosed"})
    with pytest.raises(ValueError, match="non-empty"):
        DynamicRules({"empty": ""})


@given(st.text(alphabet=" \t\r\nab.", max_size=40))
def test_whitespace_normalization_is_idempotent(text):
    once = normalize_whitespace(text)
    assert normalize_whitespace(once) == once


@given(st.lists(st.sampled_from(["word", "Two words.", "x"]), min_size=1, max_size=6),
       st.sampled_from([" ", "  ", "   "]), st.sampled_from(["", " ", "  \n", "\n\n\n"]))
def test_whitespace_drift_normalizes_to_one_text(words, gap, tail):
    assert normalize_whitespace(gap.join(words) + tail) == normalize_whitespace(" ".join(words))


def test_a_remembered_split_is_the_callers_to_change_and_equals_a_fresh_one():
    rules = DynamicRules()
    text = "Be brief. Current time: 2026-11-02T09:00:00Z.\nYou are speaking with Ada. Answer in English."
    first = rules.split(text)
    first.dynamic.append("mine")
    first.patterns.clear()
    again, fresh = rules.split(text), DynamicRules().split(text)
    assert again == fresh
    assert again.dynamic == ["Current time: 2026-11-02T09:00:00Z.", "You are speaking with Ada."]
    assert "iso_datetime" in again.patterns and "speaking_with" in again.patterns


def test_the_default_rule_set_is_compiled_once():
    from gateway.canonicalize.dynamic import default_rules

    assert default_rules() is default_rules()
