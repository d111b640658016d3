"""Triton kernel for rotary embeddings, optionally fused with a per-head RMS norm.

One kernel serves ``rope`` (MLX positions or explicit ones), ``rope_multi``
(per-section position streams) and ``head_norm_rope`` (RMS norm of each head
row, then the rotation, with one read and one write of x). Each program
handles ``BLOCK_R`` rows of ``D`` elements: the rotated pairs ``(a, b)`` and
the pass-through tail ``dims..D`` are loaded once, cos/sin are computed in
registers from the positions and an inverse-frequency table (no cos/sin
cache is read).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import torch
import triton
import triton.language as tl

from ...runtime.memory import BroadcastIndex, empty_like, row_layout
from ..common import next_pow2, prev_pow2
from . import ref

TILE_ELEMS = 2048  # rows are batched until a program holds this many elements
ELEMS_PER_THREAD = 8  # sets num_warps: tile elements / (32 * this)
_NO_SECTION = 1 << 30


@triton.jit(do_not_specialize=["n_rows", "pos_offset", "seq_len"])
def _rope_kernel(
    x_ptr,  # [R, D] rows at (r // x_inner) * x_so + (r % x_inner) * x_si, unit column stride
    y_ptr,  # [R, D] contiguous output
    w_ptr,  # [D] norm weight (DO_NORM and HAS_WEIGHT)
    freq_ptr,  # [dims/2] fp32 inv_freq table, or MLX freqs with inv_freq = 1 / freqs (HAS_FREQS)
    pos_ptr,  # positions: row r at BroadcastIndex (p_*); stream k at + k * p_sec (HAS_POS_TENSOR)
    n_rows,
    head_dim,
    half,  # dims / 2 rotated pairs
    x_inner,
    x_so,
    x_si,
    p_n1,
    p_n2,
    p_s0,
    p_s1,
    p_s2,
    p_sec,
    pos_offset,  # added to every position (MLX offset)
    seq_len,  # MLX mode: position of row r is pos_offset + r % seq_len
    sec1,  # contiguous sections: cumulative bounds; interleaved: 3 * sections[1]
    sec2,  # contiguous: cumulative; interleaved: 3 * sections[2]
    sec3,  # contiguous: cumulative (4 sections)
    scale,
    eps,
    w_offset,
    BLOCK_R: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_T: tl.constexpr,
    HAS_POS_TENSOR: tl.constexpr,
    ADD_ROW_INDEX: tl.constexpr,
    TRADITIONAL: tl.constexpr,
    HAS_FREQS: tl.constexpr,
    DO_NORM: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_TAIL: tl.constexpr,
    N_SECTIONS: tl.constexpr,
    INTERLEAVED: tl.constexpr,
):
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    row_ok = rows < n_rows
    x_row = (rows // x_inner) * x_so + (rows % x_inner) * x_si
    y_row = rows * head_dim
    i = tl.arange(0, BLOCK_H)
    i_ok = i < half
    m = row_ok[:, None] & i_ok[None, :]

    # --- load the pairs (a, b) and the pass-through tail -------------------
    if TRADITIONAL:
        j = tl.arange(0, 2)
        pair_cols = (2 * i)[:, None] + j[None, :]  # [BLOCK_H, 2]
        ab = tl.load(x_ptr + x_row[:, None, None] + pair_cols[None, :, :], mask=m[:, :, None], other=0.0)
        a, b = tl.split(ab.to(tl.float32))
        col_a = 2 * i
        col_b = 2 * i + 1
    else:
        col_a = i
        col_b = i + half
        a = tl.load(x_ptr + x_row[:, None] + col_a[None, :], mask=m, other=0.0).to(tl.float32)
        b = tl.load(x_ptr + x_row[:, None] + col_b[None, :], mask=m, other=0.0).to(tl.float32)
    k = 2 * half + tl.arange(0, BLOCK_T)
    mt = row_ok[:, None] & (k < head_dim)[None, :]
    t = tl.zeros([BLOCK_R, BLOCK_T], dtype=tl.float32)
    if HAS_TAIL:
        t = tl.load(x_ptr + x_row[:, None] + k[None, :], mask=mt, other=0.0).to(tl.float32)

    # --- optional per-row RMS norm ------------------------------------------
    if DO_NORM:
        ss = tl.sum(a * a, axis=1) + tl.sum(b * b, axis=1)
        if HAS_TAIL:
            ss += tl.sum(t * t, axis=1)
        inv_rms = tl.rsqrt(ss / head_dim + eps)[:, None]
        a = a * inv_rms
        b = b * inv_rms
        t = t * inv_rms
        if HAS_WEIGHT:
            a = a * (tl.load(w_ptr + col_a, mask=i_ok, other=0.0).to(tl.float32) + w_offset)[None, :]
            b = b * (tl.load(w_ptr + col_b, mask=i_ok, other=0.0).to(tl.float32) + w_offset)[None, :]
            if HAS_TAIL:
                t = t * (tl.load(w_ptr + k, mask=k < head_dim, other=0.0).to(tl.float32) + w_offset)[None, :]

    # --- angles -----------------------------------------------------------------
    if HAS_FREQS:
        inv_freq = tl.math.div_rn(1.0, tl.load(freq_ptr + i, mask=i_ok, other=1.0).to(tl.float32))
    else:
        inv_freq = tl.load(freq_ptr + i, mask=i_ok, other=0.0)
    p_row = (rows // (p_n1 * p_n2)) * p_s0 + ((rows // p_n2) % p_n1) * p_s1 + (rows % p_n2) * p_s2
    if N_SECTIONS == 1:
        pos = tl.zeros([BLOCK_R], dtype=tl.int64) + pos_offset
        if ADD_ROW_INDEX:
            pos += rows % seq_len
        if HAS_POS_TENSOR:
            pos += tl.load(pos_ptr + p_row, mask=row_ok, other=0).to(tl.int64)
        theta = (pos.to(tl.float32) * scale)[:, None] * inv_freq[None, :]
    else:
        if INTERLEAVED:
            r3 = i % 3
            sec = tl.where((r3 == 1) & (i < sec1), 1, tl.where((r3 == 2) & (i < sec2), 2, 0))
        else:
            sec = (i >= sec1).to(tl.int32) + (i >= sec2).to(tl.int32) + (i >= sec3).to(tl.int32)
        pos2 = tl.load(pos_ptr + p_row[:, None] + (sec * p_sec)[None, :], mask=m, other=0)
        theta = pos2.to(tl.float32) * scale * inv_freq[None, :]
    c = tl.cos(theta)
    s = tl.sin(theta)
    out_a = a * c - b * s
    out_b = b * c + a * s

    # --- store ------------------------------------------------------------------
    out_ty = y_ptr.dtype.element_ty
    if TRADITIONAL:
        j2 = tl.arange(0, 2)
        out_cols = (2 * i)[:, None] + j2[None, :]
        tl.store(y_ptr + y_row[:, None, None] + out_cols[None, :, :], tl.join(out_a, out_b).to(out_ty),
                 mask=m[:, :, None])
    else:
        tl.store(y_ptr + y_row[:, None] + col_a[None, :], out_a.to(out_ty), mask=m)
        tl.store(y_ptr + y_row[:, None] + col_b[None, :], out_b.to(out_ty), mask=m)
    if HAS_TAIL:
        tl.store(y_ptr + y_row[:, None] + k[None, :], t.to(out_ty), mask=mt)


class Positions(NamedTuple):
    """Where the kernel reads positions from.

    tensor: integer tensor indexed per row by ``index`` (None: no tensor);
    section_stride: stride between position streams (multi-section);
    offset: added to every position; seq_len: >0 adds ``row % seq_len`` (MLX mode).
    """

    tensor: Optional[torch.Tensor]
    index: BroadcastIndex
    section_stride: int = 0
    offset: int = 0
    seq_len: int = 0


NO_INDEX = BroadcastIndex(1, 1, 0, 0, 0)


_INV_FREQ_TABLES: dict[tuple[int, float, torch.device], torch.Tensor] = {}


def inv_freq_table(dims: int, base: float, device: torch.device) -> torch.Tensor:
    """``[dims/2]`` fp32 ``base ** (-2i / dims)``, correctly rounded from fp64; cached per device.

    A table instead of in-kernel ``exp2``: the angle ``pos * inv_freq`` then
    carries only the rounding of the product, as in a PyTorch model.
    """
    key = (dims, base, device)
    table = _INV_FREQ_TABLES.get(key)
    if table is None:
        table = ref.inv_freq(dims, base, None, torch.float32, device)
        _INV_FREQ_TABLES[key] = table
    return table


def _section_bounds(sections: Optional[Sequence[int]], interleaved: bool) -> tuple[int, int, int]:
    if sections is None:
        return _NO_SECTION, _NO_SECTION, _NO_SECTION
    if interleaved:
        return 3 * sections[1], 3 * sections[2], _NO_SECTION
    cum = [sum(sections[: n + 1]) for n in range(len(sections))]
    bounds = cum[:-1] + [_NO_SECTION] * (4 - len(cum))
    return bounds[0], bounds[1], bounds[2]


def rope(
    x: torch.Tensor,
    dims: int,
    positions: Positions,
    *,
    traditional: bool,
    base: float,
    scale: float,
    freqs: Optional[torch.Tensor],
    sections: Optional[Sequence[int]] = None,
    interleaved: bool = False,
    norm: bool = False,
    weight: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
    weight_offset: float = 0.0,
) -> torch.Tensor:
    """Launch the rope kernel on validated, non-empty ``x [..., D]``; returns ``[..., D]``."""
    head_dim = x.shape[-1]
    half = dims // 2
    tail = head_dim - dims
    x, xl = row_layout(x)
    y = empty_like(x)
    block_h = next_pow2(half)
    block_t = next_pow2(tail) if tail > 0 else 1
    row_elems = 2 * block_h + (block_t if tail > 0 else 0)
    block_r = min(next_pow2(xl.n_rows), prev_pow2(max(1, TILE_ELEMS // row_elems)))
    num_warps = min(16, max(1, block_r * row_elems // (32 * ELEMS_PER_THREAD)))
    sec1, sec2, sec3 = _section_bounds(sections, interleaved)
    p = positions.index
    dummy = x
    _rope_kernel[(triton.cdiv(xl.n_rows, block_r),)](
        x, y,
        weight if weight is not None else dummy,
        freqs if freqs is not None else inv_freq_table(dims, base, x.device),
        positions.tensor if positions.tensor is not None else dummy,
        xl.n_rows, head_dim, half,
        xl.inner, xl.stride_outer, xl.stride_inner,
        p.n1, p.n2, p.s0, p.s1, p.s2, positions.section_stride,
        positions.offset, max(positions.seq_len, 1),
        sec1, sec2, sec3,
        float(scale), float(eps), float(weight_offset),
        BLOCK_R=block_r, BLOCK_H=block_h, BLOCK_T=block_t,
        HAS_POS_TENSOR=positions.tensor is not None,
        ADD_ROW_INDEX=positions.seq_len > 0,
        TRADITIONAL=traditional,
        HAS_FREQS=freqs is not None,
        DO_NORM=norm,
        HAS_WEIGHT=weight is not None,
        HAS_TAIL=tail > 0,
        N_SECTIONS=1 if sections is None else len(sections),
        INTERLEAVED=interleaved,
        num_warps=num_warps,
    )
    return y
