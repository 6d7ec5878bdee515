"""Sampler: greedy, temperature, top-k, top-p, seeds."""

import torch

from engine.sampler import Sampler, filter_top_k, filter_top_p, make_generator, sample_row
from engine.sampling_params import SamplingParams


def test_greedy_rows_take_the_argmax():
    logits = torch.tensor([[0.1, 3.0, 0.2], [5.0, 1.0, 0.0]])
    params = [SamplingParams(), SamplingParams(temperature=0.7, top_k=1)]
    assert Sampler().sample(logits, params, [make_generator(0)] * 2) == [1, 0]


def test_top_k_keeps_only_the_k_largest():
    filtered = filter_top_k(torch.tensor([1.0, 4.0, 3.0, 2.0]), 2)
    assert torch.isinf(filtered[[0, 3]]).all() and torch.equal(filtered[[1, 2]], torch.tensor([4.0, 3.0]))


def test_top_p_keeps_the_smallest_set_reaching_p_and_always_the_best():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    kept = ~torch.isinf(filter_top_p(logits, 0.7))
    assert kept.tolist() == [True, True, False, False]
    assert (~torch.isinf(filter_top_p(logits, 0.01))).tolist() == [True, False, False, False]


def test_sampling_only_draws_tokens_that_survive_the_filters():
    logits = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1]))
    params = SamplingParams(temperature=1.5, top_k=3, top_p=0.6)
    generator = make_generator(7)
    drawn = {sample_row(logits, params, generator) for _ in range(200)}
    assert drawn <= {0, 1} and len(drawn) == 2


def test_same_seed_gives_the_same_draws():
    logits = torch.randn(1000)
    params = SamplingParams(temperature=1.0)
    first = [sample_row(logits, params, g) for g in [make_generator(3)] for _ in range(20)]
    second = [sample_row(logits, params, g) for g in [make_generator(3)] for _ in range(20)]
    other = [sample_row(logits, params, g) for g in [make_generator(4)] for _ in range(20)]
    assert first == second and first != other


def test_temperature_sharpens_and_flattens():
    logits = torch.tensor([2.0, 1.0, 0.0])
    cold = [sample_row(logits, SamplingParams(temperature=0.05), make_generator(i)) for i in range(50)]
    hot = [sample_row(logits, SamplingParams(temperature=5.0), make_generator(i)) for i in range(200)]
    assert set(cold) == {0} and set(hot) == {0, 1, 2}


def test_sampling_params_reject_bad_values():
    import pytest

    for bad in ({"temperature": -1}, {"top_p": 0}, {"top_k": -1}, {"max_tokens": -1}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)
    assert SamplingParams(stop="x").stop == ["x"]
