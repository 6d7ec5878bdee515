"""ShadowIndex over the engine's real RadixCache: match-then-insert, page alignment, namespaces
kept apart, and a bounded index that evicts least-recently-used sequences."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.insight.shadow import ShadowIndex


def longest_aligned_prefix(seen: list[list[int]], tokens: list[int], page_size: int) -> int:
    best = 0
    for earlier in seen:
        num_equal = 0
        for a, b in zip(earlier, tokens):
            if a != b:
                break
            num_equal += 1
        best = max(best, num_equal)
    return min(best, len(tokens)) // page_size * page_size


def test_first_request_misses_and_a_repeat_hits_every_whole_page():
    index = ShadowIndex(page_size=4, max_tokens_per_tenant=1024)
    tokens = list(range(42))
    assert index.observe("t1", tokens) == 0
    assert index.observe("t1", tokens) == 40  # 42 tokens = 10 whole pages + a 2-token tail


def test_shared_prefix_hits_up_to_the_last_whole_shared_page():
    index = ShadowIndex(page_size=4, max_tokens_per_tenant=1024)
    index.observe("t1", list(range(40)))
    assert index.observe("t1", list(range(30)) + [999] * 10) == 28


def test_namespaces_never_share_cached_tokens():
    index = ShadowIndex(page_size=4, max_tokens_per_tenant=1024)
    index.observe("tenant-a", list(range(40)))
    assert index.observe("tenant-b", list(range(40))) == 0


def test_bounded_index_evicts_the_least_recently_used_sequence():
    index = ShadowIndex(page_size=4, max_tokens_per_tenant=64)  # 16 pages: room for 2 x 32 tokens
    old, kept = list(range(32)), list(range(100, 132))
    index.observe("t", old)
    index.observe("t", kept)
    index.observe("t", kept)  # refresh: `old` is now least recently used
    index.observe("t", list(range(200, 232)))  # needs 8 pages: evicts `old`
    assert index.num_cached_tokens("t") <= 64
    assert index.observe("t", kept) == 32
    assert index.observe("t", old) == 0


def test_sequence_longer_than_the_bound_is_indexed_up_to_the_bound():
    index = ShadowIndex(page_size=4, max_tokens_per_tenant=32)
    tokens = list(range(100))
    assert index.observe("t", tokens) == 0
    assert index.observe("t", tokens) == 32


def test_namespace_count_is_bounded_lru():
    index = ShadowIndex(page_size=4, max_tokens_per_tenant=64, max_namespaces=2)
    for name in ("a", "b", "a", "c"):
        index.observe(name, list(range(8)))
    assert index.num_namespaces == 2
    assert index.observe("a", list(range(8))) == 8  # kept (recently used)
    assert index.observe("b", list(range(8))) == 0  # evicted as least recently used


def test_invalid_bounds_are_rejected():
    with pytest.raises(ValueError):
        ShadowIndex(page_size=16, max_tokens_per_tenant=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=24), min_size=1, max_size=12))
def test_unbounded_index_reports_the_longest_page_aligned_prefix_seen_before(sequences):
    index = ShadowIndex(page_size=2, max_tokens_per_tenant=10_000)
    seen: list[list[int]] = []
    for tokens in sequences:
        assert index.observe("t", tokens) == longest_aligned_prefix(seen, tokens, 2)
        seen.append(tokens)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=40), min_size=1, max_size=20))
def test_bounded_index_never_over_reports_nor_exceeds_its_bound(sequences):
    index = ShadowIndex(page_size=2, max_tokens_per_tenant=16)
    seen: list[list[int]] = []
    for tokens in sequences:
        assert index.observe("t", tokens) <= longest_aligned_prefix(seen, tokens, 2)
        assert index.num_cached_tokens("t") <= 16
        seen.append(tokens)
