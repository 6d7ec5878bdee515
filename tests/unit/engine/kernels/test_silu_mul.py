"""The native gated activation (silu_mul.cpp): close to a float64 reference at any width (vector lanes and a
tail), saturating cleanly for large |gate|, rounded once to bfloat16 the way torch rounds a float, and each
row's bits independent of the rows beside it."""

import pytest
import torch

from engine.kernels.cpu.native import native_kernels


@pytest.fixture(scope="module")
def native():
    module = native_kernels()
    assert module is not None, "the native CPU kernels must build where the tests run (a C++ compiler is needed)"
    return module


def reference(gate_up: torch.Tensor) -> torch.Tensor:
    g, u = gate_up.double().chunk(2, dim=-1)
    return torch.nn.functional.silu(g) * u


@pytest.mark.parametrize("width", [1536, 40, 7])  # SmolLM2's MLP; 2.5 vectors; a tail alone
def test_float32_matches_a_float64_reference(native, width):
    gate_up = torch.randn(33, 2 * width, generator=torch.Generator().manual_seed(width)) * 4
    out = native.silu_mul(gate_up)
    assert out.shape == (33, width) and out.dtype == torch.float32
    assert torch.allclose(out.double(), reference(gate_up), rtol=2e-6, atol=1e-7)


def test_large_gates_saturate_and_nan_stays_nan(native):
    g = torch.tensor([-1000.0, -100.0, -88.0, 0.0, 88.0, 100.0, 1000.0, float("nan")] * 2)
    out = native.silu_mul(torch.cat([g, torch.full_like(g, 2.0)])[None])[0]
    expected = torch.tensor([0.0, 0.0, 0.0, 0.0, 176.0, 200.0, 2000.0, float("nan")] * 2)
    assert torch.allclose(out[:7], expected[:7], atol=1e-30) and torch.isnan(out[7]) and torch.isnan(out[15])
    assert torch.isfinite(out[:7]).all()


def test_bfloat16_is_the_float32_result_rounded_once_and_rows_are_independent(native):
    gate_up = (torch.randn(17, 2 * 1000, generator=torch.Generator().manual_seed(5)) * 3).to(torch.bfloat16)
    out = native.silu_mul(gate_up)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, native.silu_mul(gate_up.float()).to(torch.bfloat16))  # the same lanes, rounded once
    assert torch.equal(native.silu_mul(gate_up[5:6]), out[5:6])
