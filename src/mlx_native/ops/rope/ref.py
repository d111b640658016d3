"""Pure-PyTorch reference of the rotary embeddings: fp32 math (fp64 for fp64 inputs).

Layout conventions (see api.py): ``x [..., D]``; the rotation angle of row r
and pair i is ``theta = pos(r) * scale * inv_freq[i]`` with
``inv_freq[i] = base ** (-2 i / dims)`` or ``1 / freqs[i]``.
Non-traditional (NeoX) pairs are ``(i, i + dims/2)``; traditional pairs are
``(2i, 2i + 1)``; columns ``dims..D`` pass through.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..common import compute_dtype


def inv_freq(dims: int, base: float, freqs: Optional[torch.Tensor], dtype: torch.dtype, device) -> torch.Tensor:
    """``[dims/2]`` inverse frequencies in ``dtype``: ``1 / freqs``, or
    ``base ** (-2i / dims)`` computed in fp64 and rounded once."""
    if freqs is not None:
        return 1.0 / freqs.to(dtype=dtype, device=device)
    i = torch.arange(dims // 2, dtype=torch.float64, device=device)
    return (float(base) ** (-2.0 * i / dims)).to(dtype)


def rotate(x: torch.Tensor, dims: int, theta: torch.Tensor, traditional: bool) -> torch.Tensor:
    """Rotate the first ``dims`` columns of ``x [..., D]`` by ``theta [..., dims/2]``
    (broadcast over x's rows); math in ``x``'s dtype."""
    half = dims // 2
    cos, sin = torch.cos(theta), torch.sin(theta)
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        rotated = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    else:
        a, b = x[..., :half], x[..., half:dims]
        rotated = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    return torch.cat([rotated, x[..., dims:]], dim=-1)


def mlx_positions(x: torch.Tensor, offset: int, offset_tensor: Optional[torch.Tensor]) -> torch.Tensor:
    """MLX positions ``offset + l`` for ``x [B, ..., L, D]``, shaped ``x.shape[:-1]``."""
    seq_len = x.shape[-2]
    pos = torch.arange(seq_len, device=x.device, dtype=torch.int64) + offset
    pos = pos.expand(*x.shape[:-1])
    if offset_tensor is not None:
        per_batch = offset_tensor.reshape(-1).to(torch.int64)
        if per_batch.numel() > 1:
            per_batch = per_batch.reshape(-1, *([1] * (x.dim() - 2)))
        pos = pos + per_batch
    return pos


def rope(
    x: torch.Tensor,
    dims: int,
    traditional: bool,
    base: float,
    scale: float,
    offset: int = 0,
    offset_tensor: Optional[torch.Tensor] = None,
    freqs: Optional[torch.Tensor] = None,
    positions: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    cd = compute_dtype(x.dtype)
    pos = mlx_positions(x, offset, offset_tensor) if positions is None else positions.expand(*x.shape[:-1])
    theta = (pos.to(cd) * scale)[..., None] * inv_freq(dims, base, freqs, cd, x.device)
    return rotate(x.to(cd), dims, theta, traditional).to(x.dtype)


def section_ids(half: int, sections: Sequence[int], interleaved: bool, device) -> torch.Tensor:
    """Which position stream (0=t, 1=h, 2=w, 3=extra) drives each of the ``half`` frequencies.

    Contiguous (Qwen2-VL): consecutive blocks of ``sections[k]`` frequencies.
    Interleaved (Qwen3-VL / Qwen3.5): frequency i uses stream 1 if
    ``i % 3 == 1 and i < 3 * sections[1]``, stream 2 if ``i % 3 == 2 and
    i < 3 * sections[2]``, else stream 0.
    """
    i = torch.arange(half, device=device)
    if interleaved:
        ids = torch.zeros(half, dtype=torch.int64, device=device)
        ids[(i % 3 == 1) & (i < 3 * sections[1])] = 1
        ids[(i % 3 == 2) & (i < 3 * sections[2])] = 2
        return ids
    bounds = torch.tensor(list(sections), device=device).cumsum(0)
    return torch.bucketize(i, bounds, right=True)


def multi_theta(
    shape: Sequence[int], dims: int, positions: torch.Tensor, sections: Sequence[int], interleaved: bool,
    base: float, scale: float, freqs: Optional[torch.Tensor], dtype: torch.dtype,
) -> torch.Tensor:
    """``[*shape, dims/2]`` angles from per-section positions ``[S, *broadcastable to shape]``."""
    half = dims // 2
    pos = positions.expand(len(sections), *shape).movedim(0, -1)  # [*shape, S]
    pos = pos[..., section_ids(half, sections, interleaved, positions.device)]  # [*shape, half]
    return pos.to(dtype) * scale * inv_freq(dims, base, freqs, dtype, positions.device)


def rope_multi(
    x: torch.Tensor, dims: int, positions: torch.Tensor, sections: Sequence[int], interleaved: bool,
    traditional: bool, base: float, scale: float, freqs: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    cd = compute_dtype(x.dtype)
    theta = multi_theta(x.shape[:-1], dims, positions, sections, interleaved, base, scale, freqs, cd)
    return rotate(x.to(cd), dims, theta, traditional).to(x.dtype)


def head_norm_rope(
    x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, weight_offset: float, dims: int, base: float,
    scale: float, positions: torch.Tensor, traditional: bool, freqs: Optional[torch.Tensor] = None,
    sections: Optional[Sequence[int]] = None, interleaved: bool = False,
) -> torch.Tensor:
    """Per-head RMS norm of ``x [..., H, D]`` then RoPE, with no rounding in between.

    ``positions`` broadcast to ``x.shape[:-2]`` (``[S, ...]`` with ``sections``).
    """
    cd = compute_dtype(x.dtype)
    xf = x.to(cd)
    y = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * (weight.to(cd) + weight_offset)
    pos = positions.unsqueeze(-1)  # tokens -> rows of [..., H]
    if sections is None:
        theta = (pos.expand(*x.shape[:-1]).to(cd) * scale)[..., None] * inv_freq(dims, base, freqs, cd, x.device)
    else:
        theta = multi_theta(x.shape[:-1], dims, pos, sections, interleaved, base, scale, freqs, cd)
    return rotate(y, dims, theta, traditional).to(x.dtype)
