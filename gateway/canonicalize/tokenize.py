"""Section-stable tokenization: each rendered segment is tokenized on its own.

Invariant: the ids of a segment depend only on that segment's text (no BPE merge
crosses a segment boundary, no special tokens are added), so two prompts whose
first k segments are equal share the token prefix of those k segments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from gateway.canonicalize.sections import STATIC_SECTIONS


@dataclass
class TokenizedPrompt:
    """token_ids: the whole prompt; section_tokens: tokens per section name;
    static_prefix_len: tokens of the leading run of static segments
    (system/tools/context) — the part worth caching and pinning."""

    token_ids: list[int]
    section_tokens: dict[str, int] = field(default_factory=dict)
    static_prefix_len: int = 0


def tokenize_segments(tokenizer, segments: Iterable[tuple[str, str]]) -> TokenizedPrompt:
    """Tokenize (section_name, text) segments one by one and concatenate the ids."""
    token_ids: list[int] = []
    section_tokens: dict[str, int] = {}
    static_prefix_len = 0
    is_static_run = True
    for name, text in segments:
        ids = encode_segment(tokenizer, text)
        token_ids.extend(ids)
        section_tokens[name] = section_tokens.get(name, 0) + len(ids)
        is_static_run = is_static_run and (name in STATIC_SECTIONS or not ids)
        if is_static_run:
            static_prefix_len += len(ids)
    return TokenizedPrompt(token_ids, section_tokens, static_prefix_len)


def encode_segment(tokenizer, text: str) -> list[int]:
    """Ids of one segment, without BOS/EOS (markers in the text map to special ids)."""
    if not text:
        return []
    return list(tokenizer.encode(text, add_special_tokens=False))
