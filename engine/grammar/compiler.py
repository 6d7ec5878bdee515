"""GrammarCompiler: Grammar -> a fresh llguidance matcher, with a bounded LRU of compiled grammars.

Runs on the submitting thread (Engine.submit), never on the step thread. The
llguidance tokenizer is built once, on first use, from the engine's HF
tokenizer; compiled matchers are cached by `Grammar.key` in their initial
state and every request gets its own `deep_copy`, so a cached entry is never
advanced. Thread-safe: one lock guards the tokenizer build and the LRU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from engine.grammar.spec import Grammar

DEFAULT_CACHE_SIZE = 256


class GrammarError(ValueError):
    """A grammar (or the JSON schema inside it) that cannot be compiled; the message says why."""


class GrammarCompiler:
    """Compiles grammars for one tokenizer; `compile` returns a matcher in its start state."""

    def __init__(self, tokenizer, eos_token_ids=(), cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self._hf_tokenizer = tokenizer
        self._eos_token_ids = sorted(eos_token_ids)
        self._cache_size = cache_size
        self._cache: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()
        self._ll_tokenizer = None
        self.num_compiled = 0

    @property
    def ll_tokenizer(self):
        with self._lock:
            return self._tokenizer_locked()

    def _tokenizer_locked(self):
        if self._ll_tokenizer is None:
            import llguidance.hf

            eos = self._eos_token_ids or None  # the grammar allows these exactly when it accepts
            self._ll_tokenizer = llguidance.hf.from_tokenizer(self._hf_tokenizer, eos_token=eos)
        return self._ll_tokenizer

    def compile(self, grammar: Grammar):
        """A new llguidance.LLMatcher for `grammar`; raises GrammarError when it does not compile."""
        with self._lock:
            cached = self._cache.get(grammar.key)
            if cached is not None:
                self._cache.move_to_end(grammar.key)
                return cached.deep_copy()
            tokenizer = self._tokenizer_locked()
        matcher = self._build(tokenizer, grammar)
        with self._lock:
            self._cache[grammar.key] = matcher
            self._cache.move_to_end(grammar.key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return matcher.deep_copy()

    def _build(self, tokenizer, grammar: Grammar):
        import llguidance

        source = llguidance.LLMatcher.grammar_from_lark(grammar.source)
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(source, tokenizer)
        if is_error:
            raise GrammarError(f"invalid grammar: {messages}")
        matcher = llguidance.LLMatcher(tokenizer, source, log_level=0)
        if matcher.is_error():
            raise GrammarError(f"invalid grammar: {matcher.get_error()}")
        self.num_compiled += 1
        return matcher

    @property
    def num_cached(self) -> int:
        return len(self._cache)
