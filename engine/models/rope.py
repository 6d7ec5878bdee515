"""Rotary position embeddings: inverse frequencies (default, linear, Llama-3) and a cos/sin table.

Uses the rotate-half convention of transformers' Llama (``cos = cat(f, f)``),
so weights read from transformers (including GGUF files, which transformers
un-permutes on load) need no reordering.
"""

from __future__ import annotations

import math

import torch


def rope_parameters(config) -> dict:
    """The rope settings of a transformers config (v5 ``rope_parameters`` or v4 ``rope_theta``/``rope_scaling``)."""
    params = dict(getattr(config, "rope_parameters", None) or {})
    if not params:
        params = dict(getattr(config, "rope_scaling", None) or {})
        params.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    params.setdefault("rope_type", params.get("type", "default"))
    params.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    return params


def llama3_inv_freq(inv_freq: torch.Tensor, params: dict) -> torch.Tensor:
    """Llama-3.1 scaling: long wavelengths divided by ``factor``, short ones kept, smooth in between."""
    factor = params["factor"]
    low_freq_factor = params["low_freq_factor"]
    high_freq_factor = params["high_freq_factor"]
    old_context = params["original_max_position_embeddings"]
    low_freq_wavelen = old_context / low_freq_factor
    high_freq_wavelen = old_context / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def inverse_frequencies(config, head_dim: int) -> tuple[torch.Tensor, float]:
    """(inv_freq (rotary_dim // 2,) float32, attention_scaling) for a transformers config."""
    params = rope_parameters(config)
    rope_type = params["rope_type"]
    rotary_dim = int(head_dim * params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0) or 1.0))
    base = float(params["rope_theta"])
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim))
    if rope_type == "default":
        return inv_freq, 1.0
    if rope_type == "linear":
        return inv_freq / params["factor"], 1.0
    if rope_type == "llama3":
        return llama3_inv_freq(inv_freq, params), 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if rope_type not in ROPE_INIT_FUNCTIONS or rope_type == "dynamic":
        raise ValueError(f"unsupported rope_type {rope_type!r}")
    inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
    return inv_freq.float(), float(scaling)


class RotaryTable:
    """cos and signed sin for positions 0..num_positions-1, grown on demand; ``lookup`` once per forward.

    The sin table's first half is negated (``cat(-s, s)``), so that rotating is one roll and one multiply-add
    (see apply_rotary)."""

    def __init__(self, config, head_dim: int, num_positions: int, device="cpu") -> None:
        self.inv_freq, self.scaling = inverse_frequencies(config, head_dim)
        self.head_dim = head_dim
        self.device = device
        self._build(num_positions)

    def _build(self, num_positions: int) -> None:
        positions = torch.arange(num_positions, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)  # (P, rotary_dim // 2)
        emb = torch.cat([freqs, freqs], dim=-1)
        sin = emb.sin() * self.scaling
        half = sin.shape[-1] // 2
        self.cos = (emb.cos() * self.scaling).to(self.device)  # (P, rotary_dim) float32
        self.signed_sin = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1).to(self.device)

    def lookup(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin, each of shape (T, 1, rotary_dim) in ``dtype``, for the given positions."""
        needed = int(positions.max()) + 1 if positions.numel() else 0
        if needed > self.cos.shape[0]:
            self._build(max(needed, 2 * self.cos.shape[0]))
        return self.cos[positions, None].to(dtype), self.signed_sin[positions, None].to(dtype)

    def lookup_float32(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin as (T, rotary_dim) float32 rows (the native rotary kernel's tables)."""
        cos, sin = self.lookup(positions, torch.float32)
        return cos.squeeze(1), sin.squeeze(1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x (T, heads, head_dim) rotated in its first rotary_dim channels (rotate-half convention).

    ``x * cos + cat(-x2, x1) * sin`` computed as ``x * cos + roll(x) * cat(-sin1, sin2)``: the sign sits in
    the table (RotaryTable.signed_sin), which gives the same bits as negating x2, in three ops per call.
    """
    rotary_dim = cos.shape[-1]
    if rotary_dim < x.shape[-1]:
        rotated = apply_rotary(x[..., :rotary_dim], cos, signed_sin)
        return torch.cat([rotated, x[..., rotary_dim:]], dim=-1)
    out = x * cos
    return out.addcmul_(x.roll(rotary_dim // 2, dims=-1), signed_sin)
