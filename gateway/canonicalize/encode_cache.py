"""EncodeCache: a tokenizer whose `encode` remembers the ids of the texts it saw last.

Exact: a text's ids depend only on the text and the keyword arguments, which together are the
key, so a cached answer is the answer. Canonical renderings repeat their static segments
(system prompt, tools, documents) request after request, so most of a tenant's canonical
tokenization is a lookup. Bounded (LRU, `max_entries` texts); every other attribute is the
wrapped tokenizer's. Not thread-safe: one owner thread (the canonical shadow's worker).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class EncodeCache:
    def __init__(self, tokenizer: Any, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.tokenizer = tokenizer
        self.max_entries = max_entries
        self._ids: OrderedDict[tuple, list[int]] = OrderedDict()

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        key = (type(text), str(text), tuple(sorted(kwargs.items())))
        ids = self._ids.get(key)
        if ids is None:
            ids = self._ids[key] = list(self.tokenizer.encode(text, **kwargs))
            if len(self._ids) > self.max_entries:
                self._ids.popitem(last=False)
        else:
            self._ids.move_to_end(key)
        return list(ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)
