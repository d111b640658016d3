"""Peer implementations measured beside ours: PyTorch eager (the math as a model
writes it), torch.compile of that math, and Liger-Kernel's forward functions."""

from __future__ import annotations

import functools
from typing import Callable, Optional

import torch
import torch.nn.functional as F


def compiled(fn: Callable) -> Callable:
    """torch.compile of ``fn`` (static shapes, inductor, no CUDA graphs)."""
    return torch.compile(fn, dynamic=False, fullgraph=True)


@functools.lru_cache(maxsize=None)
def liger() -> Optional[dict]:
    """Liger-Kernel's forward functions, or None when the package is missing."""
    try:
        from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward
        from liger_kernel.ops.geglu import geglu_forward
        from liger_kernel.ops.rms_norm import rms_norm_forward
        from liger_kernel.ops.rope import rope_forward
        from liger_kernel.ops.softmax import _softmax_forward
        from liger_kernel.ops.swiglu import swiglu_forward
    except Exception as exc:  # noqa: BLE001
        print(f"[bench] Liger-Kernel unavailable: {exc!r}")
        return None
    return {
        "rms_norm": lambda x, w, eps: rms_norm_forward(x, w, eps, 0.0, "llama", False)[0],
        "add_rms_norm": lambda x, r, w, eps: fused_add_rms_norm_forward(x, r, w, eps, 0.0, "llama")[:2],
        "rope": lambda q, k, cos, sin: rope_forward(q, k, cos, sin)[:2],
        "silu_mul": lambda a, b: swiglu_forward(a, b)[2],
        "gelu_mul": lambda a, b: geglu_forward(a, b)[2],
        "softmax": lambda x: _softmax_forward(x)[0],
    }


# --- the math as Hugging Face models write it -------------------------------------

def torch_rms_norm(x, w, eps):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def torch_add_rms_norm(x, r, w, eps):
    h = x + r
    return torch_rms_norm(h, w, eps), h


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def torch_rope(q, k, cos, sin):
    """HF apply_rotary_pos_emb: q/k [B, H, L, D], cos/sin [1, L, D]."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def cos_sin(positions, dim, base, dtype):
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos().to(dtype)[None], emb.sin().to(dtype)[None]


def torch_head_norm_rope(x, w, cos, sin, eps):
    """Qwen3-style q path: per-head RMS norm, then rope; x [T, H, D], cos/sin [1, T, D]."""
    y = torch_rms_norm(x, w, eps)
    c, s = cos[0][:, None, :], sin[0][:, None, :]
    return y * c + rotate_half(y) * s


def torch_silu_mul(a, b):
    return F.silu(a) * b


def torch_gelu_mul(a, b):
    return F.gelu(a, approximate="tanh") * b


def torch_sigmoid_mul(x, g):
    return x * torch.sigmoid(g)


def torch_softcap(x, cap):
    return cap * torch.tanh(x / cap)


def torch_softmax(x):
    return torch.softmax(x, dim=-1)
