"""Whitespace normalization of static text, so cosmetic drift never breaks a prefix.

Invariant: normalize_whitespace is idempotent, and two texts that differ only in
line endings, trailing spaces, runs of inner spaces, runs of blank lines or
surrounding blank space normalize to the same string. Leading indentation is
kept (it can carry meaning in code and lists).
"""

from __future__ import annotations

import re

_INNER_SPACES = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")
_BLANK_RUN = re.compile(r"\n{3,}")


def normalize_whitespace(text: str) -> str:
    """Canonical spacing of `text` (see module docstring)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [_INNER_SPACES.sub(" ", line.rstrip()) for line in text.split("\n")]
    return _BLANK_RUN.sub("\n\n", "\n".join(lines)).strip("\n").rstrip()
