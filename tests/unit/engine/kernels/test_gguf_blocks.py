"""GGUF's own blocks kept for the native row kernels: every kept type dequantizes bit for bit as gguf does, the
kernels' products over them match float64 and keep a row's bits in any batch, and a GGUF file's tensors are
found by content inside make_linear's fused weights."""

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import dequantize

from engine.kernels import keep_gguf_blocks, make_linear
from engine.kernels.cpu.gguf_blocks import BLOCK_BYTES, GgufBlocks, decode_rows, stack_rows
from engine.kernels.cpu.gguf_linear import GgufBlockLinear
from engine.kernels.cpu.native import native_kernels
from engine.kernels.cpu.row_linear import (Int4DotRowLinear, Int4RowLinear, Int4SuperRowLinear, Int8RowLinear,
                                          Int8SuperRowLinear)

HALF_OFFSETS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q8_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,)}


def random_blocks(type_name: str, rows: int, in_features: int, seed: int = 0) -> np.ndarray:
    """Valid raw blocks of ``type_name``: random bytes, with each float16 field (d, dmin, m) set to a small
    random value (any bit pattern of the quants is a valid block)."""
    rng = np.random.default_rng(seed)
    block = BLOCK_BYTES[type_name]
    per_block = 256 if type_name.endswith("_K") else 32
    n = rows * in_features // per_block
    raw = rng.integers(0, 256, size=(n, block), dtype=np.uint8)
    for offset in HALF_OFFSETS[type_name]:
        halves = (rng.standard_normal(n) * 0.01).astype(np.float16)
        raw[:, offset : offset + 2] = halves.view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, -1)


@pytest.fixture(scope="module")
def native():
    module = native_kernels()
    assert module is not None, "the native CPU kernels must build where the tests run (a C++ compiler is needed)"
    return module


@pytest.mark.parametrize("type_name", sorted(BLOCK_BYTES))
def test_every_kept_type_dequantizes_bit_for_bit_as_gguf_does(type_name):
    raw = random_blocks(type_name, 48, 512)
    expected = dequantize(raw, GGMLQuantizationType[type_name])
    weight = decode_rows(type_name, raw)
    assert weight.kind == ("int4" if type_name in ("Q4_K", "Q4_1") else "int8")
    assert weight.group == (16 if type_name == "Q6_K" else 32)
    got = weight.dequantize().numpy()
    assert got.shape == expected.shape == (48, 512)
    assert np.array_equal(got.view(np.int32), expected.astype(np.float32).view(np.int32))


