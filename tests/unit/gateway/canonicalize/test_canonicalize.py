"""canonicalize(): sections, ordering choices and signals on small hand-made bodies."""

from __future__ import annotations

import pytest

from gateway.canonicalize import Doc, DynamicRules, canonicalize

SYSTEM = "You are a helpful agent. Answer briefly."


def body(*messages, **extra) -> dict:
    return {"model": "m", "messages": list(messages), **extra}


def system(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def tool(name, description="d"):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {"type": "object", "properties": {}}}}


def test_clean_request_splits_into_sections_and_is_canonical():
    sections = canonicalize(body(system(SYSTEM), user("Hi?"), assistant("Hello."), user(" What now? "),
                                 tools=[tool("a"), tool("b")], context=[{"id": "d1", "text": "Doc one."}]))
    assert sections.system == SYSTEM
    assert [t["function"]["name"] for t in sections.tools] == ["a", "b"]
    assert sections.context == [Doc("d1", "Doc one.")]
    assert sections.history == [user("Hi?"), assistant("Hello.")]
    assert sections.question == "What now?"
    assert sections.dynamic == []
    assert sections.signals.found == ["system", "tools", "context", "history", "question"]
    assert sections.signals.was_canonical and not sections.signals.dynamic_hoisted


def test_system_and_developer_messages_join_and_normalize_whitespace():
    sections = canonicalize(body(system("Rule one.  \r\nRule  two.\n\n\n\nRule three.  "),
                                 {"role": "developer", "content": "Dev rule."}, user("q")))
    assert sections.system == "Rule one.\nRule two.\n\nRule three.\n\nDev rule."
    assert not sections.signals.was_canonical


def test_whitespace_drift_gives_equal_system_sections():
    tidy = canonicalize(body(system("A rule.  Another rule."), user("q")))
    drifted = canonicalize(body(system("A rule. Another rule.\n"), user("q")))
    assert tidy.system == drifted.system
    assert tidy.hashes()["system"] == drifted.hashes()["system"]


def test_tools_sorted_by_name_with_sorted_keys():
    shuffled = {"function": {"parameters": {"type": "object"}, "name": "b"}, "type": "function"}
    sections = canonicalize(body(user("q"), tools=[shuffled, tool("a")]))
    assert [t["function"]["name"] for t in sections.tools] == ["a", "b"]
    assert list(sections.tools[1]) == ["function", "type"]
    assert list(sections.tools[1]["function"]) == ["name", "parameters"]
    assert not sections.signals.was_canonical


def test_tool_lists_differing_only_in_order_hash_equal():
    first = canonicalize(body(user("q"), tools=[tool("a"), tool("b")]))
    second = canonicalize(body(user("q"), tools=[tool("b"), tool("a")]))
    assert first.hashes()["tools"] == second.hashes()["tools"]


def test_context_message_before_system_moves_to_context():
    wrapped = '<context>\n<document id="x">\nText X.\n</document>\n<document id="y">\nText Y.\n</document>\n</context>'
    sections = canonicalize(body(system(wrapped), system(SYSTEM), user("q")))
    assert sections.system == SYSTEM
    assert sections.context == [Doc("x", "Text X."), Doc("y", "Text Y.")]
    assert not sections.signals.was_canonical


def test_context_at_start_of_last_user_turn_moves_to_context():
    turn = '<context>\n<document id="k">\nKnown.\n</document>\n</context>\n\nWhat is known?'
    sections = canonicalize(body(system(SYSTEM), user("earlier"), assistant("ok"), user(turn)))
    assert sections.context == [Doc("k", "Known.")]
    assert sections.question == "What is known?"
    assert sections.history == [user("earlier"), assistant("ok")]


def test_document_blocks_later_in_the_user_turn_stay_in_the_question():
    turn = 'Compare with <document id="k">mine</document> please.'
    sections = canonicalize(body(user(turn)))
    assert sections.context == [] and sections.question == turn


def test_bare_document_blocks_and_loose_context_text_become_docs():
    sections = canonicalize(body(system('Rules.\n<document id=a>Alpha</document>'), system("<context>loose notes</context>"), user("q")))
    assert sections.system == "Rules."
    assert sections.context == [Doc("a", "Alpha"), Doc(None, "loose notes")]


def test_context_field_accepts_strings_and_objects_and_keeps_order():
    sections = canonicalize(body(user("q"), context=["plain text", {"id": "z", "text": " Zed "}, {"id": "a", "text": "Ay"}]))
    assert sections.context == [Doc(None, "plain text"), Doc("z", "Zed"), Doc("a", "Ay")]
    assert sections.signals.was_canonical


def test_context_sorted_by_id_when_asked_and_deduplicated():
    sections = canonicalize(body(system('<context><document id="a">Ay</document></context>'), user("q"),
                                 context=[{"id": "z", "text": "Zed"}, {"id": "a", "text": "Ay"}]), sort_context_by_id=True)
    assert [doc.id for doc in sections.context] == ["a", "z"]


def test_malformed_context_field_raises_value_error():
    with pytest.raises(ValueError, match="context"):
        canonicalize(body(user("q"), context=[42]))


