"""what_if.replay: each variant on its own cold oracle, page-aligned hits, the last prompt token never matched."""

from __future__ import annotations

from datetime import datetime, timezone

from gateway.insight.what_if import replay
from gateway.prompt_templates.samples import Sample

PAGE = 4


def samples(n: int) -> list[Sample]:
    return [Sample(i, {"i": i}, datetime(2026, 1, 1, tzinfo=timezone.utc)) for i in range(n)]


def test_shared_prefix_hits_whole_pages_after_the_first_request():
    prefix = list(range(100, 110))  # 10 tokens: two whole pages shared
    result = replay(samples(3), lambda s: (prefix + [s.body["i"], 7, 8], 10), page_size=PAGE, max_tokens=1000,
                    template_version=1)
    assert result.prefilled_tokens == [13, 13 - 8, 13 - 8]
    assert result.cached_tokens == 16 and result.prompt_tokens == 39
    assert result.hit_rate == 16 / 39 and result.static_prefix_tokens == 10


def test_a_repeated_prompt_still_prefills_its_last_token_and_a_changing_first_token_hits_nothing():
    same = replay(samples(2), lambda s: (list(range(9)), 8), page_size=PAGE, max_tokens=1000, template_version=None)
    assert same.prefilled_tokens == [9, 1]  # 8 of 9 tokens: two pages; the ninth is fed
    moving = replay(samples(3), lambda s: ([s.body["i"]] + list(range(20)), 0), page_size=PAGE, max_tokens=1000,
                    template_version=2)
    assert moving.cached_tokens == 0 and moving.hit_rate == 0.0
    assert replay([], lambda s: ([], 0), page_size=PAGE, max_tokens=1000, template_version=None).hit_rate is None
