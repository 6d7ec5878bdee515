"""CopyPolicy: load a host-tier prefix or recompute it, by the two costs it has measured."""

from engine.host_tier.copy_policy import CopyPolicy


def test_it_loads_until_both_costs_are_measured():
    policy = CopyPolicy(page_size=16)
    assert policy.should_load(4)
    policy.observe_copy(4, 0.004)  # 1 ms a page
    assert policy.should_load(4)
    assert policy.stats()["loads_chosen"] == 2 and policy.stats()["recomputes_chosen"] == 0


def test_it_loads_when_a_page_copies_faster_than_its_tokens_prefill():
    policy = CopyPolicy(page_size=16)
    policy.observe_copy(8, 0.008)  # 1 ms a page
    policy.observe_prefill(1024, 1.024)  # 1 ms a token: 16 ms a page
    assert policy.should_load(8)


def test_it_recomputes_when_the_copy_is_dearer():
    policy = CopyPolicy(page_size=16)
    policy.observe_copy(8, 0.8)  # 100 ms a page
    policy.observe_prefill(1024, 1.024)  # 16 ms a page
    assert not policy.should_load(8)
    assert policy.stats()["recomputes_chosen"] == 1


def test_costs_are_moving_averages_of_the_samples():
    policy = CopyPolicy(page_size=16)
    policy.observe_copy(1, 1.0)
    policy.observe_copy(1, 0.0)
    assert abs(policy.copy_s_per_page - 0.8) < 1e-12  # the newest sample weighs EMA = 0.2
    policy.observe_prefill(0, 5.0)  # nothing prefilled: no sample
    assert policy.prefill_s_per_token is None
