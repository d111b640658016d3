"""Triton kernel for rotary embeddings, optionally fused with a per-head RMS norm.

One kernel serves ``rope`` (MLX positions or explicit ones), ``rope_multi``
(per-section position streams) and ``head_norm_rope`` (RMS norm of each head
row, then the rotation, with one read and one write of x).

The rows of ``x [..., D]`` (all dims but the last) are split into a *group*
dim whose rows share their positions (usually the heads) and the remaining
*position rows*. A program handles a ``[BLOCK_R, BLOCK_G, D]`` tile: the
angles ``pos * scale * inv_freq`` and their cos/sin are computed once per
position row and reused for the ``BLOCK_G`` rows of the group, so the
transcendental work does not grow with the number of heads. Inverse
frequencies come from a correctly rounded fp32 table (or MLX ``freqs``).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch
import triton
import triton.language as tl

from ...kernels.dependent import dependent_launch, enter, prefetch_lines, prefetch_vector_l2
from ...kernels.math import sincos
from ...kernels.rows import row_offsets
from ...runtime.device import device_info
from ...runtime.memory import (contiguous_strides, index_levels, is_canonical, output_like, plan_rows,
                               strided_vector)
from ..common import next_pow2, prev_pow2
from . import ref

# Launch configs (bench/sweep.py, bench/NOTES.md): large problems take tiles of up to
# LARGE_GROUP heads with many elements per thread (few warps, the angles amortized over
# the heads); problems too small to fill the GPU that way (decode: a few tokens) take
# SMALL_ROWS head rows per program with SMALL_ELEMS_PER_THREAD elements per thread (latency: more programs
# in flight). The small config is the session-6 sweep's choice (8 rows with 8 elements per thread:
# 4 warps at D=128, 8 at D=256, best or within noise of best on every decode shape,
# bench/results/2026-11-22-h100-session6).
TILE_ELEMS = 2048  # large problems: elements per program (rows x group x head dim)
ELEMS_PER_THREAD = 32  # large problems: sets num_warps
LARGE_GROUP = 16  # large problems: heads per program
SMALL_ROWS = 8  # small problems: head rows (position rows x heads) per program
SMALL_ELEMS_PER_THREAD = 8  # small problems: sets num_warps (at most 8)
SMALL_PROGRAMS_PER_SM = 2  # below this many large-config programs per SM, use the small config
POLY_SINCOS = True  # angles through kernels.math.sincos (False: libdevice sin and cos, for comparison)
_NO_SECTION = 1 << 30


@triton.jit
def _pos_row(rows, n1, n2, s0, s1, s2, L0: tl.constexpr, L1: tl.constexpr, L2: tl.constexpr):
    """Index of the positions of ``rows`` in a three-level broadcast view (``runtime.memory.index_levels``):
    ``(r // (n1 n2)) s0 + ((r // n2) % n1) s1 + (r % n2) s2``. ``L0-L2`` (see :func:`pos_levels`) drop the
    levels that add nothing and the remainders that cannot wrap: each runtime division is a dozen instructions
    on the path to the position load."""
    idx = tl.zeros_like(rows)
    if L0:
        idx += (rows // (n1 * n2)) * s0
    if L1:
        t = rows // n2
        if L1 == 2:
            t = t % n1
        idx += t * s1
    if L2:
        t = rows
        if L2 == 2:
            t = t % n2
        idx += t * s2
    return idx


def pos_levels(n_rows: int, n1: int, n2: int, s0: int, s1: int, s2: int) -> tuple[int, int, int]:
    """Per level of :func:`_pos_row`: 0 skip (stride 0, or a single index), 1 no remainder needed, 2 full."""
    l0 = int(s0 != 0 and n_rows > n1 * n2)
    l1 = 0 if s1 == 0 or n1 == 1 else (2 if n_rows > n1 * n2 else 1)
    l2 = 0 if s2 == 0 or n2 == 1 else (2 if n_rows > n2 else 1)
    return l0, l1, l2


@triton.jit
def _rope_tile(
    pid_r,
    pid_g,
    x_ptr,  # [R, G, D]: position row r (layout x_*), group g at + g * x_gs, unit column stride
    y_ptr,  # [R, G, D] output, layout y_*, group stride y_gs
    w_ptr,  # [D] norm weight (DO_NORM and HAS_WEIGHT)
    freq_ptr,  # [dims/2] fp32 inv_freq table, or MLX freqs with inv_freq = 1 / freqs (HAS_FREQS)
    pos_ptr,  # positions of row r at index p_* (3 levels); stream k at + k * p_sec (HAS_POS_TENSOR)
    n_rows,
    n_groups,
    head_dim,
    half,
    x_inner,
    x_so,
    x_si,
    x_gs,
    y_inner,
    y_so,
    y_si,
    y_gs,
    p_n1,
    p_n2,
    p_s0,
    p_s1,
    p_s2,
    p_sec,
    pos_offset,
    seq_len,
    sec1,
    sec2,
    sec3,
    scale,
    eps,
    w_offset,
    BLOCK_R: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_T: tl.constexpr,
    X_TWO_LEVEL: tl.constexpr,
    Y_TWO_LEVEL: tl.constexpr,
    HAS_POS_TENSOR: tl.constexpr,
    ADD_ROW_INDEX: tl.constexpr,
    TRADITIONAL: tl.constexpr,
    HAS_FREQS: tl.constexpr,
    DO_NORM: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_TAIL: tl.constexpr,
    N_SECTIONS: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    P_L0: tl.constexpr,  # position index levels used (pos_levels)
    P_L1: tl.constexpr,
    P_L2: tl.constexpr,
    POLY_SINCOS: tl.constexpr,
):
    """One [BLOCK_R, BLOCK_G, D] tile of one tensor (see the kernel for the arguments)."""
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    groups = pid_g * BLOCK_G + tl.arange(0, BLOCK_G)
    row_ok = rows < n_rows
    m2 = row_ok[:, None] & (groups < n_groups)[None, :]  # [BR, BG]
    g64 = groups.to(tl.int64)[None, :]
    x_base = row_offsets(rows, x_inner, x_so, x_si, X_TWO_LEVEL)[:, None] + g64 * x_gs  # [BR, BG]
    y_base = row_offsets(rows, y_inner, y_so, y_si, Y_TWO_LEVEL)[:, None] + g64 * y_gs
    i = tl.arange(0, BLOCK_H)
    i_ok = i < half
    m = m2[:, :, None] & i_ok[None, None, :]  # [BR, BG, BH]

    # --- load the pairs (a, b) and the pass-through tail --------------------------
    if TRADITIONAL:
        pair_cols = (2 * i)[:, None] + tl.arange(0, 2)[None, :]  # [BH, 2]
        ab = tl.load(x_ptr + x_base[:, :, None, None] + pair_cols[None, None, :, :], mask=m[:, :, :, None],
                     other=0.0)
        a, b = tl.split(ab.to(tl.float32))
        col_a = 2 * i
        col_b = 2 * i + 1
    else:
        col_a = i
        col_b = i + half
        a = tl.load(x_ptr + x_base[:, :, None] + col_a[None, None, :], mask=m, other=0.0).to(tl.float32)
        b = tl.load(x_ptr + x_base[:, :, None] + col_b[None, None, :], mask=m, other=0.0).to(tl.float32)
    k = 2 * half + tl.arange(0, BLOCK_T)
    mt = m2[:, :, None] & (k < head_dim)[None, None, :]
    t = tl.zeros([BLOCK_R, BLOCK_G, BLOCK_T], dtype=tl.float32)
    if HAS_TAIL:
        t = tl.load(x_ptr + x_base[:, :, None] + k[None, None, :], mask=mt, other=0.0).to(tl.float32)

    # --- every other load before any math: weights, frequencies, positions -------------
    if DO_NORM and HAS_WEIGHT:
        w_a = tl.load(w_ptr + col_a, mask=i_ok, other=0.0).to(tl.float32) + w_offset
        w_b = tl.load(w_ptr + col_b, mask=i_ok, other=0.0).to(tl.float32) + w_offset
        if HAS_TAIL:
            w_t = tl.load(w_ptr + k, mask=k < head_dim, other=0.0).to(tl.float32) + w_offset
    if HAS_FREQS:
        inv_freq = tl.math.div_rn(1.0, tl.load(freq_ptr + i, mask=i_ok, other=1.0).to(tl.float32))
    else:
        inv_freq = tl.load(freq_ptr + i, mask=i_ok, other=0.0)
    p_row = _pos_row(rows, p_n1, p_n2, p_s0, p_s1, p_s2, P_L0, P_L1, P_L2)
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
        pos2 = tl.load(pos_ptr + p_row[:, None] + (sec * p_sec)[None, :], mask=row_ok[:, None] & i_ok[None, :],
                       other=0)
        theta = pos2.to(tl.float32) * scale * inv_freq[None, :]

    # --- optional per-row RMS norm ---------------------------------------------------
    if DO_NORM:
        ss = tl.sum(a * a, axis=2) + tl.sum(b * b, axis=2)
        if HAS_TAIL:
            ss += tl.sum(t * t, axis=2)
        inv_rms = tl.rsqrt(ss / head_dim + eps)[:, :, None]
        a = a * inv_rms
        b = b * inv_rms
        t = t * inv_rms
        if HAS_WEIGHT:
            a = a * w_a[None, None, :]
            b = b * w_b[None, None, :]
            if HAS_TAIL:
                t = t * w_t[None, None, :]

    # --- rotate: cos/sin once per position row, shared by the group ----------------------
    if POLY_SINCOS:
        s, c = sincos(theta)
    else:
        s, c = tl.sin(theta), tl.cos(theta)
    c = c[:, None, :]
    s = s[:, None, :]
    out_a = a * c - b * s
    out_b = b * c + a * s

    # --- store ------------------------------------------------------------------------
    out_ty = y_ptr.dtype.element_ty
    if TRADITIONAL:
        out_cols = (2 * i)[:, None] + tl.arange(0, 2)[None, :]
        tl.store(y_ptr + y_base[:, :, None, None] + out_cols[None, None, :, :], tl.join(out_a, out_b).to(out_ty),
                 mask=m[:, :, :, None])
    else:
        tl.store(y_ptr + y_base[:, :, None] + col_a[None, None, :], out_a.to(out_ty), mask=m)
        tl.store(y_ptr + y_base[:, :, None] + col_b[None, None, :], out_b.to(out_ty), mask=m)
    if HAS_TAIL:
        tl.store(y_ptr + y_base[:, :, None] + k[None, None, :], t.to(out_ty), mask=mt)


@triton.jit(do_not_specialize=["n_rows", "pos_offset"])
def _rope_kernel(
    # Ordered by use, so that a decode launch reads few 64-byte lines of the constant bank (about 20 ns per
    # extra line at decode sizes, session 20): the first line (48 bytes from 0x210) holds what every launch
    # reads, the second what one tensor adds (with its norm), the third what a q/k pair adds
    # (scripts/cbank_lines.py). Shapes stay runtime arguments: masks that vanish when a length is a
    # compile-time power of two made the decode launches slower (session 20, run 16).
    x_ptr,  # [R, G, D]: position row r (layout x_*), group g at + g * x_gs, unit column stride
    y_ptr,  # [R, G, D] output, layout y_*, group stride y_gs
    freq_ptr,  # [dims/2] fp32 inv_freq table, or MLX freqs with inv_freq = 1 / freqs (HAS_FREQS)
    pos_ptr,  # positions of row r at index p_* (3 levels); stream k at + k * p_sec (HAS_POS_TENSOR)
    scale,
    pos_offset,  # added to every position (MLX offset)
    n_rows,
    eps,
    w_ptr,  # [D] norm weight (DO_NORM and HAS_WEIGHT)
    head_dim,
    half,  # dims / 2 rotated pairs
    x_si,
    x_gs,
    y_si,
    y_gs,
    w_offset,
    n_groups,
    x2_ptr,  # PAIR: a second tensor [R, G2, D] with the same position rows (layout x2_*)
    y2_ptr,  # PAIR: its output (layout y2_*)
    group_blocks,  # program-id-1 values of the first tensor; the rest are the second's
    n_groups2,
    x2_si,
    x2_gs,
    y2_si,
    y2_gs,
    w2_ptr,  # PAIR: its norm weight
    x_inner,
    x_so,
    y_inner,
    y_so,
    x2_inner,
    x2_so,
    y2_inner,
    y2_so,
    p_n1,
    p_n2,
    p_s0,
    p_s1,
    p_s2,
    p_sec,
    seq_len,  # ADD_ROW_INDEX: position of row r is pos_offset + r % seq_len
    sec1,  # contiguous sections: cumulative bounds; interleaved: 3 * sections[1]
    sec2,  # contiguous: cumulative; interleaved: 3 * sections[2]
    sec3,  # contiguous: cumulative (4 sections)
    BLOCK_R: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_T: tl.constexpr,
    X_TWO_LEVEL: tl.constexpr,
    Y_TWO_LEVEL: tl.constexpr,
    X2_TWO_LEVEL: tl.constexpr,
    Y2_TWO_LEVEL: tl.constexpr,
    PAIR: tl.constexpr,
    HAS_POS_TENSOR: tl.constexpr,
    ADD_ROW_INDEX: tl.constexpr,
    TRADITIONAL: tl.constexpr,
    HAS_FREQS: tl.constexpr,
    DO_NORM: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_TAIL: tl.constexpr,
    N_SECTIONS: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    P_L0: tl.constexpr,  # position index levels used (pos_levels)
    P_L1: tl.constexpr,
    P_L2: tl.constexpr,
    POLY_SINCOS: tl.constexpr,
    W_BYTES: tl.constexpr = 0,  # the norm weights' bytes ...
    W_LINES: tl.constexpr = 0,  # ... and their 128-byte lines asked of L2 before the wait (0: none)
    PDL: tl.constexpr = False,
):
    prefetch_vector_l2(w_ptr, W_BYTES, W_LINES)  # hints, the only thing before the wait
    if PAIR:
        prefetch_vector_l2(w2_ptr, W_BYTES, W_LINES)
    enter(PDL)  # a programmatic dependent launch: nothing else before this (kernels/dependent.py)
    pid_r = tl.program_id(0)
    pid_g = tl.program_id(1)
    second = False
    if PAIR:
        second = pid_g >= group_blocks
    if second:
        _rope_tile(pid_r, pid_g - group_blocks, x2_ptr, y2_ptr, w2_ptr, freq_ptr, pos_ptr, n_rows, n_groups2,
                   head_dim, half, x2_inner, x2_so, x2_si, x2_gs, y2_inner, y2_so, y2_si, y2_gs,
                   p_n1, p_n2, p_s0, p_s1, p_s2, p_sec, pos_offset, seq_len, sec1, sec2, sec3, scale, eps, w_offset,
                   BLOCK_R, BLOCK_G, BLOCK_H, BLOCK_T, X2_TWO_LEVEL, Y2_TWO_LEVEL, HAS_POS_TENSOR, ADD_ROW_INDEX,
                   TRADITIONAL, HAS_FREQS, DO_NORM, HAS_WEIGHT, HAS_TAIL, N_SECTIONS, INTERLEAVED, P_L0, P_L1, P_L2,
                   POLY_SINCOS)
    else:
        _rope_tile(pid_r, pid_g, x_ptr, y_ptr, w_ptr, freq_ptr, pos_ptr, n_rows, n_groups,
                   head_dim, half, x_inner, x_so, x_si, x_gs, y_inner, y_so, y_si, y_gs,
                   p_n1, p_n2, p_s0, p_s1, p_s2, p_sec, pos_offset, seq_len, sec1, sec2, sec3, scale, eps, w_offset,
                   BLOCK_R, BLOCK_G, BLOCK_H, BLOCK_T, X_TWO_LEVEL, Y_TWO_LEVEL, HAS_POS_TENSOR, ADD_ROW_INDEX,
                   TRADITIONAL, HAS_FREQS, DO_NORM, HAS_WEIGHT, HAS_TAIL, N_SECTIONS, INTERLEAVED, P_L0, P_L1, P_L2,
                   POLY_SINCOS)


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


def _drop(seq: Sequence[int], dim: Optional[int]) -> list[int]:
    return [v for d, v in enumerate(seq) if d != dim]


def group_dim(rows_shape: Sequence[int], pos_strides: Sequence[int], mlx_rows: bool,
              other_rows: Optional[Sequence[int]] = None) -> Optional[int]:
    """The row dim whose rows share positions and become the kernel's group dim.

    The largest dim that positions do not depend on (not the L axis in MLX
    mode); with a second tensor, the one dim where the two row shapes differ
    (e.g. q and k heads), which must be position-independent. None: no such dim.
    """
    fixed = {len(rows_shape) - 1} if mlx_rows else set()
    free = [d for d in range(len(rows_shape)) if pos_strides[d] == 0 and d not in fixed]
    if other_rows is not None:
        differ = [d for d in range(len(rows_shape)) if rows_shape[d] != other_rows[d]]
        if differ:
            return differ[0] if len(differ) == 1 and differ[0] in free else -1
    candidates = [(rows_shape[d], d) for d in free if rows_shape[d] > 1]
    return max(candidates)[1] if candidates else None


class _Layouts:
    """Row layouts of one tensor (and its contiguous output) with the group dim taken out."""

    def __init__(self, x: torch.Tensor, gd: Optional[int]):
        head_dim = x.shape[-1]
        sub_shape = _drop(list(x.shape[:-1]), gd)
        xl = plan_rows(sub_shape + [head_dim], _drop(x.stride()[:-1], gd) + [1])
        self.copy = xl is None
        x_strides = contiguous_strides(x.shape) if self.copy else x.stride()
        self.x = xl or plan_rows(sub_shape + [head_dim], _drop(x_strides[:-1], gd) + [1])
        y_strides = contiguous_strides(x.shape)
        self.y = plan_rows(sub_shape + [head_dim], _drop(y_strides[:-1], gd) + [1])
        self.n_groups = x.shape[gd] if gd is not None else 1
        self.x_gs = x_strides[gd] if gd is not None else 0
        self.y_gs = y_strides[gd] if gd is not None else 0


def launch_config(n_rows: int, n_groups: int, row_elems: int, total: int, sm_count: int) -> tuple[int, int, int]:
    """(BLOCK_G, BLOCK_R, num_warps) for ``n_rows`` position rows x ``n_groups`` heads.

    ``row_elems``: padded elements of one head row; ``total``: padded elements of
    the whole launch (both tensors of a pair). Small problems (fewer than
    ``SMALL_PROGRAMS_PER_SM`` large-config programs per SM) take ``SMALL_ROWS``
    head rows per program (heads first) and ``SMALL_ELEMS_PER_THREAD`` elements per thread (1-8 warps); at most
    ``SMALL_ROWS`` head rows in all take one per program (session 21 run 2, head_norm_rope T1 H8 D256: 8 programs
    of 1 warp 1.491 us against one of 8 warps 1.579, torch.compile 1.504).
    """
    small = total < SMALL_PROGRAMS_PER_SM * sm_count * TILE_ELEMS
    if small and n_rows * n_groups <= SMALL_ROWS:  # one program would take it all: one head row each instead
        tile, max_group = row_elems, 1
    elif small:
        tile, max_group = SMALL_ROWS * row_elems, n_groups
    else:
        tile, max_group = max(TILE_ELEMS, LARGE_GROUP * row_elems), LARGE_GROUP
    block_g = min(next_pow2(n_groups), prev_pow2(max(1, tile // row_elems)), next_pow2(max_group))
    block_r = min(next_pow2(n_rows), prev_pow2(max(1, tile // (row_elems * block_g))))
    per_thread, most = (SMALL_ELEMS_PER_THREAD, 8) if small else (ELEMS_PER_THREAD, 16)
    num_warps = prev_pow2(min(most, max(1, block_r * block_g * row_elems // (32 * per_thread))))
    return block_g, block_r, num_warps


class RopePlan:
    """The rope kernel prepared for one signature (one tensor, or a q/k pair in one launch).

    Args:
        x: ``[..., D]`` input of the first call.
        dims: rotated dims.
        pos_view: maps the position tensor of a call (or None) to a view
            ``[S, *x.shape[:-1]]`` of its values (S streams; 1 unless multi-section).
        pos_raw: the position tensor of the first call (None: MLX positions from
            ``offset + row % L`` only).
        seq_len: > 0 adds ``row % seq_len`` along the last row dim (MLX mode).
        traditional, base, freqs, sections, interleaved: as in the public ops.
        norm, weight: per-row RMS norm first (head_norm_rope).
        x2, weight2: a second tensor rotated with the same positions in the same
            launch (k of a q/k pair); its row shape may differ from x's in one
            position-independent dim (the heads). Raises ValueError otherwise.
    """

    def __init__(self, x: torch.Tensor, dims: int, pos_view: Callable[[Optional[torch.Tensor]], torch.Tensor],
                 pos_raw: Optional[torch.Tensor], seq_len: int, *, traditional: bool, base: float,
                 freqs: Optional[torch.Tensor], sections: Optional[Sequence[int]], interleaved: bool,
                 norm: bool = False, weight: Optional[torch.Tensor] = None, x2: Optional[torch.Tensor] = None,
                 weight2: Optional[torch.Tensor] = None):
        self.shape, self.dtype, self.device = tuple(x.shape), x.dtype, x.device
        self.shape2 = tuple(x2.shape) if x2 is not None else None
        self.pair = x2 is not None
        # outputs by torch.empty_like of the input (output_like)
        self.x_canonical = is_canonical(x)
        self.x2_canonical = x2 is not None and is_canonical(x2)
        # the kernel reads norm weights and freqs with unit stride: strided vectors are copied per call
        self.copy_vectors = any(strided_vector(t) for t in (weight, weight2, freqs))
        rows_shape = list(x.shape[:-1])
        head_dim, half = x.shape[-1], dims // 2
        tail = head_dim - dims
        self.pos_view = pos_view
        view = pos_view(pos_raw) if pos_raw is not None else None
        pos_strides = list(view.stride()[1:]) if view is not None else [0] * len(rows_shape)
        p_sec = view.stride(0) if view is not None else 0

        gd = group_dim(rows_shape, pos_strides, seq_len > 0, list(x2.shape[:-1]) if x2 is not None else None)
        if gd == -1:
            raise ValueError("the two tensors differ in more than one row dim, or in one that positions depend on")
        lay = _Layouts(x, gd)
        lay2 = _Layouts(x2, gd) if x2 is not None else lay
        self.copy_x, self.copy_x2 = lay.copy, lay2.copy and x2 is not None

        sub_shape = _drop(rows_shape, gd)
        index = index_levels(sub_shape, _drop(pos_strides, gd))
        self.copy_pos = view is not None and index is None
        if self.copy_pos:
            full = contiguous_strides(view.shape)
            p_sec = full[0]
            index = index_levels(sub_shape, _drop(full[1:], gd))
        index = index or index_levels(sub_shape, [0] * len(sub_shape))

        n_rows = lay.x.n_rows
        n_groups = max(lay.n_groups, lay2.n_groups)
        block_h = next_pow2(half)
        block_t = next_pow2(tail) if tail > 0 else 1
        row_elems = 2 * block_h + (block_t if tail > 0 else 0)
        total = n_rows * (lay.n_groups + (lay2.n_groups if x2 is not None else 0)) * row_elems
        block_g, block_r, num_warps = launch_config(n_rows, n_groups, row_elems, total, device_info(x.device).sm_count)
        group_blocks = triton.cdiv(lay.n_groups, block_g)
        grid_g = group_blocks + (triton.cdiv(lay2.n_groups, block_g) if x2 is not None else 0)
        sec1, sec2, sec3 = _section_bounds(sections, interleaved)
        self.has_pos = view is not None
        self.freqs_given = freqs is not None
        self.table = None if freqs is not None else inv_freq_table(dims, base, x.device)
        self.n_rows = n_rows
        # the integer arguments in signature order, around the per-call pointers and scalars
        self.ints_one = (head_dim, half, lay.x.stride_inner, lay.x_gs, lay.y.stride_inner, lay.y_gs)
        self.ints_two = (group_blocks, lay2.n_groups, lay2.x.stride_inner, lay2.x_gs, lay2.y.stride_inner, lay2.y_gs)
        self.ints_rest = (lay.x.inner, lay.x.stride_outer, lay.y.inner, lay.y.stride_outer, lay2.x.inner,
                          lay2.x.stride_outer, lay2.y.inner, lay2.y.stride_outer, index.n1, index.n2, index.s0,
                          index.s1, index.s2, p_sec, max(seq_len, 1), sec1, sec2, sec3)
        self.n_groups = lay.n_groups
        levels = pos_levels(n_rows, index.n1, index.n2, index.s0, index.s1, index.s2)
        # the norm weights are read after the wait, at decode most often from DRAM: ask L2 for them before it
        w_bytes = head_dim * weight.element_size() if norm and weight is not None else 0
        if x2 is not None and weight2 is not None and weight2.dtype != getattr(weight, "dtype", None):
            w_bytes = 0
        self.launch = dependent_launch(
            _rope_kernel, (triton.cdiv(n_rows, block_r), grid_g),
            dict(BLOCK_R=block_r, BLOCK_G=block_g, BLOCK_H=block_h, BLOCK_T=block_t, X_TWO_LEVEL=lay.x.two_level,
                 Y_TWO_LEVEL=lay.y.two_level, X2_TWO_LEVEL=lay2.x.two_level, Y2_TWO_LEVEL=lay2.y.two_level,
                 PAIR=x2 is not None, HAS_POS_TENSOR=view is not None, ADD_ROW_INDEX=seq_len > 0,
                 TRADITIONAL=traditional, HAS_FREQS=freqs is not None, DO_NORM=norm, HAS_WEIGHT=weight is not None,
                 HAS_TAIL=tail > 0, N_SECTIONS=1 if sections is None else len(sections), INTERLEAVED=interleaved,
                 P_L0=levels[0], P_L1=levels[1], P_L2=levels[2], POLY_SINCOS=POLY_SINCOS, W_BYTES=w_bytes,
                 W_LINES=prefetch_lines(w_bytes, x.device)),
            x.device, True, num_warps=num_warps,
        )

    def __call__(self, x: torch.Tensor, pos_raw: Optional[torch.Tensor], offset: int, scale: float,
                 freqs: Optional[torch.Tensor] = None, weight: Optional[torch.Tensor] = None, eps: float = 1e-6,
                 weight_offset: float = 0.0, x2: Optional[torch.Tensor] = None,
                 weight2: Optional[torch.Tensor] = None):
        """Returns y (or ``(y, y2)`` for a pair)."""
        if self.copy_x:
            x = x.contiguous()
        pos = x
        if self.has_pos:
            pos = self.pos_view(pos_raw).contiguous() if self.copy_pos else pos_raw
        y = output_like(x, self.x_canonical)
        y2 = None
        if self.pair:
            if self.copy_x2:
                x2 = x2.contiguous()
            y2 = output_like(x2, self.x2_canonical)
        if self.copy_vectors:
            weight, weight2, freqs = (None if t is None else t.contiguous() for t in (weight, weight2, freqs))
        w = weight if weight is not None else x
        self.launch(x, y, freqs if self.freqs_given else self.table, pos, scale, offset, self.n_rows, eps, w,
                    *self.ints_one, weight_offset, self.n_groups, x2 if x2 is not None else x,
                    y2 if y2 is not None else y, *self.ints_two, weight2 if weight2 is not None else w,
                    *self.ints_rest)
        return y if y2 is None else (y, y2)
