"""MarkedText and Fence: rendered prompt text that remembers which characters the client wrote.

Why: a chat marker such as "<|im_start|>" must become a special token only where
the template (or the model's chat template) wrote it; the same characters typed
by a client — in the system prompt, tools, documents, history or question — are
plain text. Rendering therefore brackets client text with a Fence, and
Fence.unwrap turns the rendering back into the exact text, as a MarkedText whose
`client_spans` cover the client's characters. encode_segment (tokenize.py)
parses special tokens only outside client spans.

Invariants:
- str(Fence.unwrap(fenced)) is the rendering without any fence characters.
- a fence carries a random 16-digit nonce (per Fence), so client text cannot
  open or close one; unwrap raises ValueError when a fence is unbalanced or
  mangled (its nonce survives outside a whole fence).
- a plain str has unknown origin and counts as client text everywhere
  (fail closed); only MarkedText carries template spans.
"""

from __future__ import annotations

import re
import secrets
from typing import Iterable


class MarkedText(str):
    """A str plus `client_spans`: sorted, disjoint (start, end) ranges of client text.

    MarkedText(text) is all template text; MarkedText.client(text) is all client
    text. `+` keeps the spans (a plain str operand counts as client text); other
    str operations return a plain str, which counts as client text.
    """

    client_spans: tuple[tuple[int, int], ...]

    def __new__(cls, text: str = "", client_spans: Iterable[tuple[int, int]] = ()):
        marked = super().__new__(cls, text)
        marked.client_spans = tuple((start, end) for start, end in client_spans if start < end)
        return marked

    @classmethod
    def client(cls, text: str) -> MarkedText:
        return cls(text, [(0, len(text))])

    @classmethod
    def join(cls, pieces: Iterable[tuple[str, bool]]) -> MarkedText:
        """Concatenate (text, is_client) pieces; adjacent client pieces share one span."""
        texts, spans, position = [], [], 0
        for text, is_client in pieces:
            if is_client and text:
                if spans and spans[-1][1] == position:
                    spans[-1] = (spans[-1][0], position + len(text))
                else:
                    spans.append((position, position + len(text)))
            texts.append(text)
            position += len(text)
        return cls("".join(texts), spans)

    def pieces(self) -> list[tuple[str, bool]]:
        """(text, is_client) runs in order, covering the whole text."""
        runs, position = [], 0
        for start, end in self.client_spans:
            runs += [(self[position:start], False), (self[start:end], True)]
            position = end
        runs.append((self[position:], False))
        return [(text, is_client) for text, is_client in runs if text]

    def template_spans(self) -> list[tuple[int, int]]:
        """(start, end) ranges of template text: the complement of client_spans."""
        spans, position = [], 0
        for start, end in (*self.client_spans, (len(self), len(self))):
            if position < start:
                spans.append((position, start))
            position = end
        return spans

    def __add__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return MarkedText.join([*as_pieces(self), *as_pieces(other)])

    def __radd__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return MarkedText.join([*as_pieces(other), *as_pieces(self)])


def as_pieces(text: str) -> list[tuple[str, bool]]:
    """(text, is_client) runs of any str: a plain str is one client run."""
    return text.pieces() if isinstance(text, MarkedText) else [(text, True)]


class Fence:
    """Brackets client text inside a rendering with markers no client can type.

    A Fence is also a Jinja `finalize`: every `{{ expression }}` output that is
    not MarkedText is client text and comes out fenced; MarkedText (the chat
    markers) keeps its template spans unfenced.
    """

    def __init__(self):
        self.nonce = f"{secrets.randbelow(10**16):016d}"
        self.open = f"\ufdd0{self.nonce}\ufdd1"
        self.close = f"\ufdd2{self.nonce}\ufdd3"
        self._pattern = re.compile(f"{re.escape(self.open)}|{re.escape(self.close)}")

    def __call__(self, value) -> str:
        return self.wrap(value)

    def wrap(self, value) -> str:
        """`value` as fenced text: MarkedText keeps its template runs, anything else is client text."""
        if isinstance(value, MarkedText):
            return "".join(self.wrap_client(text) if is_client else text for text, is_client in value.pieces())
        return self.wrap_client(str(value))

    def wrap_client(self, text: str) -> str:
        return f"{self.open}{text}{self.close}" if text else ""

    def unwrap(self, fenced: str) -> MarkedText:
        """The rendering without fences; text inside any fence (nested or not) is client text.
        Raises ValueError on an unbalanced or mangled fence."""
        pieces, depth, position = [], 0, 0
        for match in self._pattern.finditer(fenced):
            pieces.append((fenced[position:match.start()], depth > 0))
            depth += 1 if match.group() == self.open else -1
            if depth < 0:
                raise ValueError("fence closed before it was opened")
            position = match.end()
        if depth:
            raise ValueError("fence left open")
        pieces.append((fenced[position:], False))
        marked = MarkedText.join(pieces)
        if self.nonce in marked:
            raise ValueError("a fence was altered during rendering")
        return marked
