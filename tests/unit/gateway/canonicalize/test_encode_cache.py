"""EncodeCache answers exactly what the tokenizer would, asks it once per recent text, and stays bounded."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway.canonicalize.encode_cache import EncodeCache
from gateway.canonicalize.marked_text import MarkedText


class CountingTokenizer:
    eos_token = "</s>"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, text: str, **kwargs) -> list[int]:
        self.calls += 1
        return [ord(c) + (1000 if kwargs.get("add_special_tokens") else 0) for c in str(text)]


def test_repeated_text_is_encoded_once_with_the_same_ids():
    tokenizer = CountingTokenizer()
    cache = EncodeCache(tokenizer)
    first = cache.encode("system prompt", add_special_tokens=False)
    first.append(-1)  # callers may mutate their copy
    assert cache.encode("system prompt", add_special_tokens=False) == tokenizer.encode("system prompt")
    assert tokenizer.calls == 2  # one through the cache, one direct


def test_keyword_arguments_and_text_type_are_part_of_the_key():
    tokenizer = CountingTokenizer()
    cache = EncodeCache(tokenizer)
    assert cache.encode("ab", add_special_tokens=True) != cache.encode("ab", add_special_tokens=False)
    cache.encode(MarkedText("ab"), add_special_tokens=False)
    assert tokenizer.calls == 3


def test_least_recently_used_texts_are_forgotten():
    tokenizer = CountingTokenizer()
    cache = EncodeCache(tokenizer, max_entries=2)
    for text in ("a", "b", "a", "c", "a", "b"):
        cache.encode(text)
    assert tokenizer.calls == 4  # a, b, c, then b again (evicted by c)
    assert cache.eos_token == "</s>"  # other attributes are the tokenizer's
    with pytest.raises(ValueError):
        EncodeCache(tokenizer, max_entries=0)


def test_threads_sharing_one_cache_get_the_tokenizers_ids():
    tokenizer = CountingTokenizer()
    cache = EncodeCache(tokenizer, max_entries=8)
    texts = [f"segment {i % 12}" for i in range(400)]

    def encode_all(_):
        return [cache.encode(text, add_special_tokens=False) for text in texts]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(encode_all, range(4)))
    expected = [tokenizer.encode(text) for text in texts]
    assert all(result == expected for result in results)
    assert len(cache._ids) <= 8