def test_history_keeps_tool_calls_and_tool_results_in_order():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [system(SYSTEM), user("do it"), assistant(None, tool_calls=[call]),
                {"role": "tool", "tool_call_id": "c1", "content": "42"}, assistant("It is 42."), user("thanks?")]
    sections = canonicalize(body(*messages))
    assert sections.history == messages[1:5]
    assert sections.question == "thanks?"


def test_conversation_ending_with_tool_results_has_empty_question():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [system(SYSTEM), user("do it"), assistant(None, tool_calls=[call]), {"role": "tool", "tool_call_id": "c1", "content": "42"}]
    sections = canonicalize(body(*messages))
    assert sections.question == ""
    assert sections.history == messages[1:]
    assert "question" not in sections.signals.found


def test_multipart_user_content_joins_text_parts():
    parts = [{"type": "text", "text": "Line one"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "Line two"}]
    assert canonicalize(body(user(parts))).question == "Line one\nLine two"


def test_timestamp_and_request_id_line_is_hoisted():
    text = "Current time: 2026-11-02T09:00:00Z. Request id: c78fec45-9a9e-994c-f1a9-a658de0f39a7.\n" + SYSTEM
    sections = canonicalize(body(system(text), user("q")))
    assert sections.system == SYSTEM
    assert " ".join(sections.dynamic) == "Current time: 2026-11-02T09:00:00Z. Request id: c78fec45-9a9e-994c-f1a9-a658de0f39a7."
    assert sections.signals.dynamic_hoisted and not sections.signals.was_canonical
    assert {"iso_datetime", "uuid", "request_id"} <= set(sections.signals.dynamic_patterns)
    assert sections.signals.found[-2:] == ["dynamic", "question"]


def test_personal_sentences_are_hoisted_from_the_middle_of_a_line():
    sections = canonicalize(body(system(f"You are speaking with Hiro Tanaka. {SYSTEM}\nToday is 2026-11-02."), user("q")))
    assert sections.system == SYSTEM
    assert sections.dynamic == ["You are speaking with Hiro Tanaka.", "Today is 2026-11-02."]
    assert sections.signals.dynamic_patterns == ["date_iso", "speaking_with", "today_is"]


def test_custom_rule_set_without_defaults_hoists_nothing_else():
    rules = DynamicRules({"ticket": r"ticket #\d+"}, include_defaults=False)
    sections = canonicalize(body(system("Handle ticket #991. Today is 2026-11-02."), user("q")), rules)
    assert sections.dynamic == ["Handle ticket #991."]
    assert sections.system == "Today is 2026-11-02."


def test_equal_static_sections_hash_equal_across_dynamic_variants():
    first = canonicalize(body(system(f"Current time: 2026-11-02T09:00:00Z.\n{SYSTEM}"), user("a")))
    second = canonicalize(body(system(f"Current time: 2026-11-03T17:45:10Z.\n{SYSTEM}"), user("b")))
    assert first.static_key() == second.static_key()
    assert first.hashes()["dynamic"] != second.hashes()["dynamic"]


def test_hashes_cover_every_section_with_sixteen_hex_digits():
    hashes = canonicalize(body(system(SYSTEM), user("q"))).hashes()
    assert list(hashes) == ["system", "tools", "context", "history", "dynamic", "question"]
    assert all(len(value) == 16 and int(value, 16) >= 0 for value in hashes.values())


def test_system_message_after_the_conversation_is_not_canonical():
    sections = canonicalize(body(user("a"), assistant("b"), system(SYSTEM), user("q")))
    assert sections.system == SYSTEM and not sections.signals.was_canonical


@pytest.mark.parametrize("bad", [None, [], {"messages": []}, {"messages": [{"role": "robot", "content": "x"}]},
                                 {"messages": [{"role": "user", "content": 3}]}])
def test_malformed_bodies_raise_value_error(bad):
    with pytest.raises(ValueError):
        canonicalize(bad)


def test_render_raw_keeps_client_order_and_puts_the_context_field_in_the_last_user_turn(smollm2_tokenizer):
    from gateway.canonicalize import render_raw, render_raw_text

    raw = body(system("Today is 2026-11-02. " + SYSTEM), user("first"), assistant("ok"), user("q?"),
               tools=[tool("b"), tool("a")], context=[{"id": "d1", "text": "Doc one."}])
    text = render_raw_text(smollm2_tokenizer, raw)
    assert text.startswith("<|im_start|>system\nToday is 2026-11-02. " + SYSTEM + "\n\n# Tools\n")
    assert text.index('"name": "b"') < text.index('"name": "a"')
    assert '<|im_start|>user\n<context>\n<document id="d1">\nDoc one.\n</document>\n</context>\n\nq?<|im_end|>\n' in text
    assert text.endswith("<|im_start|>assistant\n")
    assert render_raw(smollm2_tokenizer, raw) == smollm2_tokenizer.encode(text, add_special_tokens=False)


def test_render_raw_falls_back_to_chatml_when_the_template_rejects_the_messages(smollm2_tokenizer, monkeypatch):
    from gateway.canonicalize import render_raw_text

    monkeypatch.setattr(smollm2_tokenizer, "chat_template", "{{ raise_exception('no') }}")
    assert render_raw_text(smollm2_tokenizer, body(user("q"))) == "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
