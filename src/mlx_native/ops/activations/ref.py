"""Pure-PyTorch reference of the gated activations, softcap and softmax (fp32 math)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common import compute_dtype


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    cd = compute_dtype(gate.dtype)
    return (F.silu(gate.to(cd)) * up.to(cd)).to(gate.dtype)


def gelu_mul(gate: torch.Tensor, up: torch.Tensor, approximate: str) -> torch.Tensor:
    cd = compute_dtype(gate.dtype)
    return (F.gelu(gate.to(cd), approximate=approximate) * up.to(cd)).to(gate.dtype)


def sigmoid_mul(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    cd = compute_dtype(x.dtype)
    return (x.to(cd) * torch.sigmoid(gate.to(cd))).to(x.dtype)


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    cd = compute_dtype(x.dtype)
    return (cap * torch.tanh(x.to(cd) / cap)).to(x.dtype)


def softmax(x: torch.Tensor, axis: int) -> torch.Tensor:
    return torch.softmax(x.to(compute_dtype(x.dtype)), dim=axis).to(x.dtype)