def test_pieces_of_different_groups_and_scale_dtypes_stack_exactly():
    q8 = decode_rows("Q8_0", random_blocks("Q8_0", 16, 256, seed=1))  # float16 per 32
    q6 = decode_rows("Q6_K", random_blocks("Q6_K", 32, 256, seed=2))  # float32 per 16
    stacked = stack_rows([q8, q6])
    assert stacked.group == 16 and stacked.scale.dtype == torch.float32
    assert torch.equal(stacked.dequantize(), torch.cat([q8.dequantize(), q6.dequantize()]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("int8_activations", [False, True])
def test_q4_k_super_block_scales_give_the_float32_scales_bits(native, dtype, int8_activations):
    weight = decode_rows("Q4_K", random_blocks("Q4_K", 40, 768, seed=11))
    compact = Int4SuperRowLinear(native, weight.q, *weight.super_scales, int8_activations=int8_activations)
    plain = (Int4DotRowLinear if int8_activations else Int4RowLinear)(native, weight.q, weight.scale, weight.minimum)
    assert compact.num_bytes < 0.8 * plain.num_bytes  # 4.6 bits a weight against 6
    x = torch.randn(7, 768, generator=torch.Generator().manual_seed(12)).to(dtype)
    out = compact(x)
    assert torch.equal(out, plain(x))
    assert torch.equal(torch.cat([compact(x[i : i + 3]) for i in range(0, 7, 3)]), out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_q6_k_super_block_scales_give_the_float32_scales_bits(native, dtype):
    weight = decode_rows("Q6_K", random_blocks("Q6_K", 40, 512, seed=13))
    compact = Int8SuperRowLinear(native, weight.q, *weight.super_scales)
    plain = Int8RowLinear(native, weight.q, weight.scale)
    assert compact.num_bytes < 0.9 * plain.num_bytes
    x = torch.randn(7, 512, generator=torch.Generator().manual_seed(14)).to(dtype)
    out = compact(x)
    assert torch.equal(out, plain(x))
    assert torch.equal(torch.cat([compact(x[i : i + 2]) for i in range(0, 7, 2)]), out)


def test_a_k_quant_stacked_with_another_type_keeps_float32_scales():
    q4 = decode_rows("Q4_K", random_blocks("Q4_K", 16, 256, seed=15))
    q41 = decode_rows("Q4_1", random_blocks("Q4_1", 16, 256, seed=16))
    assert stack_rows([q4, q4]).super_scales is not None
    mixed = stack_rows([q4, q41])
    assert mixed.super_scales is None and mixed.scale.dtype == torch.float32
    assert torch.equal(mixed.dequantize(), torch.cat([q4.dequantize(), q41.dequantize()]))


def product_error_bound(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """float32 rounding of a sum of |x| |w| products (K terms; generous): the per-output tolerance."""
    k = weight.shape[1]
    return (x.double().abs() @ weight.double().abs().T) * (k * 2.0**-24) + 1e-30


@pytest.mark.parametrize("type_name", ["Q4_K", "Q6_K", "Q5_0"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_row_kernels_over_kept_blocks_match_float64_and_keep_a_rows_bits_in_any_batch(native, type_name, dtype):
    weight = decode_rows(type_name, random_blocks(type_name, 40, 768, seed=3))  # 40 outputs: a padded block
    kernel = (Int4RowLinear(native, weight.q, weight.scale, weight.minimum) if weight.kind == "int4"
              else Int8RowLinear(native, weight.q, weight.scale))
    x = torch.randn(9, 768, generator=torch.Generator().manual_seed(4)).to(dtype)
    out = kernel(x)
    assert out.shape == (9, 40) and out.dtype == dtype
    w = weight.dequantize()
    exact = x.double() @ w.double().T
    rounding = 0 if dtype == torch.float32 else exact.abs() * 2.0**-8  # the result rounded once to bfloat16
    assert ((out.double() - exact).abs() <= product_error_bound(w, x) + rounding).all()
    for size in (1, 2, 3, 4, 5):
        assert torch.equal(torch.cat([kernel(x[i : i + size]) for i in range(0, 9, size)]), out), size


def test_q4_k_times_int8_activations_is_the_dequantized_products(native):
    weight = decode_rows("Q4_K", random_blocks("Q4_K", 32, 512, seed=5))
    kernel = Int4DotRowLinear(native, weight.q, weight.scale, weight.minimum)
    x = torch.randn(6, 512, generator=torch.Generator().manual_seed(6))
    out = kernel(x)
    groups = x.view(6, -1, 32)
    step = groups.abs().amax(-1, keepdim=True) / 127
    x8 = (groups / step).round().clamp(-127, 127) * step  # Q8_1's rounding of each group of 32
    exact = x8.view(6, 512).double() @ weight.dequantize().double().T
    assert ((out.double() - exact).abs() <= product_error_bound(weight.dequantize(), x) * 4).all()
    for size in (1, 4, 5):
        assert torch.equal(torch.cat([kernel(x[i : i + size]) for i in range(0, 6, size)]), out), size


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    """A small GGUF with Q4_K, Q6_K and Q8_0 tensors of 512 inputs (and one F32 tensor, never kept)."""
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    writer = GGUFWriter(str(path), "llama")
    tensors = {"blk.0.attn_q.weight": ("Q4_K", 64), "blk.0.attn_k.weight": ("Q4_K", 32),
               "blk.0.attn_v.weight": ("Q6_K", 32), "output.weight": ("Q8_0", 48)}
    for seed, (name, (type_name, rows)) in enumerate(tensors.items()):
        writer.add_tensor(name, random_blocks(type_name, rows, 512, seed=10 + seed),
                          raw_dtype=GGMLQuantizationType[type_name])
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(512, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def dequantized(path, name):
    return torch.from_numpy(GgufBlocks(path).decode(name).dequantize().numpy())


@pytest.mark.parametrize("mode", ["int4", "w4a8", "int8"])
def test_make_linear_keeps_the_files_blocks_of_a_fused_weight_and_its_rows_match_the_dense_ones(gguf_file, mode):
    q, k, v = (dequantized(gguf_file, f"blk.0.attn_{n}.weight") for n in "qkv")
    fused = torch.cat([q, k, v])  # as the model fuses q/k/v: int4, int4, then int8 pieces
    bias = torch.randn(128, generator=torch.Generator().manual_seed(7))
    with keep_gguf_blocks(gguf_file) as blocks:
        linear = make_linear(fused, bias, mode)
    assert isinstance(linear, GgufBlockLinear) and len(blocks.kept) == 1
    # q and k stacked into one int4 kernel, v its own int8 one, both over the file's super-block scales
    assert [type(part) for part in linear.by_row.parts] == [Int4SuperRowLinear, Int8SuperRowLinear]
    x = torch.randn(5, 512, generator=torch.Generator().manual_seed(8))
    rows, dense = linear.by_row(x), linear(x)
    assert rows.shape == dense.shape == (5, 128)
    slack = 0.05 if mode == "w4a8" else 1e-4  # w4a8 rounds the activations to 8 bits
    assert (rows - dense).abs().max() <= slack * dense.abs().max()
    assert torch.equal(torch.cat([linear.by_row(x[i : i + 1]) for i in range(5)]), rows)


def test_weights_the_file_does_not_hold_exactly_are_requantized_as_before(gguf_file):
    head = dequantized(gguf_file, "output.weight")
    changed = head.clone()
    changed[3, 7] += 1e-3  # one weight off: the piece no longer matches
    with keep_gguf_blocks(gguf_file) as blocks:
        assert isinstance(make_linear(head, None, "int4"), GgufBlockLinear)
        assert not isinstance(make_linear(changed, None, "int4"), GgufBlockLinear)
        assert not isinstance(make_linear(head, None, "none"), GgufBlockLinear)
        assert not isinstance(make_linear(head[:, :256].contiguous(), None, "int4"), GgufBlockLinear)
    assert len(blocks.kept) == 1 and blocks.missed == 2
    assert not isinstance(make_linear(head, None, "int4"), GgufBlockLinear)  # no file open


def test_bfloat16_weights_are_found_by_their_rounded_values(gguf_file):
    head = dequantized(gguf_file, "output.weight")
    with keep_gguf_blocks(gguf_file):
        linear = make_linear(head.bfloat16(), None, "int4")
    assert isinstance(linear, GgufBlockLinear)
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(9)).bfloat16()
    exact = x.double() @ head.double().T  # the file's weights, not their bfloat16 rounding
    assert ((linear.by_row(x).double() - exact).abs() <= product_error_bound(head, x) + exact.abs() * 2.0**-8).all()
