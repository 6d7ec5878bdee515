"""Constrained decoding: grammars compile, cache, mask and finish requests (real SmolLM2 tokenizer, fake logits)."""

import functools
import json
from concurrent.futures import Future

import jsonschema
import pytest
import torch

from engine import Engine, EngineConfig, Grammar, GrammarError, SamplingParams, ToolSpec
from engine.grammar.compiler import GrammarCompiler
from engine.grammar.mask import MaskFiller, apply_bitmask
from engine.grammar.state import GrammarState
from tests.support.fake_runner import WideFakeRunner

SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "color": {"enum": ["red", "green", "blue"]},
        "size": {"enum": [1, 2, 3]},
    },
    "required": ["ok", "color", "size"],
    "additionalProperties": False,
}
WEATHER = ToolSpec("get_weather", {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"],
                                   "additionalProperties": False})
ADD = ToolSpec("add", {"type": "object", "properties": {"a": {"enum": [1, 2]}}, "required": ["a"],
                       "additionalProperties": False})


@pytest.fixture(scope="module")
def compiler(smollm2_tokenizer):
    return GrammarCompiler(smollm2_tokenizer, [smollm2_tokenizer.eos_token_id])


@pytest.fixture
def make_grammar_engine(make_engine, smollm2_tokenizer):
    """Engines over WideFakeRunner (real vocabulary; conftest's make_engine checks their pages)."""
    return functools.partial(make_engine, runner_class=functools.partial(WideFakeRunner, smollm2_tokenizer))


def run_all(engine, prompts, params):
    params = params if isinstance(params, list) else [params] * len(prompts)
    futures = []
    for prompt, row_params in zip(prompts, params):
        future = Future()
        engine.submit(prompt, row_params, lambda out, f=future: out.is_finished and f.set_result(out))
        futures.append(future)
    return [f.result(timeout=60) for f in futures]


def prompts(n):
    return [[1 + (i * 7 + j) % 90 for j in range(5 + i % 4)] for i in range(n)]


def test_compiled_grammars_are_cached_by_value_and_copied_per_request(compiler):
    first = compiler.compile(Grammar.json_schema(SCHEMA))
    assert first.consume_token(compiler.ll_tokenizer.tokenize_str("{")[0])
    second = compiler.compile(Grammar.json_schema(dict(SCHEMA)))
    assert compiler.num_compiled == 1 and compiler.num_cached == 1
    assert second.validate_tokens(compiler.ll_tokenizer.tokenize_str('{"ok": true')) > 1  # a fresh start state


def test_an_invalid_schema_raises_grammar_error(compiler):
    with pytest.raises(GrammarError, match="frobnicate"):
        compiler.compile(Grammar.json_schema({"type": "frobnicate"}))


def test_the_lru_drops_the_least_recently_used_grammar(smollm2_tokenizer):
    compiler = GrammarCompiler(smollm2_tokenizer, [2], cache_size=2)
    for size in (1, 2, 1, 3):
        compiler.compile(Grammar.json_schema({"type": "array", "maxItems": size}))
    assert compiler.num_cached == 2 and compiler.num_compiled == 3


def test_apply_bitmask_keeps_only_the_allowed_tokens_of_masked_rows():
    logits = torch.zeros(3, 70)
    bitmask = torch.zeros(1, 3, dtype=torch.int32)
    bitmask[0, 0] = 1 << 5
    bitmask[0, 1] = 1 << 0  # token 32
    apply_bitmask(logits, [1], bitmask)
    assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == [5, 32]
    assert torch.isfinite(logits[0]).all() and torch.isfinite(logits[2]).all()
    every_row = torch.zeros(2, 70)
    apply_bitmask(every_row, [0, 1], bitmask.expand(2, 3).contiguous())
    assert [torch.isfinite(row).nonzero().flatten().tolist() for row in every_row] == [[5, 32], [5, 32]]


