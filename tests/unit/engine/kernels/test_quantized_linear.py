"""Weight-only int8/int4 linears (and w4a8): close to the dense product, a row's bits independent of its batch,
and "auto" takes a quantized mode only where the probe times it clearly faster."""

import pytest
import torch

import engine.kernels.cpu.quant_probe as probe
from engine.kernels import choose_dtype, choose_quantization, make_linear
from engine.kernels.cpu.quantized_linear import (Int4WeightLinear, Int8WeightLinear, dequantize_int4, dequantize_int8,
                                                  quantize_int4, quantize_int8)
from engine.kernels.cpu.row_linear import Int4DotRowLinear, Int4RowLinear, Int8DotRowLinear
from engine.runner import resolve_quantization

CPU = torch.device("cpu")
# relative error of the product (Frobenius norm) that each mode's rounding allows on Gaussian weights
MAX_RELATIVE_ERROR = {"int8": 0.02, "int4": 0.15, "w4a8": 0.15, "w8a8": 0.03}


def gaussian(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", ["int8", "int4", "w4a8", "w8a8"])
def test_quantized_product_stays_close_to_the_dense_one(mode, dtype):
    weight, bias, x = gaussian(192, 128) / 10, gaussian(192, seed=1), gaussian(7, 128, seed=2)
    linear = make_linear(weight.to(dtype), bias.to(dtype), quantization=mode)
    expected = x @ weight.T + bias
    got = linear(x.to(dtype)).float()
    assert got.shape == (7, 192) and got.dtype == torch.float32
    assert (got - expected).norm() / expected.norm() < MAX_RELATIVE_ERROR[mode]


@pytest.mark.parametrize("mode", ["int8", "int4", "w4a8", "w8a8"])
def test_a_rows_result_does_not_depend_on_its_batch(mode):
    linear = make_linear(gaussian(256, 64) / 8, quantization=mode)
    x = gaussian(33, 64, seed=3)
    together = linear(x)
    alone = torch.cat([linear(x[i : i + 1]) for i in range(x.shape[0])])
    assert torch.equal(together, alone)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mode", ["int8", "int4", "w4a8", "w8a8"])
def test_generated_rows_take_a_by_row_kernel_close_to_the_product_and_batch_free(mode, dtype):
    """The by-row kernel (int4: the same quantized weights, lane-packed; int8: the unquantized weight; w4a8:
    int4's weights times int8 activations) stays within the mode's error of the dense product, and a row's
    bits do not depend on its batch."""
    weight, bias, x = gaussian(208, 96) / 10, gaussian(208, seed=1), gaussian(9, 96, seed=2)
    linear = make_linear(weight.to(dtype), bias.to(dtype), quantization=mode)
    assert linear.by_row is not None, "the native kernels must build where the tests run"
    got = linear.by_row(x.to(dtype))
    expected = x @ weight.T + bias
    assert got.shape == (9, 208) and got.dtype == dtype
    assert (got.float() - expected).norm() / expected.norm() < MAX_RELATIVE_ERROR[mode]
    if mode == "int4":  # the same weights as the product's: the two differ by float32 rounding only
        assert (got.float() - linear(x.to(dtype)).float()).abs().max() < 0.05
    for size in (1, 2, 4, 5):
        pieces = torch.cat([linear.by_row(x[i : i + size].to(dtype)) for i in range(0, 9, size)])
        assert torch.equal(pieces, got), size


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int4_prompt_rows_run_the_dense_product_of_the_weights_the_int4_kernels_read(dtype, monkeypatch):
    weight, x = gaussian(64, 96) / 10, gaussian(5, 96, seed=2).to(dtype)
    linear = make_linear(weight.to(dtype), quantization="int4")
    assert linear.prompt_rows is not None and linear.packed is None, "the native kernels must build here"
    # torch's int4 kernel (what runs where the native kernels do not build) reads the same values
    monkeypatch.setattr("engine.kernels.cpu.quantized_linear.native_for", lambda *args: None)
    plain = make_linear(weight.to(dtype), quantization="int4")
    assert plain.by_row is None and plain.prompt_rows is None
    # (torch's kernel rounds float32 activations to bfloat16 on its way)
    assert (linear(x).float() - plain(x).float()).abs().max() < 0.02
    tolerance = 0.02 if dtype == torch.bfloat16 else 1e-5  # both kinds of row: float32 sums of one weight
    assert (linear.by_row(x).float() - linear(x).float()).abs().max() < tolerance


def q4_1_weight(out_features: int, in_features: int, seed: int = 0) -> torch.Tensor:
    """A float32 weight made of GGUF Q4_1 blocks, as a Q4_1 model dequantizes: per 32 inputs a float16 scale d
    and min m, w = q * d + m, with q = 0 and q = 15 in every block (the quantizer maps each block's min and max
    there)."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (out_features, in_features // 32, 32), generator=generator)
    q[..., 0], q[..., 7] = 0, 15
    d = (torch.rand(out_features, in_features // 32, 1, generator=generator) / 50).half().float()
    m = (-7.5 * d - torch.rand(d.shape, generator=generator) / 100).half().float()
    return (q.float() * d + m).view(out_features, in_features)


def test_int4_gives_a_q4_1_models_weights_back_bit_for_bit_and_its_prompt_rows_the_float32_bits():
    weight, x = q4_1_weight(96, 160), gaussian(6, 160, seed=4)
    assert torch.equal(dequantize_int4(*quantize_int4(weight)), weight)
    linear = make_linear(weight, quantization="int4")
    dense = make_linear(weight, quantization="none")
    assert torch.equal(linear(x), dense(x))  # prompt rows: the float32 model's product, bit for bit
    # generated rows: the same weights, float32 sums in another order
    assert (linear.by_row(x) - dense(x)).abs().max() < 1e-5 * x.abs().sum(dim=1).max()


def test_int8_gives_a_q8_0_weight_back_bit_for_bit_and_its_rows_the_float32_product():
    """Q8_0 blocks (the default model's embedding and tied head): per 32 inputs a float16 scale d and q in
    -127..127 with |q| = 127 somewhere (the quantizer maps the block's largest magnitude there)."""
    generator = torch.Generator().manual_seed(6)
    q = torch.randint(-127, 128, (80, 4, 32), generator=generator)
    q[..., 3] = torch.where(torch.rand(80, 4, generator=generator) < 0.5, -127, 127)
    d = (torch.rand(80, 4, 1, generator=generator) / 500).half().float()
    weight, x = (q.float() * d).view(80, 128), gaussian(5, 128, seed=7)
    assert torch.equal(dequantize_int8(*quantize_int8(weight)), weight)
    linear, dense = make_linear(weight, quantization="int8"), make_linear(weight)
    assert torch.equal(linear(x), dense(x))
    assert (linear.by_row(x) - dense(x)).abs().max() < 1e-5 * x.abs().sum(dim=1).max()


def test_int4_keeps_constant_and_tiny_groups_at_their_min():
    weight = gaussian(16, 64) / 10
    weight[0, :32] = 0.25  # a constant group: scale 0
    weight[1, 32:] = 1e-9 * gaussian(32, seed=5)  # a range below float16's: scale rounds to 0
    q, scale, minimum = quantize_int4(weight)
    assert scale[0, 0] == 0 and (q[0, :32] == 0).all() and torch.equal(dequantize_int4(q, scale, minimum)[0, :32],
                                                                       weight[0, :32])
    assert scale[1, 1] == 0 and (q[1, 32:] == 0).all() and dequantize_int4(q, scale, minimum)[1, 32:].abs().max() < 1e-7
    assert (dequantize_int4(q, scale, minimum)[2:] - weight[2:]).abs().max() < 0.5 * scale[2:].float().max() + 1e-3


def test_int4_refuses_weights_beyond_float16():
    with pytest.raises(ValueError, match="float16"):
        quantize_int4(torch.full((16, 32), 1e6))


def test_make_linear_picks_the_kernel_per_mode_and_falls_back_for_odd_widths():
    assert isinstance(make_linear(gaussian(64, 64), quantization="int8"), Int8WeightLinear)
    assert isinstance(make_linear(gaussian(64, 64), quantization="int4"), Int4WeightLinear)
    assert isinstance(make_linear(gaussian(64, 64), quantization="int4").by_row, Int4RowLinear)
    assert isinstance(make_linear(gaussian(64, 64), quantization="w4a8").by_row, Int4DotRowLinear)
    assert isinstance(make_linear(gaussian(40, 64), quantization="w4a8").by_row, Int8DotRowLinear)  # as int4
    assert isinstance(make_linear(gaussian(64, 64), quantization="w8a8").by_row, Int8DotRowLinear)
    assert isinstance(make_linear(gaussian(40, 64), quantization="int4"), Int8WeightLinear)  # 40 % 16 != 0
    for mode in ("int8", "int4"):  # 48 % 32 != 0: no whole groups, the dense linear
        assert isinstance(make_linear(gaussian(64, 48), quantization=mode), type(make_linear(gaussian(64, 48))))
    with pytest.raises(ValueError, match="divisible by 32"):
        Int8WeightLinear(gaussian(64, 48))


def test_unknown_modes_and_non_cpu_weights_are_refused():
    with pytest.raises(ValueError, match="quantization must be one of"):
        make_linear(gaussian(8, 8), quantization="int3")
    with pytest.raises(ValueError, match="CPU only"):
        make_linear(torch.empty(8, 8, device="meta"), quantization="int8")
    with pytest.raises(ValueError, match="unknown quantization"):
        resolve_quantization("fp8", torch.float32, CPU)


@pytest.fixture
def fresh_verdict():
    probe.measured_cpu_quantization.cache_clear()
    yield
    probe.measured_cpu_quantization.cache_clear()


@pytest.mark.parametrize(("seconds", "expected"), [  # seconds at 1 / 8 / 64 rows
    ({"none": [1, 2, 8], "int8": [0.5, 1, 6], "int4": [0.7, 1, 6]}, "int8"),
    ({"none": [1, 2, 8], "int8": [0.9, 2, 8], "int4": [0.4, 1, 6]}, "int4"),
    ({"none": [1, 2, 8], "int8": [0.9, 2, 8], "int4": [0.95, 2, 8]}, "none"),  # no mode wins by MIN_SPEEDUP
    ({"none": [1, 2, 8], "int8": [4, 8, 30], "int4": [3, 6, 30]}, "none"),
    # wins the single row but loses batches (int8 in bfloat16 on a Zen 4 VM): dense
    ({"none": [1, 2, 8], "int8": [0.6, 4, 18], "int4": [0.6, 2.2, 8]}, "none"),
])
def test_auto_takes_the_fastest_mode_only_when_it_clearly_wins(monkeypatch, fresh_verdict, seconds, expected):
    monkeypatch.setattr(probe, "probe_seconds", lambda mode, dtype, rows, native=True: seconds[mode][probe.PROBE_ROWS.index(rows)])
    assert resolve_quantization("auto", torch.float32, CPU) == expected
    assert resolve_quantization(None, torch.float32, CPU) == "none"


def test_preferring_accuracy_means_the_float32_model_and_times_nothing(monkeypatch, fresh_verdict):
    def never(*args, **kwargs):
        raise AssertionError("nothing may be timed when accuracy is preferred")

    monkeypatch.setattr(probe, "probe_seconds", never)
    assert choose_dtype(CPU, prefer="accuracy") == torch.float32
    assert choose_quantization(torch.float32, CPU, prefer="accuracy") == "none"
    with pytest.raises(ValueError, match="prefer must be one of"):
        choose_dtype(CPU, prefer="fast")


def test_the_real_probe_returns_a_mode(fresh_verdict):
    assert choose_quantization(torch.float32, CPU) in ("none", "int8", "int4")
