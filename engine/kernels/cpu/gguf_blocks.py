"""A GGUF file's own quantized blocks, decoded into the forms the native row kernels read, bit for bit.

    BlockWeight          one weight (rows = outputs, K inputs) as the kernels keep it:
                           "int4": q 0..15 (rows, K) with a (scale, min) per 32 inputs, w = q * scale + min
                           "int8": q int8 (rows, K) with a scale per 16 or 32 inputs, w = q * scale
    decode_rows(type, raw)   the raw bytes of a tensor's rows (rows, bytes per row: GGUFReader's ``data``)
                           -> BlockWeight, for KEPT_TYPES
    GgufBlocks(path)     the file's tensors of KEPT_TYPES, found by content: ``find(weight)`` gives the
                           BlockWeight whose float32 dequantization, in ``weight``'s dtype, equals ``weight``
                           row for row (fused weights, e.g. q/k/v stacked, are found piece by piece), or None

Exactness. Each type's w is computed in float32 by gguf's own dequantization (gguf.quants, which
transformers uses to load a GGUF, hence every float32 weight radixgate loads from one) as one exact product
and at most one rounded addition; BlockWeight.dequantize takes the same steps on the same float32 values:
    Q4_K  w = (d * sc) * q - dmin * m    -> int4, scale = d * sc, min = -(dmin * m): float32, each exact
                                            (an 11-bit float16 significand times a 6-bit integer), and
                                            scale * q is exact (+ 4 bits)
    Q6_K  w = (d * sc) * (q - 32)        -> int8 per 16, q - 32 in -32..31, scale = d * sc float32 (exact:
                                            11 + 8 bits), and the product is exact (|sc (q - 32)| <= 4096)
    Q5_0  w = d * (q - 16), Q8_0  w = d * q, Q4_0  w = d * (q - 8)   -> int8 per 32, scale = d (float16)
    Q4_1  w = d * q + m                  -> int4, scale = d and min = m (float16)
Other types (F32, F16, Q5_K, ...) are not kept: their weights take the requantizing path
(engine.kernels.cpu.quantized_linear).

Layout. GGUF lists a 2-D tensor's dimensions innermost first, (K, rows); GGUFReader's ``data`` of a quantized
tensor is (rows, bytes per row), the blocks of each row in input order: rows are the outputs, as in torch.
Weight names need no mapping: ``find`` matches rows by content (the first row's bytes, then the whole piece),
so any HF naming, fusing or row order that keeps a tensor's rows together in order is found, and anything
else falls back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger(__name__)

QK_K = 256
BLOCK_BYTES = {"Q4_0": 18, "Q4_1": 20, "Q5_0": 22, "Q8_0": 34, "Q4_K": 144, "Q6_K": 210}
KEPT_TYPES = tuple(BLOCK_BYTES)


@dataclass
class BlockWeight:
    """One weight as the native kernels keep it (module docstring). ``scale``/``minimum``: (rows, K / group)
    float32 or float16; ``minimum`` is None for "int8"."""

    kind: str  # "int4" or "int8"
    q: torch.Tensor  # (rows, K): uint8 0..15 (int4) or int8
    scale: torch.Tensor
    minimum: torch.Tensor | None = None
    # K-quants as the file has them (the kernels' compact form; scale and minimum are their float32 products):
    # Q4_K (sc uint8 (rows, K/32), m uint8 (rows, K/32), d float16 (rows, K/256), -dmin float16 (rows, K/256));
    # Q6_K (sc int8 (rows, K/16), d float16 (rows, K/256)); None for other types
    super_scales: tuple[torch.Tensor, ...] | None = None

    @property
    def group(self) -> int:
        return self.q.shape[1] // self.scale.shape[1]


    def dequantize(self) -> torch.Tensor:
        """The float32 weight (rows, K): q * scale (+ min), in float32 as gguf dequantizes (module docstring)."""
        rows, k = self.q.shape
        groups = self.q.float().view(rows, -1, self.group)
        w = groups * self.scale.float()[..., None]
        if self.minimum is not None:
            w = w + self.minimum.float()[..., None]
        return w.view(rows, k)

    def with_group(self, group: int) -> "BlockWeight":
        """The same weight with a scale per ``group`` inputs (a divisor of its own group; scales repeated)."""
        if group == self.group:
            return self
        repeat = lambda t: None if t is None else t.repeat_interleave(self.group // group, dim=1)  # noqa: E731
        return BlockWeight(self.kind, self.q, repeat(self.scale), repeat(self.minimum))  # float32 form only

    def with_float32_scales(self) -> "BlockWeight":
        to32 = lambda t: None if t is None else t.float()  # noqa: E731 (float16 -> float32 is exact)
        return BlockWeight(self.kind, self.q, to32(self.scale), to32(self.minimum))


def stack_rows(pieces: list[BlockWeight]) -> BlockWeight:
    """Pieces of one kind stacked along the rows; their scales brought to one group and dtype (exactly)."""
    kinds = {p.kind for p in pieces}
    if len(kinds) != 1:
        raise ValueError(f"cannot stack {sorted(kinds)} pieces into one weight")
    group = min(p.group for p in pieces)
    pieces = [p.with_group(group) for p in pieces]
    if len({p.scale.dtype for p in pieces}) > 1:
        pieces = [p.with_float32_scales() for p in pieces]
    minimum = None if pieces[0].minimum is None else torch.cat([p.minimum for p in pieces])
    supers = [p.super_scales for p in pieces]
    same = all(s is not None and len(s) == len(supers[0]) for s in supers)  # all Q4_K, or all Q6_K
    super_scales = tuple(torch.cat(parts) for parts in zip(*supers)) if same else None
    return BlockWeight(pieces[0].kind, torch.cat([p.q for p in pieces]), torch.cat([p.scale for p in pieces]), minimum,
                       super_scales)


def _half(raw: np.ndarray) -> np.ndarray:
    """(n, 2) uint8 -> (n,) float32 of the float16 they hold (exact)."""
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32)[:, 0]


def _nibbles(qs: np.ndarray, width: int) -> np.ndarray:
    """(n, width) bytes -> (n, 2 width): the low nibbles of all, then the high ones (GGUF's order)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def decode_rows(type_name: str, raw: np.ndarray) -> BlockWeight:
    """raw (rows, bytes per row) uint8 of a tensor of ``type_name`` (one of KEPT_TYPES) -> its BlockWeight."""
    if type_name not in BLOCK_BYTES:
        raise ValueError(f"GGUF type {type_name} is not kept as blocks; kept: {KEPT_TYPES}")
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(-1, BLOCK_BYTES[type_name])
    n = blocks.shape[0]
    if type_name == "Q4_K":
        return _q4_k(blocks, rows)
    if type_name == "Q6_K":
        return _q6_k(blocks, rows)
    d = torch.from_numpy(np.ascontiguousarray(blocks[:, :2]).view(np.float16)[:, 0].copy()).view(rows, -1)
    if type_name == "Q8_0":
        q = blocks[:, 2:].view(np.int8)
        return BlockWeight("int8", torch.from_numpy(q.copy()).view(rows, -1), d)
    if type_name == "Q4_1":
        m = torch.from_numpy(np.ascontiguousarray(blocks[:, 2:4]).view(np.float16)[:, 0].copy()).view(rows, -1)
        q = _nibbles(blocks[:, 4:], 16)
        return BlockWeight("int4", torch.from_numpy(q).view(rows, -1), d, m)
    if type_name == "Q4_0":
        q = _nibbles(blocks[:, 2:], 16).astype(np.int8) - 8
        return BlockWeight("int8", torch.from_numpy(q).view(rows, -1), d)
    # Q5_0: d, 4 bytes of high bits (bit j of the little-endian uint32 for input j), 16 bytes of nibbles
    high = np.ascontiguousarray(blocks[:, 2:6]).view(np.uint32)  # (n, 1)
    high = ((high >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)
    q = (_nibbles(blocks[:, 6:], 16) | (high << 4)).astype(np.int8) - 16
    return BlockWeight("int8", torch.from_numpy(q).view(rows, -1), d)


def _q4_k(blocks: np.ndarray, rows: int) -> BlockWeight:
    """Q4_K: d, dmin (float16), 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, 128 bytes of nibbles
    (sub-blocks 2j and 2j + 1: the low and high nibbles of bytes 32j..32j + 31)."""
    n = blocks.shape[0]
    d, dmin = _half(blocks[:, 0:2]), _half(blocks[:, 2:4])
    packed = blocks[:, 4:16].reshape(n, 3, 4)
    low6, high6, tails = packed[:, 0], packed[:, 1], packed[:, 2]
    sc = np.concatenate([low6 & 0x3F, (tails & 0x0F) | ((low6 >> 2) & 0x30)], axis=-1)  # (n, 8)
    m = np.concatenate([high6 & 0x3F, (tails >> 4) | ((high6 >> 2) & 0x30)], axis=-1)
    scale = d[:, None] * sc.astype(np.float32)
    minimum = -(dmin[:, None] * m.astype(np.float32))
    qs = blocks[:, 16:].reshape(n, 4, 32)
    q = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(n, QK_K)
    as_rows = lambda a: torch.from_numpy(np.ascontiguousarray(a)).view(rows, -1)  # noqa: E731
    super_scales = (as_rows(sc), as_rows(m), as_rows(d.astype(np.float16)), as_rows(-dmin.astype(np.float16)))
    return BlockWeight("int4", as_rows(q), as_rows(scale), as_rows(minimum), super_scales)


def _q6_k(blocks: np.ndarray, rows: int) -> BlockWeight:
    """Q6_K: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales (one per 16 inputs), d (float16)."""
    n = blocks.shape[0]
    ql, qh = blocks[:, :128].reshape(n, 2, 1, 64), blocks[:, 128:192].reshape(n, 2, 1, 32)
    scales, d = blocks[:, 192:208].view(np.int8).astype(np.float32), _half(blocks[:, 208:210])
    low = ((ql >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & 0x0F).reshape(n, 8, 32)
    high = ((qh >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & 0x03).reshape(n, 8, 32)
    q = (low | (high << 4)).astype(np.int8) - 32
    scale = d[:, None] * scales
    as_rows = lambda a: torch.from_numpy(np.ascontiguousarray(a)).view(rows, -1)  # noqa: E731
    super_scales = (as_rows(scales.astype(np.int8)), as_rows(d.astype(np.float16)))
    return BlockWeight("int8", as_rows(q.reshape(n, QK_K)), as_rows(scale), None, super_scales)


class GgufBlocks:
    """The kept tensors of one GGUF file (memory-mapped), found by content (module docstring)."""

    def __init__(self, path: str | Path) -> None:
        from gguf import GGUFReader

        self.path = Path(path)
        reader = GGUFReader(str(self.path))
        self.tensors = {t.name: t for t in reader.tensors
                        if t.tensor_type.name in KEPT_TYPES and len(t.shape) == 2}
        self._first_rows: dict[tuple[int, torch.dtype], dict[bytes, list[str]]] = {}

    def _in_features(self, name: str) -> int:
        return int(self.tensors[name].shape[0])

    def decode(self, name: str, rows: slice = slice(None)) -> BlockWeight:
        tensor = self.tensors[name]
        return decode_rows(tensor.tensor_type.name, np.asarray(tensor.data[rows]))

    def _index(self, in_features: int, dtype: torch.dtype) -> dict[bytes, list[str]]:
        key = (in_features, dtype)
        if key not in self._first_rows:
            index: dict[bytes, list[str]] = {}
            for name in self.tensors:
                if self._in_features(name) == in_features:
                    first = self.decode(name, slice(0, 1)).dequantize().to(dtype)
                    index.setdefault(first.numpy(force=True).tobytes() if dtype != torch.bfloat16
                                     else first.view(torch.int16).numpy().tobytes(), []).append(name)
            self._first_rows[key] = index
        return self._first_rows[key]

    def find(self, weight: torch.Tensor) -> list[BlockWeight] | None:
        """The file's pieces that make up ``weight`` (out, in) row for row, in order, each dequantizing (in
        weight's dtype) to exactly its rows; None where any row is not found so."""
        out_features, in_features = weight.shape
        index = self._index(in_features, weight.dtype)
        pieces, start = [], 0
        while start < out_features:
            row = weight[start : start + 1]
            key = (row.view(torch.int16) if weight.dtype == torch.bfloat16 else row).numpy(force=True).tobytes()
            for name in index.get(key, []):
                num_rows = int(self.tensors[name].shape[1])
                if start + num_rows > out_features:
                    continue
                piece = self.decode(name)
                if torch.equal(piece.dequantize().to(weight.dtype), weight[start : start + num_rows]):
                    pieces.append(piece)
                    start += num_rows
                    break
            else:
                return None
        return pieces
