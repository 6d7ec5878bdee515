"""RateLimiter: per-tenant token buckets for requests and tokens per minute, on a fake clock."""

from __future__ import annotations

import math

import pytest

from gateway.tenants.rate_limits import RateLimited, RateLimiter, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_requests_per_minute_refuses_the_request_past_the_limit_until_it_refills():
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    states = [limiter.acquire(1, 3, None, 10) for _ in range(3)]
    assert [s.remaining_requests for s in states] == [2, 1, 0]
    with pytest.raises(RateLimited) as refused:
        limiter.acquire(1, 3, None, 10)
    assert refused.value.which == "requests"
    assert refused.value.retry_after_s == pytest.approx(20.0)  # one request refills in 60 / 3 s
    clock.now += 20.0
    assert limiter.acquire(1, 3, None, 10).remaining_requests == 0


def test_a_refused_request_takes_nothing_from_either_bucket():
    limiter = RateLimiter(clock=Clock())
    limiter.acquire(1, 10, 100, 90)
    with pytest.raises(RateLimited) as refused:
        limiter.acquire(1, 10, 100, 20)
    assert refused.value.which == "tokens"
    state = limiter.acquire(1, 10, 100, 10)
    assert (state.remaining_requests, state.remaining_tokens) == (8, 0)


def test_settle_refunds_the_unused_estimate_but_never_charges_more():
    limiter = RateLimiter(clock=Clock())
    limiter.acquire(1, None, 1000, 600)
    limiter.settle(1, 600, 150)
    assert limiter.acquire(1, None, 1000, 0).remaining_tokens == 850
    limiter.settle(1, 100, 400)
    assert limiter.acquire(1, None, 1000, 0).remaining_tokens == 850


def test_tenants_have_separate_buckets_and_defaults_apply_without_their_own_limit():
    limiter = RateLimiter(default_rpm=1, clock=Clock())
    limiter.acquire(1, None, None, 1)
    with pytest.raises(RateLimited):
        limiter.acquire(1, None, None, 1)
    assert limiter.acquire(2, None, None, 1).limit_requests == 1
    assert limiter.acquire(3, 50, None, 1).limit_requests == 50


def test_no_limit_means_no_bucket_and_no_headers():
    state = RateLimiter(clock=Clock()).acquire(1, None, 0, 10**9)
    assert state.headers() == {}


def test_a_request_larger_than_the_whole_limit_can_never_fit():
    with pytest.raises(RateLimited) as refused:
        RateLimiter(clock=Clock()).acquire(1, None, 100, 101)
    assert refused.value.retry_after_s == math.inf


def test_headers_are_openais_names_and_formats():
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    headers = limiter.acquire(7, 60, 6000, 3000).headers()
    assert headers == {
        "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-tokens": "6000", "x-ratelimit-remaining-tokens": "3000", "x-ratelimit-reset-tokens": "30s",
    }


@pytest.mark.parametrize("seconds, text", [(0.25, "250ms"), (0.0, "0ms"), (12.2, "13s"), (360, "6m0s"), (3723, "1h2m3s")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
