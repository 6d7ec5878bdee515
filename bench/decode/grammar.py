"""Decode tokens/s with a JSON-schema grammar in force vs free, same prompts, passes alternating.

The constrained pass does what the engine's sampler does for grammar rows every
step: fill all rows' bitmasks in one parallel pass, mask the logits, take the
argmax, advance each row's matcher. A row whose JSON value is complete starts
a fresh matcher (from the compiler's cache), so the grammar is in force on
every timed step. The free pass takes the plain argmax.
"""

from __future__ import annotations

import statistics

from engine import Grammar
from engine.grammar.compiler import GrammarCompiler
from engine.grammar.state import GrammarState
from engine.sampler import Sampler
from bench.decode.run import decode_pass, make_prompts
from bench.progress import Progress

BENCH_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "year": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string"}},
                   "rating": {"enum": ["good", "bad", "unknown"]}},
    "required": ["title", "year", "tags", "rating"],
    "additionalProperties": False,
}
TARGET_RATIO = 0.85  # issue 15: constrained >= 85% of free at batch 8


class ConstrainedChooser:
    """choose(logits) for decode_pass: masked argmax over one GrammarState per row."""

    def __init__(self, compiler: GrammarCompiler, grammar: Grammar, num_rows: int) -> None:
        self.compiler, self.grammar, self.sampler = compiler, grammar, Sampler()
        self.states = [self._fresh() for _ in range(num_rows)]
        self.num_restarts = 0

    def _fresh(self) -> GrammarState:
        return GrammarState(self.grammar, self.compiler.compile(self.grammar), self.compiler.ll_tokenizer)

    def __call__(self, logits) -> list[int]:
        self.sampler.mask(logits, self.states)
        tokens = logits.argmax(-1).tolist()
        for row, token in enumerate(tokens):
            state = self.states[row]
            state.accept(token)
            if not state.needs_mask:
                self.states[row] = self._fresh()
                self.num_restarts += 1
        return tokens


def run_grammar_bench(runner, batch_sizes: list[int], num_tokens: int, prompt_len: int, repeat: int,
                      progress: Progress | None = None) -> dict:
    """Median free and constrained decode tokens/s per batch size, and their ratio."""
    compiler = GrammarCompiler(runner.tokenizer, runner.loaded_model.eos_token_ids)
    grammar = Grammar.json_schema(BENCH_SCHEMA)
    results = []
    for batch_size in batch_sizes:
        prompts = make_prompts(runner.tokenizer, batch_size, prompt_len, runner.shape.vocab_size)
        decode_pass(runner, prompts, 4, None, "", ConstrainedChooser(compiler, grammar, batch_size))  # warm-up
        free, constrained, restarts = [], [], 0
        for r in range(repeat):
            seconds, _, _ = decode_pass(runner, prompts, num_tokens, progress, f"free b{batch_size} #{r + 1}")
            free.append(batch_size * num_tokens / seconds)
            chooser = ConstrainedChooser(compiler, grammar, batch_size)
            seconds, _, _ = decode_pass(runner, prompts, num_tokens, progress, f"json b{batch_size} #{r + 1}", chooser)
            constrained.append(batch_size * num_tokens / seconds)
            restarts += chooser.num_restarts
        row = {"batch": batch_size, "free_tok_s": statistics.median(free), "json_tok_s": statistics.median(constrained),
               "free_tok_s_all": free, "json_tok_s_all": constrained, "num_completed_values": restarts}
        row["ratio"] = row["json_tok_s"] / row["free_tok_s"]
        results.append(row)
    return {"model": runner.loaded_model.model_id, "dtype": str(runner.dtype).removeprefix("torch."),
            "num_tokens": num_tokens, "repeat": repeat, "schema": BENCH_SCHEMA, "results": results}


def format_grammar_result(result: dict) -> list[str]:
    lines = [f"decode tokens/s, JSON-schema grammar vs free ({result['dtype']}, {result['num_tokens']} steps, "
             f"median of {result['repeat']})",
             "batch   free tok/s   json tok/s   ratio   target"]
    for row in result["results"]:
        target = f">= {TARGET_RATIO:.2f}" if row["batch"] == 8 else "-"
        lines.append(f"{row['batch']:>5}   {row['free_tok_s']:>10.1f}   {row['json_tok_s']:>10.1f}   "
                     f"{row['ratio']:>5.2f}   {target}")
    return lines
