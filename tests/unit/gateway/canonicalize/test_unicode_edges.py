"""Unicode edge cases go through canonicalize -> render -> section-stable tokenization without errors."""

from __future__ import annotations

import pytest

from gateway.canonicalize import canonicalize, render_raw, tokenize_segments
from gateway.canonicalize.surrogates import scrub_surrogates

EDGES = ["nul \x00 byte", "lone \ud800 surrogate \udfff", "rtl \u202e\u200f\u061c marks", "w" * 100_000]


@pytest.mark.parametrize("text", EDGES, ids=["nul", "surrogates", "rtl", "100k-word"])
def test_edge_text_canonicalizes_renders_and_tokenizes(registry, smollm2_tokenizer, text):
    body = scrub_surrogates({"messages": [{"role": "system", "content": f"Be brief. {text}"},
                                          {"role": "user", "content": text}], "context": [{"id": "d", "text": text}]})
    sections = canonicalize(body)
    rendered = registry.render("rag", sections, tokenizer=smollm2_tokenizer)
    assert tokenize_segments(smollm2_tokenizer, rendered.segments).token_ids
    assert render_raw(smollm2_tokenizer, body)


def test_lone_surrogates_become_replacement_characters_and_pairs_stay():
    assert scrub_surrogates({"k\udc00": ["a\ud800b", "\U0001F600"]}) == {"k\ufffd": ["a\ufffdb", "\U0001F600"]}
