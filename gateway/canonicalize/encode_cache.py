"""EncodeCache: a tokenizer whose `encode` remembers the ids of the texts it saw last.

Exact: a text's ids depend only on the text and the keyword arguments, which together are the
key, so a cached answer is the answer. Canonical renderings repeat their static segments
(system prompt, tools, documents) request after request, and a raw request's canonical rendering
(made by the canonical shadow's worker) repeats many of the pieces its raw rendering (made on the
request path) just encoded, so one cache shared by both makes most of that tokenization a lookup.
Bounded (LRU, `max_entries` texts); every other attribute is the wrapped tokenizer's.
Thread-safe: the table is guarded by a lock, held only for lookups and stores (never while the
tokenizer runs, so two threads may both encode a text the first time; both get its ids).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class EncodeCache:
    def __init__(self, tokenizer: Any, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.tokenizer = tokenizer
        self.max_entries = max_entries
        self._ids: OrderedDict[tuple, tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        key = (type(text), str(text), tuple(sorted(kwargs.items())))
        with self._lock:
            ids = self._ids.get(key)
            if ids is not None:
                self._ids.move_to_end(key)
                return list(ids)
        ids = tuple(self.tokenizer.encode(text, **kwargs))
        with self._lock:
            self._ids[key] = ids
            self._ids.move_to_end(key)
            if len(self._ids) > self.max_entries:
                self._ids.popitem(last=False)
        return list(ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)
