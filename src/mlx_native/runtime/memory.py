"""Output allocation and row layouts shared by the kernels.

Ops allocate outputs through :func:`empty` / :func:`empty_like` so that
``MLX_NATIVE_NAN_FILL=1`` can pre-fill them with NaN (integers with -1): a
kernel that leaves an element unwritten then fails its test.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from . import env


def empty(shape: Sequence[int], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.empty``, NaN-filled (ints: -1) when ``MLX_NATIVE_NAN_FILL=1``."""
    out = torch.empty(shape, dtype=dtype, device=device)
    if env.settings.nan_fill:
        out.fill_(float("nan") if out.is_floating_point() else -1)
    return out


def empty_like(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A contiguous tensor of ``x``'s shape (NaN-filled in debug mode)."""
    return empty(x.shape, dtype=dtype or x.dtype, device=x.device)


def collapse_dims(sizes: Sequence[int], strides: Sequence[int]) -> list[tuple[int, int]]:
    """Merge adjacent dims that address memory as one dim.

    Returns (size, stride) pairs, outermost first, with size-1 dims dropped.
    Row-major index order is kept: walking the result visits elements in the
    same order as walking ``sizes``.
    """
    dims = [(s, t) for s, t in zip(sizes, strides) if s != 1]
    merged: list[tuple[int, int]] = []
    for size, stride in dims:
        if merged and merged[-1][1] == stride * size:
            prev_size, _ = merged[-1]
            merged[-1] = (prev_size * size, stride)
        else:
            merged.append((size, stride))
    return merged


class RowLayout(NamedTuple):
    """Address of row ``r`` of a ``[..., N]`` tensor with a unit-stride last dim:
    ``(r // inner) * stride_outer + (r % inner) * stride_inner``."""

    n_rows: int
    inner: int
    stride_outer: int
    stride_inner: int


def row_layout(x: torch.Tensor) -> tuple[torch.Tensor, RowLayout]:
    """Describe ``x``'s rows (all dims but the last) as at most two strided levels.

    Returns ``(x, layout)``; ``x`` is copied to contiguous only when its leading
    dims cannot be expressed with two strides (rare: three or more
    non-mergeable strided dims).
    """
    n_rows = x.numel() // max(x.shape[-1], 1) if x.dim() > 0 else 1
    levels = collapse_dims(x.shape[:-1], x.stride()[:-1])
    if len(levels) > 2:
        x = x.contiguous()
        levels = collapse_dims(x.shape[:-1], x.stride()[:-1])
    if not levels:
        return x, RowLayout(n_rows, 1, 0, 0)
    if len(levels) == 1:
        return x, RowLayout(n_rows, levels[0][0], 0, levels[0][1])
    (_, s0), (n1, s1) = levels
    return x, RowLayout(n_rows, n1, s0, s1)


class BroadcastIndex(NamedTuple):
    """Offset of row ``r`` (row-major over some shape) into a broadcast tensor:
    ``(r // (n1 * n2)) * s0 + ((r // n2) % n1) * s1 + (r % n2) * s2``."""

    n1: int
    n2: int
    s0: int
    s1: int
    s2: int


def broadcast_index(t: torch.Tensor, shape: Sequence[int]) -> tuple[torch.Tensor, BroadcastIndex]:
    """Index ``t`` (broadcastable to ``shape``) by the row-major position in ``shape``.

    Up to three strided levels; otherwise ``t`` is expanded and copied (a
    small tensor of per-row values, such as positions).
    """
    expanded = t.expand(*shape) if len(shape) else t.reshape(())
    levels = collapse_dims(expanded.shape, expanded.stride())
    if len(levels) > 3:
        expanded = expanded.contiguous()
        levels = collapse_dims(expanded.shape, expanded.stride())
    levels = [(1, 0)] * (3 - len(levels)) + levels
    (_, s0), (n1, s1), (n2, s2) = levels
    return expanded, BroadcastIndex(n1, n2, s0, s1, s2)
