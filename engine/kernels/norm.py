"""RMSNorm, alone and after a residual add: the native CPU kernel where it builds, torch's F.rms_norm elsewhere.

Either way a row's result depends only on that row. The native one computes in float32 and rounds once
(torch's CPU composite runs ~8 ops per call); ``add_`` rounds the residual sum exactly as torch's add does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F



class RMSNorm:
    """``norm(x, weight)`` -> rms_norm(x) * weight; ``norm.add_(hidden, delta, weight)`` -> hidden += delta
    (in place), then rms_norm(hidden) * weight. Rows are (T, hidden) and contiguous."""

    def __init__(self, eps: float, native=None) -> None:
        self.eps = eps
        self.native = native

    def __call__(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.native is not None:
            return self.native.rms_norm(x.contiguous(), weight, self.eps)
        return F.rms_norm(x, (x.shape[-1],), weight, self.eps)

    def add_(self, hidden: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.native is not None:
            return self.native.add_rms_norm(hidden, delta.contiguous(), weight, self.eps)
        hidden.add_(delta)
        return F.rms_norm(hidden, (hidden.shape[-1],), weight, self.eps)


def make_norm(eps: float, native) -> RMSNorm:
    """``native``: engine.kernels.native_ops(dtype, device), or None for torch's F.rms_norm."""
    return RMSNorm(eps, native)
