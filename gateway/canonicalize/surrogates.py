"""scrub_surrogates: lone UTF-16 surrogates in client JSON become U+FFFD before anything reads them.

JSON may carry "\\ud800" escapes that decode to a str no UTF-8 codec, tokenizer or
database accepts. A valid pair ("\\ud83d\\ude00") is already one code point after
decoding, so every surrogate left in a str is lone and is replaced, one for one.
"""

from __future__ import annotations

import re
from typing import Any

SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(value: Any) -> Any:
    """`value` (JSON types, nested) with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value) if SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {scrub_surrogates(key): scrub_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub_surrogates(item) for item in value]
    return value
