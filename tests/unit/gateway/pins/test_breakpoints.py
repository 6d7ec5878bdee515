"""Where cache breakpoints fall in the served prompt (gateway/pins/breakpoints.py), with the real SmolLM2
tokenizer and the built-in templates: a breakpoint pins the longest served prefix that holds only content at
or before it, so a request that repeats the marked messages and changes what follows shares that prefix."""

from __future__ import annotations

import pytest

from gateway.generation.prepare import prepare_request
from gateway.generation.request import CacheBreakpoint, GenerationRequest
from gateway.pins.breakpoints import BreakpointPin, breakpoint_pins, cache_write_figures

PAGE = 16
SYSTEM = ("You are the release assistant of the Orbit build farm. Answer questions about pipelines, caches and "
          "artifacts in two short sentences, naming the exact job or setting involved. ") * 2
TOOLS = ({"type": "function", "function": {"name": "get_job", "description": "Look a build job up by id.",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}},)
HISTORY = ({"role": "user", "content": "Why did job 4411 rebuild every layer of the base image last night?"},
           {"role": "assistant", "content": "Its cache key includes the lockfile hash, and the lockfile changed."})


def request(messages, marks=(), **fields) -> GenerationRequest:
    return GenerationRequest(model="m", messages=tuple(messages), cache_breakpoints=tuple(marks), **fields)


def served(registry, tokenizer, req):
    return prepare_request(req, templates=registry, tokenizer=tokenizer, model_id="m", max_context=8192,
                           default_max_tokens=16)


def pins_of(registry, tokenizer, req, ttl_scale=1.0):
    prepared = served(registry, tokenizer, req)
    return prepared, breakpoint_pins(req, prepared, templates=registry, tokenizer=tokenizer, tenant_template=None,
                                     rules=None, page_size=PAGE, ttl_scale=ttl_scale)


def conversation(question, *, history=HISTORY, system=SYSTEM):
    return [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]


def test_a_breakpoint_on_the_system_pins_the_static_prefix_of_system_and_tools(registry, smollm2_tokenizer):
    req = request(conversation("Which job failed first?"), [CacheBreakpoint(1, 3600.0)], tools=TOOLS)
    prepared, pins = pins_of(registry, smollm2_tokenizer, req, ttl_scale=0.01)
    assert prepared.prompt.static_prefix_len > PAGE
    assert pins == (BreakpointPin(prepared.prompt.static_prefix_len // PAGE * PAGE, 36.0, True),)


def test_a_breakpoint_in_the_history_is_shared_by_a_request_that_changes_only_what_follows(registry, smollm2_tokenizer):
    marks = [CacheBreakpoint(1), CacheBreakpoint(3)]
    first, pins = pins_of(registry, smollm2_tokenizer, request(conversation("Which job failed first?"), marks))
    other = served(registry, smollm2_tokenizer, request(conversation("How do I pin the base image?"))).prompt.token_ids
    on_system, on_history = (pin.num_tokens for pin in pins)
    assert on_system == first.prompt.static_prefix_len // PAGE * PAGE < on_history
    assert first.prompt.token_ids[:on_history] == other[:on_history]
    assert [pin.is_long for pin in pins] == [False, False] and pins[0].ttl_s == 300.0
    shared = next(i for i, (a, b) in enumerate(zip(first.prompt.token_ids, other)) if a != b)
    assert on_history == shared // PAGE * PAGE  # every marked message, none of the question


def test_unmarked_content_that_canonicalization_moves_first_ends_the_pinned_prefix(registry, smollm2_tokenizer):
    """A later system message joins the system section, ahead of the marked history: the breakpoint after the
    history pins only what precedes that content (the first system message), not the history."""
    later = {"role": "system", "content": "Reply in French from now on."}
    messages = [*conversation("Which job failed first?")[:-1], later, {"role": "user", "content": "Which job?"}]
    prepared, pins = pins_of(registry, smollm2_tokenizer, request(messages, [CacheBreakpoint(3)]))
    alone = served(registry, smollm2_tokenizer, request(conversation("Anything else?"))).prompt.token_ids
    (pin,) = pins
    assert PAGE <= pin.num_tokens < prepared.prompt.static_prefix_len
    assert prepared.prompt.token_ids[:pin.num_tokens] == alone[:pin.num_tokens]


def test_a_raw_order_request_pins_its_own_rendering_up_to_the_breakpoint(registry, smollm2_tokenizer):
    marks = [CacheBreakpoint(3)]
    prepared, (pin,) = pins_of(registry, smollm2_tokenizer, request(conversation("Which job?"), marks, canonicalize=False))
    other = served(registry, smollm2_tokenizer, request(conversation("Another one?"), canonicalize=False)).prompt.token_ids
    assert PAGE < pin.num_tokens < prepared.num_prompt_tokens
    assert prepared.prompt.token_ids[:pin.num_tokens] == other[:pin.num_tokens]


def test_a_breakpoint_inside_the_first_page_pins_nothing(registry, smollm2_tokenizer):
    req = request([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], [CacheBreakpoint(1)])
    assert pins_of(registry, smollm2_tokenizer, req)[1] == ()


@pytest.mark.parametrize("cached, expected", [(0, (96, 32)), (48, (48, 0)), (96, (0, 0)), (160, (0, 0))])
def test_cache_writes_are_the_prompt_computed_up_to_the_last_breakpoint_and_the_last_1h_one(cached, expected):
    pins = (BreakpointPin(32, 3600.0, True), BreakpointPin(96, 300.0, False))
    assert cache_write_figures(pins, cached) == expected
    assert cache_write_figures((), cached) == (0, 0)
