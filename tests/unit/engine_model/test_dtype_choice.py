"""The CPU default dtype is chosen by measurement: bfloat16 only with native support and a clear win."""

import math

import pytest
import torch

import engine.dtype_choice as choice
from engine.runner import resolve_dtype

CPU = torch.device("cpu")


def never_measured(num_threads):
    raise AssertionError("without native bfloat16 nothing may be timed")


def test_without_native_bfloat16_auto_is_float32_and_nothing_is_timed(monkeypatch):
    monkeypatch.setattr(choice, "cpu_has_native_bfloat16", lambda: False)
    monkeypatch.setattr(choice, "bfloat16_speedup", never_measured)
    assert resolve_dtype("auto", CPU) == resolve_dtype(None, CPU) == torch.float32


@pytest.mark.parametrize(("speedup", "expected"), [(2.3, torch.bfloat16), (1.2, torch.bfloat16),
                                                   (1.19, torch.float32), (0.6, torch.float32)])
def test_with_native_bfloat16_auto_follows_the_measured_speedup(monkeypatch, speedup, expected):
    monkeypatch.setattr(choice, "cpu_has_native_bfloat16", lambda: True)
    monkeypatch.setattr(choice, "bfloat16_speedup", lambda num_threads: speedup)
    assert resolve_dtype("auto", CPU) == expected


def test_explicit_dtypes_and_cuda_are_never_measured(monkeypatch):
    monkeypatch.setattr(choice, "bfloat16_speedup", never_measured)
    assert resolve_dtype("float32", CPU) == torch.float32
    assert resolve_dtype("bf16", CPU) == torch.bfloat16
    assert resolve_dtype(None, torch.device("cuda")) == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("float8", CPU)


def test_the_real_probe_measures_once_per_thread_count(monkeypatch):
    choice.bfloat16_speedup.cache_clear()
    speedup = choice.bfloat16_speedup(torch.get_num_threads())
    assert math.isfinite(speedup) and speedup > 0
    monkeypatch.setattr(choice, "_seconds", lambda dtype, rows: pytest.fail("timed a second time"))
    assert choice.bfloat16_speedup(torch.get_num_threads()) == speedup
