"""Pure-PyTorch reference of the norms: fp32 math (fp64 for fp64 inputs).

The CPU path and the test oracle. Shapes: ``x [..., N]``, ``weight [N]``.
"""

from __future__ import annotations

from typing import Optional

import torch

from ..common import compute_dtype


def _scale(y: torch.Tensor, weight: Optional[torch.Tensor], weight_offset: float) -> torch.Tensor:
    if weight is None:
        return y
    return y * (weight.to(y.dtype) + weight_offset)


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, weight_offset: float = 0.0) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps) * (weight + weight_offset)`` over the last dim."""
    xf = x.to(compute_dtype(x.dtype))
    y = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return _scale(y, weight, weight_offset).to(x.dtype)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor], eps: float, weight_offset: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``h = x + residual`` (rounded to x's dtype), then ``rms_norm(h)``; returns ``(normed, h)``."""
    cd = compute_dtype(x.dtype)
    h = (x.to(cd) + residual.to(cd)).to(x.dtype)
    return rms_norm(h, weight, eps, weight_offset), h


def l2_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(sum(x^2) + eps)`` over the last dim."""
    xf = x.to(compute_dtype(x.dtype))
    return (xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) + eps)).to(x.dtype)
