"""Built-in templates rendered with the real SmolLM2 tokenizer, chat-format derivation, the sandbox."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from gateway.canonicalize import canonicalize, tokenize_segments
from gateway.prompt_templates import TemplateError, TemplateNotFound, chatml_format, derive_chat_format

SYSTEM = "You are a careful assistant."
TOOLS = [{"type": "function", "function": {"name": name, "description": name, "parameters": {"type": "object"}}}
         for name in ("zeta", "alpha")]
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def request(question="What is 2+2?", system=SYSTEM, **extra) -> dict:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"},
                         {"role": "assistant", "content": "hello"}, {"role": "user", "content": question}], **extra}


def test_chat_format_of_smollm2_is_chatml_with_its_default_system_and_no_tools_block(smollm2_tokenizer):
    fmt, chatml = derive_chat_format(smollm2_tokenizer), chatml_format()
    assert (fmt.starts, fmt.ends, fmt.generation_prompt) == (chatml.starts, chatml.ends, chatml.generation_prompt)
    assert fmt.default_system == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert fmt.tools is None and fmt.tool_result_separator is None  # its template ignores tools


def test_chat_format_is_derived_from_other_templates_too(smollm2_tokenizer, monkeypatch):
    tokenizer = smollm2_tokenizer
    monkeypatch.setattr(tokenizer, "chat_template", LLAMA3_TEMPLATE)
    fmt = derive_chat_format(tokenizer)
    assert fmt.turn_start("user") == "<|start_header_id|>user<|end_header_id|>\n\n"
    assert fmt.turn_end("assistant") == "<|eot_id|>"
    assert fmt.turn_start("system").startswith(tokenizer.bos_token)
    assert fmt.generation_prompt == "<|start_header_id|>assistant<|end_header_id|>\n\n"


def test_tokenizer_without_chat_template_falls_back_to_chatml():
    class Plain:
        chat_template = None

    assert derive_chat_format(Plain()) == chatml_format()


@pytest.mark.parametrize("name", ["agent", "rag", "chat"])
def test_builtin_renders_sections_in_canonical_order_with_generation_last(registry, smollm2_tokenizer, name):
    body = request(system=f"Current time: 2026-11-02T09:00:00Z.\n{SYSTEM}", tools=TOOLS, context=[{"id": "d", "text": "Doc."}])
    rendered = registry.render(name, canonicalize(body), tokenizer=smollm2_tokenizer)
    assert [section for section, _ in rendered.segments] == ["system", "tools", "context", "history", "dynamic", "question", "generation"]
    text = rendered.text
    assert text.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert text.endswith("<|im_start|>user\nCurrent time: 2026-11-02T09:00:00Z.\n\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    assert text.index('"name":"alpha"') < text.index('"name":"zeta"')
    assert '<document id="d">\nDoc.\n</document>' in text
    assert "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n" in text


def test_choose_builtin_prefers_agent_then_rag_then_chat(registry):
    assert registry.choose_builtin(canonicalize(request(tools=TOOLS, context=["x"]))) == "agent"
    assert registry.choose_builtin(canonicalize(request(context=["x"]))) == "rag"
    assert registry.choose_builtin(canonicalize(request())) == "chat"
    assert registry.names() == ["agent", "chat", "rag"]


def test_history_renders_tool_calls_and_tool_results(registry, smollm2_tokenizer):
    call = {"id": "c1", "type": "function", "function": {"name": "alpha", "arguments": "{\"x\": 1}"}}
    body = {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "c1", "content": "done"}], "tools": TOOLS}
    rendered = registry.render("agent", canonicalize(body), tokenizer=smollm2_tokenizer)
    history = dict(rendered.segments)["history"]
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "alpha", "arguments": {"x": 1}}\n</tool_call><|im_end|>\n' in history
    assert "<|im_start|>tool\ndone<|im_end|>\n" in history
    assert "question" not in dict(rendered.segments)
    assert rendered.text.endswith("<|im_start|>tool\ndone<|im_end|>\n<|im_start|>assistant\n")


def test_equal_static_sections_give_equal_token_prefixes(registry, smollm2_tokenizer):
    first = canonicalize(request("Why is the sky blue?", system=f"Today is 2026-11-02.\n{SYSTEM}", tools=TOOLS, context=["A doc."]))
    second = canonicalize(request("And the sea?", system=f"{SYSTEM}  \nToday is 2026-11-03.", tools=TOOLS[::-1], context=["A doc."]))
    ids = [tokenize_segments(smollm2_tokenizer, registry.render("agent", s, tokenizer=smollm2_tokenizer).segments) for s in (first, second)]
    assert ids[0].static_prefix_len == ids[1].static_prefix_len > 0
    assert ids[0].token_ids[: ids[0].static_prefix_len] == ids[1].token_ids[: ids[1].static_prefix_len]
    assert sum(ids[0].section_tokens.values()) == len(ids[0].token_ids)


def test_static_prefix_for_pins_equals_the_requests_prefix(registry, smollm2_tokenizer):
    body = request(system=f"You are speaking with Ana. {SYSTEM}", tools=TOOLS, context=[{"id": "d", "text": "Doc."}])
    full = tokenize_segments(smollm2_tokenizer, registry.render("agent", canonicalize(body), tokenizer=smollm2_tokenizer).segments)
    pin = registry.render_static_prefix("agent", f"{SYSTEM}", TOOLS, [{"id": "d", "text": "Doc."}], smollm2_tokenizer)
    pin_ids = tokenize_segments(smollm2_tokenizer, pin.segments).token_ids
    assert [name for name, _ in pin.segments] == ["system", "tools", "context"]
    assert pin_ids == full.token_ids[: full.static_prefix_len]


def test_tenant_template_renders_in_the_sandbox(registry, smollm2_tokenizer):
    source = "{% block system %}[{{ system }}]{% endblock %}{% block question %}Q: {{ question }}{% endblock %}"
    rendered = registry.render("mine", canonicalize(request()), tokenizer=smollm2_tokenizer, tenant_source=source, version=3)
    assert rendered.segments == [("system", f"[{SYSTEM}]"), ("question", "Q: What is 2+2?")]
    assert (rendered.template_name, rendered.version) == ("mine", 3)


def test_inline_source_renders_without_a_name(registry, smollm2_tokenizer):
    rendered = registry.render("{% block question %}{{ question }}{% endblock %}", canonicalize(request()), tokenizer=smollm2_tokenizer)
    assert rendered.template_name == "inline" and rendered.text == "What is 2+2?"


@pytest.mark.parametrize("source, fragment", [
    ("{% block system %}{{ system.__class__.__mro__ }}{% endblock %}", "block 'system'"),
    ("{% block system %}{{ history.append(1) }}{% endblock %}", "block 'system'"),
    ("{% block system %}{{ utcnow() }}{% endblock %}", "'utcnow' is undefined"),  # no clock: `now` is only a string
    ("{% block system %}{% for x in %}{% endblock %}", "line 1"),
    ("{% block a %}{% block b %}x{% endblock %}{% endblock %}", "nests inside"),
    ("{{ system }}", "no {% block %}"),
    ('{% extends "agent.j2" %}', "template 'mine'"),
])
def test_unsafe_or_broken_tenant_templates_raise_template_error(registry, smollm2_tokenizer, source, fragment):
    with pytest.raises(TemplateError, match=None) as info:
        registry.render("mine", canonicalize(request()), tokenizer=smollm2_tokenizer, tenant_source=source)
    assert fragment in str(info.value)


def test_unknown_builtin_raises_template_not_found(registry, smollm2_tokenizer):
    with pytest.raises(TemplateNotFound, match="unknown template 'nope'") as info:
        registry.render("nope", canonicalize(request()), tokenizer=smollm2_tokenizer)
    assert isinstance(info.value, KeyError)


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(system=TEXT, docs=st.lists(TEXT, max_size=3), questions=st.tuples(TEXT, TEXT), turns=st.lists(TEXT, max_size=3))
def test_static_token_prefix_never_depends_on_what_follows(registry, smollm2_tokenizer, system, docs, questions, turns):
    prompts = []
    for index, question in enumerate(questions):
        history = [{"role": "user" if n % 2 == 0 else "assistant", "content": turn} for n, turn in enumerate(turns[index:])]
        body = {"messages": [{"role": "system", "content": system}, *history, {"role": "user", "content": question}],
                "context": docs, "tools": TOOLS}
        rendered = registry.render("agent", canonicalize(body), tokenizer=smollm2_tokenizer)
        prompts.append(tokenize_segments(smollm2_tokenizer, rendered.segments))
    first, second = prompts
    assert first.static_prefix_len == second.static_prefix_len
    assert first.token_ids[: first.static_prefix_len] == second.token_ids[: second.static_prefix_len]
