"""Products of generated rows (decode and verify) on the native kernels (dense_rows.cpp, int4_rows.cpp).

    RowLinear(native, weight)   x -> x @ weight.T (+ bias) for a few rows, float32 or bfloat16, over a
                                lane-packed copy of the weight: blocks of 16 outputs across the vector
                                lanes (bfloat16: pairs of inputs per lane)
    Int8RowLinear(native, q, scale)   the same over int8 weights (GGUF Q8_0 blocks; a scale per 16 or 32
                                inputs, float16 or float32: GGUF's Q5_0 and Q6_K blocks too,
                                engine.kernels.cpu.gguf_blocks), float32 or bfloat16 rows
    Int4RowLinear(native, q, scale, min)   the same over int4 weights (GGUF Q4_1 blocks: the same q,
                                float16 scale and min as engine.kernels.cpu.quantized_linear; float32 scales
                                and mins: GGUF's Q4_K blocks), lane-packed
    Int4DotRowLinear(native, q, scale, min)   the same weights times int8-quantized activations (w4a8:
                                llama.cpp's Q4_1 x Q8_1 product, int4_dot_rows.cpp), not the float product
    Int8DotRowLinear(native, q, scale)   int8 weights times int8-quantized activations (Q8_0 x Q8_0,
                                int8_dot_rows.cpp: the LM head of w4a8)

A row's bits depend only on that row (dense_rows.cpp states the contract), never on how many rows the call
holds; they differ from the packed oneDNN product's, which keeps the prompt rows (engine.kernels.row_split
keeps the two apart). The copy doubles the memory of the weights it serves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LANES = 16
QUANT_GROUP = 32  # inputs per quantization group (engine.kernels.cpu.quantized_linear's GROUP_SIZE)


def pack_lanes(weight: torch.Tensor) -> torch.Tensor:
    """(out, in) -> blocks of 16 outputs across the lanes, padding zeros. bfloat16: (ceil(out / 16),
    ceil(in / 2), 32), input pair p of block b holding outputs 16b..16b+15, each as its (input 2p, input 2p + 1)
    pair; float32 and int8: (ceil(out / 16), in, 16)."""
    out_features, in_features = weight.shape
    pair = 2 if weight.dtype == torch.bfloat16 else 1
    out_pad, in_pad = -(-out_features // LANES) * LANES, -(-in_features // pair) * pair
    padded = F.pad(weight, (0, in_pad - in_features, 0, out_pad - out_features))
    blocks = padded.view(out_pad // LANES, LANES, in_pad // pair, pair).permute(0, 2, 1, 3)
    return blocks.reshape(out_pad // LANES, in_pad // pair, pair * LANES).contiguous()


def tensor_bytes(*tensors: torch.Tensor) -> int:
    """The bytes a kernel reads per pass over these packed tensors (``num_bytes`` of every class below)."""
    return sum(t.numel() * t.element_size() for t in tensors)


class RowLinear:
    """x (rows, in_features) -> (rows, out_features) + bias on the native kernel ``native``."""

    def __init__(self, native, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        if weight.dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"RowLinear packs float32 or bfloat16 weights, not {weight.dtype}")
        self.native = native
        self.out_features = weight.shape[0]
        self.packed = pack_lanes(weight)
        self.bias = bias

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.packed)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.native.dense_rows(x.contiguous(), self.packed, self.out_features)
        return out if self.bias is None else out + self.bias


class Int8RowLinear:
    """x (rows, in_features) float32 or bfloat16 -> (rows, out_features) + bias over int8 weights, w = q * scale
    with a float16 or float32 scale per 32 (or 16) inputs of an output (GGUF Q8_0 blocks,
    engine.kernels.cpu.quantized_linear; Q5_0 and Q6_K ones, engine.kernels.cpu.gguf_blocks)."""

    def __init__(self, native, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        self.native = native
        self.out_features = q.shape[0]
        self.packed = pack_lanes(q)
        self.scale = pack_group_scales(scale, keep_float32=True)  # (blocks, groups, 16)
        self.bias = bias

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.packed, self.scale)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.native.int8_rows(x.contiguous(), self.packed, self.scale, self.out_features)
        return out if self.bias is None else out + self.bias


def pack_int4_lanes(q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q (out, in) in 0..15, scale/min (out, in / 32) float16 -> nibbles (out/16, in/32, 16, 16) uint8 (block,
    group, input pair, output lane; input 2p low, 2p + 1 high) and scale_min (out/16, in/32, 2, 16)."""
    out_features, in_features = q.shape
    out_pad, groups = -(-out_features // LANES) * LANES, in_features // QUANT_GROUP
    q = F.pad(q.to(torch.uint8), (0, 0, 0, out_pad - out_features))
    pairs = q.view(out_pad // LANES, LANES, groups, QUANT_GROUP // 2, 2)
    nibbles = (pairs[..., 0] | (pairs[..., 1] << 4)).permute(0, 2, 3, 1).contiguous()
    return nibbles, pack_scale_min(scale, minimum)


def pack_scale_min(scale: torch.Tensor, minimum: torch.Tensor) -> torch.Tensor:
    """scale/min (out, in / 32) float16 -> (out/16, in/32, 2, 16): per block and group, its 16 scales then its
    16 mins (padding outputs zero)."""
    out_features, groups = scale.shape
    out_pad = -(-out_features // LANES) * LANES
    scale_min = torch.stack([F.pad(t, (0, 0, 0, out_pad - out_features)) for t in (scale, minimum)], dim=1)
    return scale_min.view(out_pad // LANES, LANES, 2, groups).permute(0, 3, 2, 1).contiguous()


def pack_int4_dot_lanes(q: torch.Tensor) -> torch.Tensor:
    """q (out, in) in 0..15 -> (out/16, in/32, 4, 16, 4) uint8 (block, group, chunk, output lane, byte):
    byte j of a lane's chunk c holds input 8c + j of its group in the low nibble and 8c + 4 + j in the high
    one, so one AND (and one shift) lays out four inputs per 32-bit lane for the byte dot product."""
    out_features, in_features = q.shape
    out_pad, groups = -(-out_features // LANES) * LANES, in_features // QUANT_GROUP
    q = F.pad(q.to(torch.uint8), (0, 0, 0, out_pad - out_features))
    halves = q.view(out_pad // LANES, LANES, groups, 4, 2, 4)  # (block, lane, group, chunk, half, byte)
    packed = halves[:, :, :, :, 0] | (halves[:, :, :, :, 1] << 4)
    return packed.permute(0, 2, 3, 1, 4).contiguous()


def pack_int8_dot_lanes(q: torch.Tensor) -> torch.Tensor:
    """q (out, in) int8 -> (out/16, in/32, 8, 16, 4) int8 (block, group, chunk, output lane, byte): byte j of a
    lane's chunk c holds input 4c + j of its group, four inputs per 32-bit lane for the byte dot product."""
    out_features, in_features = q.shape
    out_pad, groups = -(-out_features // LANES) * LANES, in_features // QUANT_GROUP
    q = F.pad(q, (0, 0, 0, out_pad - out_features))
    chunks = q.view(out_pad // LANES, LANES, groups, 8, 4)  # (block, lane, group, chunk, byte)
    return chunks.permute(0, 2, 3, 1, 4).contiguous()


def pack_group_scales(scale: torch.Tensor, keep_float32: bool = False) -> torch.Tensor:
    """scale (out, groups) -> (out/16, groups, 16) float16 (float32 ones kept with ``keep_float32``): per block
    and group, its 16 scales (padding zero)."""
    out_features, groups = scale.shape
    out_pad = -(-out_features // LANES) * LANES
    dtype = torch.float32 if keep_float32 and scale.dtype == torch.float32 else torch.float16
    padded = F.pad(scale.to(dtype), (0, 0, 0, out_pad - out_features))
    return padded.view(out_pad // LANES, LANES, groups).transpose(1, 2).contiguous()


def scale_pair(scale: torch.Tensor, minimum: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, min) in float32 where either is float32 (GGUF's Q4_K blocks), else float16: the kernels take both."""
    dtype = torch.float32 if torch.float32 in (scale.dtype, minimum.dtype) else torch.float16
    return scale.to(dtype), minimum.to(dtype)


class Int4RowLinear:
    """x (rows, in_features) float32 or bfloat16 -> (rows, out_features) + bias over int4 weights, on ``native``."""

    def __init__(self, native, q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor,
                 bias: torch.Tensor | None = None) -> None:
        self.native = native
        self.out_features = q.shape[0]
        self.nibbles, self.scale_min = pack_int4_lanes(q, *scale_pair(scale, minimum))
        self.bias = bias

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.nibbles, self.scale_min)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.native.int4_rows(x.contiguous(), self.nibbles, self.scale_min, self.out_features)
        return out if self.bias is None else out + self.bias


class Int4DotRowLinear:
    """x (rows, in_features) float32 or bfloat16 -> (rows, out_features) + bias over int4 weights times the
    rows quantized to int8 per 32 inputs (w4a8), on ``native``."""

    def __init__(self, native, q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor,
                 bias: torch.Tensor | None = None) -> None:
        self.native = native
        self.out_features = q.shape[0]
        self.nibbles = pack_int4_dot_lanes(q)
        self.scale_min = pack_scale_min(*scale_pair(scale, minimum))
        self.bias = bias

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.nibbles, self.scale_min)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.native.int4_dot_rows(x.contiguous(), self.nibbles, self.scale_min, self.out_features)
        return out if self.bias is None else out + self.bias


class Int8DotRowLinear:
    """x (rows, in_features) float32 or bfloat16 -> (rows, out_features) + bias over int8 weights (Q8_0 blocks)
    times the rows quantized to int8 per 32 inputs, on ``native``."""

    def __init__(self, native, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        self.native = native
        self.out_features = q.shape[0]
        self.packed = pack_int8_dot_lanes(q)
        self.scale = pack_group_scales(scale)
        self.bias = bias

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.packed, self.scale)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.native.int8_dot_rows(x.contiguous(), self.packed, self.scale, self.out_features)
        return out if self.bias is None else out + self.bias


def pack_group_lanes(t: torch.Tensor) -> torch.Tensor:
    """(out, groups) of any dtype -> (out/16, groups, 16): per block and group, its 16 values (padding zero)."""
    out_features, groups = t.shape
    out_pad = -(-out_features // LANES) * LANES
    return F.pad(t, (0, 0, 0, out_pad - out_features)).view(out_pad // LANES, LANES, groups).transpose(1, 2).contiguous()


class Int4SuperRowLinear:
    """Int4RowLinear (Int4DotRowLinear with ``int8_activations``) over GGUF's Q4_K super-blocks as the file has
    them: 6-bit sc and m per 32 inputs (uint8), float16 d and -dmin per 256 (group_scales.h); the kernels form
    scale = d * sc and min = -dmin * m exactly, so the products are Int4RowLinear's over the float32 scales."""

    def __init__(self, native, q: torch.Tensor, sc: torch.Tensor, m: torch.Tensor, d: torch.Tensor,
                 neg_dmin: torch.Tensor, int8_activations: bool = False) -> None:
        self.native = native
        self.out_features = q.shape[0]
        self.int8_activations = int8_activations
        self.nibbles = pack_int4_dot_lanes(q) if int8_activations else pack_int4_lanes(q, sc, m)[0]
        self.sc_m = pack_scale_min(sc.to(torch.uint8), m.to(torch.uint8))
        self.d_dmin = pack_scale_min(d.to(torch.float16), neg_dmin.to(torch.float16))

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.nibbles, self.sc_m, self.d_dmin)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        kernel = self.native.int4_super_dot_rows if self.int8_activations else self.native.int4_super_rows
        return kernel(x.contiguous(), self.nibbles, self.sc_m, self.d_dmin, self.out_features)


class Int8SuperRowLinear:
    """Int8RowLinear over GGUF's Q6_K super-blocks as the file has them: q - 32 (int8), an int8 sc per 16 inputs
    and a float16 d per 256 (group_scales.h); the kernel forms scale = d * sc exactly."""

    def __init__(self, native, q: torch.Tensor, sc: torch.Tensor, d: torch.Tensor) -> None:
        self.native = native
        self.out_features = q.shape[0]
        self.packed = pack_lanes(q)
        self.sc = pack_group_lanes(sc.to(torch.int8))
        self.d = pack_group_lanes(d.to(torch.float16))

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.packed, self.sc, self.d)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.native.int8_super_rows(x.contiguous(), self.packed, self.sc, self.d, self.out_features)