def is_eos_allowed(state, eos: int) -> bool:
    bitmask = MaskFiller().fill([state.matcher], 49152)
    return bool((bitmask[0, eos // 32] >> (eos % 32)) & 1)


def test_eos_is_allowed_exactly_when_the_grammar_accepts(compiler, smollm2_tokenizer):
    grammar = Grammar.tool_calls([WEATHER], open_tag="<c>", close_tag="</c>", allow_parallel=True)
    state = GrammarState(grammar, compiler.compile(grammar), compiler.ll_tokenizer)
    eos = smollm2_tokenizer.eos_token_id
    for token in smollm2_tokenizer.encode('<c>{"name": "get_weather", "arguments": {"unit": "c"}}', add_special_tokens=False):
        assert not is_eos_allowed(state, eos)
        state.accept(token)
    assert not is_eos_allowed(state, eos)  # the closing tag is still missing
    for token in smollm2_tokenizer.encode("</c>", add_special_tokens=False):
        state.accept(token)
    assert state.matcher.is_accepting() and not state.is_finished  # another call may follow
    assert is_eos_allowed(state, eos)


def test_json_schema_requests_end_schema_valid_with_stop(make_grammar_engine):
    engine = make_grammar_engine()
    finals = run_all(engine, prompts(6), SamplingParams(max_tokens=40, grammar=Grammar.json_schema(SCHEMA)))
    for final in finals:
        assert final.finish_reason == "stop", final.output_text
        jsonschema.validate(json.loads(final.output_text), SCHEMA)


def test_unconstrained_rows_in_the_same_batch_are_not_masked(make_grammar_engine):
    engine = make_grammar_engine()
    free, constrained = SamplingParams(max_tokens=8), SamplingParams(max_tokens=8, grammar=Grammar.json_schema(SCHEMA))
    alone = run_all(engine, prompts(4), free)
    mixed = run_all(engine, prompts(4) * 2, [free] * 4 + [constrained] * 4)
    assert [f.output_token_ids for f in mixed[:4]] == [f.output_token_ids for f in alone]
    assert all(f.output_text.startswith("{") for f in mixed[4:])
    assert not any(f.output_text.startswith("{") for f in alone)


def test_a_forced_call_names_one_tool_with_valid_arguments_and_finishes_tool_calls(make_grammar_engine):
    engine = make_grammar_engine()
    grammar = Grammar.tool_calls([WEATHER, ADD], open_tag="<c>", close_tag="</c>", allow_parallel=False)
    for final in run_all(engine, prompts(6), SamplingParams(max_tokens=40, grammar=grammar)):
        assert final.finish_reason == "tool_calls"
        text = final.output_text
        assert text.startswith("<c>") and text.endswith("</c>")
        call = json.loads(text[3:-4])
        tool = {"get_weather": WEATHER, "add": ADD}[call["name"]]
        jsonschema.validate(call["arguments"], tool.parameters)


def test_preempted_constrained_requests_keep_their_matcher_in_step(make_grammar_engine):
    grammar = Grammar.json_schema(SCHEMA)
    roomy = run_all(make_grammar_engine(), prompts(10), SamplingParams(max_tokens=40, grammar=grammar))
    tight_engine = make_grammar_engine(num_pages=24, page_size=4)
    tight = run_all(tight_engine, prompts(10), SamplingParams(max_tokens=40, grammar=grammar))
    assert tight_engine.stats()["num_preemptions"] > 0
    assert [f.output_token_ids for f in tight] == [f.output_token_ids for f in roomy]
    for final in tight:
        jsonschema.validate(json.loads(final.output_text), SCHEMA)


def test_a_lazy_grammar_leaves_text_free_until_its_trigger(compiler, smollm2_tokenizer):
    grammar = Grammar.tool_calls([WEATHER], open_tag="<tool_call>", close_tag="</tool_call>", trigger="<tool_call>")
    free = GrammarState(grammar, compiler.compile(grammar), compiler.ll_tokenizer)
    for token in smollm2_tokenizer.encode("Hello there", add_special_tokens=False):
        free.accept(token)
    assert free.is_dropped and not free.needs_mask
    started = GrammarState(grammar, compiler.compile(grammar), compiler.ll_tokenizer)
    ids = smollm2_tokenizer.encode("<tool_call>", add_special_tokens=False)
    for token in ids[:-1]:
        started.accept(token)
    assert not started.needs_mask and not started.is_dropped
    started.accept(ids[-1])
    assert started.needs_mask


def test_submit_rejects_an_invalid_grammar_on_the_calling_thread(make_grammar_engine):
    engine = make_grammar_engine()
    with pytest.raises(GrammarError):
        engine.submit([1, 2, 3], SamplingParams(grammar=Grammar.json_schema({"type": 7})), lambda out: None)
