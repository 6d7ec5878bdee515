"""Section-stable tokenization: each rendered segment is tokenized on its own.

Invariant: the ids of a segment depend only on that segment's text and its
client spans (no BPE merge crosses a segment boundary, no special tokens are
added), so two prompts whose first k segments are equal share the token prefix
of those k segments.

Only the template's own markers become special tokens. A segment is cut at each
special token (e.g. "<|im_start|>") that lies wholly in template text; the text
between cuts — template and client text alike — is encoded with
split_special_tokens=True, so special-token text the client typed stays plain
text. For a segment without client-typed special tokens the ids equal
tokenizer.encode(text, add_special_tokens=False), which also splits text at
special tokens before its BPE runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from gateway.canonicalize.marked_text import MarkedText
from gateway.canonicalize.sections import STATIC_SECTIONS

SPACE = r"\s*"  # the whitespace an lstrip/rstrip added token absorbs


@dataclass
class TokenizedPrompt:
    """token_ids: the whole prompt; section_tokens: tokens per section name;
    static_prefix_len: tokens of the leading run of static segments
    (system/tools/context) — the part worth caching and pinning."""

    token_ids: list[int]
    section_tokens: dict[str, int] = field(default_factory=dict)
    static_prefix_len: int = 0


@dataclass(frozen=True)
class SpecialTokens:
    """A tokenizer's special tokens: `pattern` finds them (with the whitespace an
    lstrip/rstrip token absorbs), longest first; `token_id(match)` is the id of the one a match found.

    Where no token absorbs whitespace, `pattern` is a plain alternation of the literal texts, which
    `re` scans by their first characters (a capture group per token makes it try every alternative at
    every position of the prompt); otherwise group i of `pattern` is the i-th token of `ids`."""

    pattern: re.Pattern | None
    ids: tuple[int, ...]
    by_text: Mapping[str, int] | None = None  # the literal pattern's ids, by token text
    id_set: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id_set", frozenset(self.ids))

    def token_id(self, match: re.Match) -> int:
        return self.by_text[match.group()] if self.by_text is not None else self.ids[match.lastindex - 1]

    @classmethod
    def of(cls, tokenizer) -> SpecialTokens:
        tokens = special_added_tokens(tokenizer)
        if not tokens:
            return cls(None, ())
        tokens.sort(key=lambda item: -len(item[0]))
        ids = tuple(token_id for _, token_id, _, _ in tokens)
        if not any(lstrip or rstrip for _, _, lstrip, rstrip in tokens):
            by_text = {text: token_id for text, token_id, _, _ in reversed(tokens)}  # a repeated text: the first
            return cls(re.compile("|".join(re.escape(text) for text, _, _, _ in tokens)), ids, by_text)
        alternatives = [f"{SPACE if lstrip else ''}({re.escape(text)}){SPACE if rstrip else ''}"
                        for text, _, lstrip, rstrip in tokens]
        return cls(re.compile("|".join(alternatives)), ids)


def special_added_tokens(tokenizer) -> list[tuple[str, int, bool, bool]]:
    """(text, id, lstrip, rstrip) of every special added token."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    tokens = [(token.content, token_id, bool(getattr(token, "lstrip", False)), bool(getattr(token, "rstrip", False)))
              for token_id, token in decoder.items() if getattr(token, "special", True) and token.content]
    if tokens:
        return tokens
    names = getattr(tokenizer, "all_special_tokens", None) or []
    return [(name, tokenizer.convert_tokens_to_ids(name), False, False) for name in names]


def tokenize_segments(tokenizer, segments: Iterable[tuple[str, str]]) -> TokenizedPrompt:
    """Tokenize (section_name, text) segments one by one and concatenate the ids."""
    specials = SpecialTokens.of(tokenizer)
    token_ids: list[int] = []
    section_tokens: dict[str, int] = {}
    static_prefix_len = 0
    is_static_run = True
    for name, text in segments:
        ids = encode_segment(tokenizer, text, specials)
        token_ids.extend(ids)
        section_tokens[name] = section_tokens.get(name, 0) + len(ids)
        is_static_run = is_static_run and (name in STATIC_SECTIONS or not ids)
        if is_static_run:
            static_prefix_len += len(ids)
    return TokenizedPrompt(token_ids, section_tokens, static_prefix_len)


def encode_segment(tokenizer, text: str, specials: SpecialTokens | None = None) -> list[int]:
    """Ids of one segment, without BOS/EOS. Special tokens map to their ids only in
    template spans of a MarkedText; a plain str is client text throughout."""
    if not text:
        return []
    specials = specials or SpecialTokens.of(tokenizer)
    ids: list[int] = []
    position = 0
    for start, end, token_id in find_template_markers(text, specials):
        ids += encode_plain(tokenizer, text[position:start], specials)
        ids.append(token_id)
        position = end
    ids += encode_plain(tokenizer, text[position:], specials)
    return ids


def find_template_markers(text: str, specials: SpecialTokens) -> list[tuple[int, int, int]]:
    """(start, end, id) of each special token lying wholly inside a template span."""
    if specials.pattern is None or not isinstance(text, MarkedText):
        return []
    return [(match.start(), match.end(), specials.token_id(match))
            for start, end in text.template_spans()
            for match in specials.pattern.finditer(text, start, end)]


def encode_plain(tokenizer, text: str, specials: SpecialTokens) -> list[int]:
    """Ids of `text` with special-token text read as plain text (raises if the tokenizer ignores that)."""
    if not text:
        return []
    ids = list(tokenizer.encode(str(text), add_special_tokens=False, split_special_tokens=True))
    if not specials.id_set.isdisjoint(ids):
        raise ValueError(f"{type(tokenizer).__name__} parsed special tokens in plain text despite split_special_tokens=True")
    return ids
