"""Canonicalizer: split chat requests into canonical sections and tokenize them section-stably.

    from gateway.canonicalize import canonicalize, Sections, DynamicRules, tokenize_segments, TokenizedPrompt, render_raw
"""

from gateway.canonicalize.canonicalizer import canonicalize, message_text
from gateway.canonicalize.dynamic import DEFAULT_PATTERNS, DynamicRules, DynamicSplit
from gateway.canonicalize.raw import render_raw, render_raw_text
from gateway.canonicalize.sections import SECTION_ORDER, STATIC_SECTIONS, Doc, Sections, Signals, hash_value
from gateway.canonicalize.tokenize import TokenizedPrompt, tokenize_segments
from gateway.canonicalize.tools import canonical_tools, to_json, tool_name
from gateway.canonicalize.whitespace import normalize_whitespace

__all__ = [
    "DEFAULT_PATTERNS",
    "SECTION_ORDER",
    "STATIC_SECTIONS",
    "Doc",
    "DynamicRules",
    "DynamicSplit",
    "Sections",
    "Signals",
    "TokenizedPrompt",
    "canonical_tools",
    "canonicalize",
    "hash_value",
    "message_text",
    "normalize_whitespace",
    "render_raw",
    "render_raw_text",
    "tokenize_segments",
    "to_json",
    "tool_name",
]
