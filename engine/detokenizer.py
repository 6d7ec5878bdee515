"""Detokenizer: incremental text deltas with stop strings, safe for multi-byte UTF-8.

A token can end in the middle of a UTF-8 character (byte-level BPE splits
emoji and CJK into several tokens). Decoding it alone yields U+FFFD, so a
delta is only released once the decoded text no longer ends in U+FFFD.

Stop strings are matched on the whole output text and trimmed from it. Text
that could still become the start of a stop string is held back until the
next token decides it, so a streamed client never sees part of a stop string.
"""

from __future__ import annotations

REPLACEMENT_CHAR = "\ufffd"
NUM_CONTEXT_TOKENS = 4


class Detokenizer:
    """Turns a request's output tokens into text deltas.

    Invariant: self.text[:self.num_emitted] is exactly what has been returned
    so far; self.text never contains a stop string.
    """

    def __init__(self, tokenizer, prompt_ids: list[int], stop: list[str]) -> None:
        self._tokenizer = tokenizer
        self._stop = list(stop)
        self._max_stop_len = max((len(s) for s in self._stop), default=0)
        context = list(prompt_ids[-NUM_CONTEXT_TOKENS:])
        self._ids: list[int] = context
        self._prefix_offset = 0
        self._read_offset = len(context)
        self.text = ""
        self.num_emitted = 0
        self.is_stopped = False
        self.matched_stop: str | None = None  # the stop string that stopped it (trimmed from self.text)

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True)

    def _decode_new_text(self, *, is_final: bool) -> str:
        """Text added by the ids past read_offset, or "" while a character is incomplete."""
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        full_text = self._decode(self._ids[self._prefix_offset :])
        if len(full_text) <= len(prefix_text) or (full_text.endswith(REPLACEMENT_CHAR) and not is_final):
            return ""
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return full_text[len(prefix_text) :]

    def add_token(self, token_id: int | None) -> str:
        """Append one output token (None: flush at finish) and return the releasable delta."""
        if self.is_stopped:
            return ""
        if token_id is not None:
            self._ids.append(token_id)
        search_from = max(0, len(self.text) - self._max_stop_len + 1)
        self.text += self._decode_new_text(is_final=token_id is None)
        if self._trim_stop(search_from):
            return self._release(len(self.text))
        if token_id is None:
            return self._release(len(self.text))
        return self._release(len(self.text) - self._num_held_back())

    def finish(self) -> str:
        """Flush everything still held back (the request ended without a stop string)."""
        return self.add_token(None)

    def _trim_stop(self, search_from: int) -> bool:
        found = [(i, s) for s, i in ((s, self.text.find(s, search_from)) for s in self._stop) if i >= 0]
        if not found:
            return False
        position, self.matched_stop = min(found)
        self.text = self.text[:position]
        self.is_stopped = True
        return True

    def _num_held_back(self) -> int:
        """Length of the longest text suffix that is a proper prefix of a stop string."""
        for length in range(min(self._max_stop_len - 1, len(self.text)), 0, -1):
            tail = self.text[-length:]
            if any(s.startswith(tail) for s in self._stop):
                return length
        return 0

    def _release(self, end: int) -> str:
        end = max(end, self.num_emitted)
        delta = self.text[self.num_emitted : end]
        self.num_emitted = end
        return delta
