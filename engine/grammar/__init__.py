"""Constrained decoding: a Grammar (plain data) -> a compiled matcher per request -> a token mask per step.

    spec      Grammar, ToolSpec: what the output must match (JSON schema, any JSON object, tool calls)
    compiler  GrammarCompiler: compiles off the step thread, LRU-cached by grammar; GrammarError
    state     GrammarState: one request's matcher, advanced with each accepted token
    mask      MaskFiller, apply_bitmask: the batch's bitmasks in one pass, applied before sampling
"""

from engine.grammar.compiler import GrammarCompiler, GrammarError
from engine.grammar.spec import Grammar, ToolSpec

__all__ = ["Grammar", "ToolSpec", "GrammarCompiler", "GrammarError"]
