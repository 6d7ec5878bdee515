"""CanonicalShadow: the canonical order's cached tokens per cache domain, computed on one worker in order."""

from __future__ import annotations

import threading

from gateway.insight.counterfactual import CanonicalPrompt, CanonicalShadow
from gateway.insight.shadow import ShadowIndex

PAGE = 4


def prompt(*ids: int, static: int = 0, system: int = 0) -> CanonicalPrompt:
    return CanonicalPrompt(tuple(ids), static, system)


def test_second_request_gets_the_shared_canonical_prefix_page_aligned():
    shadow = CanonicalShadow(ShadowIndex(page_size=PAGE, max_tokens_per_tenant=64))
    first = shadow.observe_later("ns", lambda: prompt(*range(10), static=9, system=5)).result()
    second = shadow.observe_later("ns", lambda: prompt(*range(9), 99, 98, static=9, system=5)).result()
    shadow.close()
    assert (first.cached_tokens, first.prompt_tokens) == (0, 10)
    assert (second.cached_tokens, second.prompt_tokens) == (8, 11)  # 9 shared tokens: two full pages
    assert (second.static_prefix_tokens, second.system_prefix_tokens) == (9, 5)


def test_cache_domains_do_not_share():
    shadow = CanonicalShadow(ShadowIndex(page_size=PAGE, max_tokens_per_tenant=64))
    shadow.observe("a", prompt(*range(8)))
    assert shadow.observe("b", prompt(*range(8))).cached_tokens == 0
    assert shadow.observe("a", prompt(*range(8))).cached_tokens == 8
    shadow.close()


def test_observations_run_in_submission_order_without_blocking_the_caller():
    shadow = CanonicalShadow(ShadowIndex(page_size=PAGE, max_tokens_per_tenant=64))
    gate = threading.Event()

    def slow_first():
        gate.wait(5)
        return prompt(*range(8))

    first = shadow.observe_later("ns", slow_first)
    second = shadow.observe_later("ns", lambda: prompt(*range(8)))
    assert not first.done() and not second.done()  # queued: the caller did not wait
    gate.set()
    assert first.result(5).cached_tokens == 0 and second.result(5).cached_tokens == 8
    shadow.close()


def test_a_failed_rendering_gives_no_figure_and_the_worker_goes_on():
    shadow = CanonicalShadow(ShadowIndex(page_size=PAGE, max_tokens_per_tenant=64))

    def broken():
        raise ValueError("template error")

    assert shadow.observe_later("ns", broken).result(5) is None
    assert shadow.observe_later("ns", lambda: None).result(5) is None
    assert shadow.observe_later("ns", lambda: prompt(*range(8))).result(5).cached_tokens == 0
    shadow.close()


def test_memory_stays_bounded_by_the_index_size():
    shadow = CanonicalShadow(ShadowIndex(page_size=PAGE, max_tokens_per_tenant=16))
    for start in range(0, 400, 8):
        shadow.observe("ns", prompt(*range(start, start + 8)))
    assert shadow.index.num_cached_tokens("ns") <= 16
    shadow.close()
