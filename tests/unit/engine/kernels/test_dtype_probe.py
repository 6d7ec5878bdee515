"""The CPU default dtype is chosen by measurement: bfloat16 only with native support and a clear win."""

import math

import pytest
import torch

import engine.kernels.cpu.dtype_probe as choice
from engine.runner import resolve_dtype

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def fresh_verdict():
    choice.measured_cpu_dtype.cache_clear()
    yield
    choice.measured_cpu_dtype.cache_clear()


def never_measured():
    raise AssertionError("nothing may be timed here")


def test_without_native_bfloat16_auto_is_float32_and_nothing_is_timed(monkeypatch):
    monkeypatch.setattr(choice, "cpu_has_native_bfloat16", lambda: False)
    monkeypatch.setattr(choice, "bfloat16_speedup", never_measured)
    assert resolve_dtype("auto", CPU) == resolve_dtype(None, CPU) == torch.float32


@pytest.mark.parametrize(("speedup", "expected"), [(2.3, torch.bfloat16), (1.2, torch.bfloat16),
                                                   (1.19, torch.float32), (0.55, torch.float32)])
def test_with_native_bfloat16_auto_follows_the_measured_speedup(monkeypatch, speedup, expected):
    monkeypatch.setattr(choice, "cpu_has_native_bfloat16", lambda: True)
    monkeypatch.setattr(choice, "bfloat16_speedup", lambda: speedup)
    assert resolve_dtype("auto", CPU) == expected


def test_explicit_dtypes_and_cuda_are_never_measured(monkeypatch):
    monkeypatch.setattr(choice, "bfloat16_speedup", never_measured)
    assert resolve_dtype("float32", CPU) == torch.float32
    assert resolve_dtype("bf16", CPU) == torch.bfloat16
    assert resolve_dtype(None, torch.device("cuda")) == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("float8", CPU)


def test_the_real_probe_times_both_dtypes_once_per_thread_count(monkeypatch):
    monkeypatch.setattr(choice, "cpu_has_native_bfloat16", lambda: True)
    timed = []
    real_seconds = choice._seconds

    def counting_seconds(dtype, rows):
        timed.append((dtype, rows))
        return real_seconds(dtype, rows)

    monkeypatch.setattr(choice, "_seconds", counting_seconds)
    speedup = choice.bfloat16_speedup()
    assert math.isfinite(speedup) and speedup > 0
    assert sorted(timed, key=str) == sorted([(d, r) for d in (torch.float32, torch.bfloat16)
                                             for r in choice.PROBE_ROWS], key=str)
    timed.clear()
    first = resolve_dtype("auto", CPU)
    assert first in (torch.float32, torch.bfloat16) and len(timed) == 2 * len(choice.PROBE_ROWS)
    assert resolve_dtype("auto", CPU) == first and len(timed) == 2 * len(choice.PROBE_ROWS)  # not timed again
