"""GrammarState: one request's matcher, advanced with every token the request accepts.

Lifecycle of a lazy grammar (one with a trigger)::

    waiting --output starts with the trigger--> engaged --grammar done--> finished
       |                                          (masked)
       +--output cannot start with it, or the matcher rejects a token--> dropped (free text)

A grammar without a trigger is engaged from the first token. The matcher sees
every output token from the first one, engaged or not, so when it engages its
state already covers the whole output (the trigger included).

Invariant: the matcher's consumed tokens are exactly the request's output
tokens. Preemption keeps both (a preempted request recomputes the KV of its
prompt and output, it never re-samples them), so nothing is rolled back.
"""

from __future__ import annotations

from engine.grammar.spec import Grammar

WHITESPACE = b" \t\r\n"


class GrammarState:
    """A request's grammar progress; mutated by the step thread only."""

    def __init__(self, grammar: Grammar, matcher, ll_tokenizer) -> None:
        self.grammar = grammar
        self.matcher = matcher
        self._ll_tokenizer = ll_tokenizer
        self._trigger = grammar.trigger.encode() if grammar.trigger else b""
        self._head = b""
        self.is_engaged = not self._trigger
        self.is_dropped = False

    @property
    def needs_mask(self) -> bool:
        """True when the next token must be drawn from the grammar's mask."""
        return self.is_engaged and not self.is_dropped and not self.matcher.is_stopped()

    @property
    def is_finished(self) -> bool:
        """The grammar is in force and complete: nothing but the end may follow."""
        return self.is_engaged and not self.is_dropped and self.matcher.is_stopped()

    @property
    def is_in_force(self) -> bool:
        return self.is_engaged and not self.is_dropped

    def accept(self, token_id: int) -> None:
        """Advance past one sampled output token (the step thread calls it once per token)."""
        if self.is_dropped:
            return
        is_ok = self.matcher.consume_token(token_id)
        if not self.is_engaged:
            self._watch_trigger(token_id, is_ok)
        elif not is_ok:
            self.is_dropped = True  # only a token the mask did not offer gets here (e.g. a stop id)

    def _watch_trigger(self, token_id: int, is_ok: bool) -> None:
        self._head += self._ll_tokenizer.decode_bytes([token_id])
        head = self._head.lstrip(WHITESPACE)
        if not is_ok or not (head.startswith(self._trigger) or self._trigger.startswith(head)):
            self.is_dropped = True
        elif head.startswith(self._trigger):
            self.is_engaged = True
