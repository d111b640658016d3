"""Triton kernel for row norms: rms_norm, add_rms_norm (residual fused), l2_norm.

One program normalizes ``BLOCK_R`` rows. Rows up to ``MAX_TILE_COLS`` columns
stay in registers (one read and one write of each element); longer rows take
two passes over column chunks (the second read mostly hits L2).
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.dependent import dependent_launch, enter, prefetch_lines, prefetch_vector_l2
from ...kernels.rows import row_offsets
from ...runtime.memory import contiguous_rows, is_canonical, output_like, plan_rows, strided_vector
from ..common import next_pow2

MAX_TILE_COLS = 16384  # longest row kept whole in registers
CHUNK_COLS = 4096  # column chunk of the two-pass path
TILE_ELEMS = 2048  # rows are batched until a program holds this many elements
ELEMS_PER_THREAD = 16  # sets num_warps: tile elements / (32 * this) ...
DECODE_ROWS = 16  # ... but problems of at most this many rows (decode) take at least DECODE_MIN_WARPS warps:
DECODE_MIN_WARPS = 8  # rms_norm 1x576 1.445 us with 2 warps, a minimal kernel 1.416 / 1.365 with 2 / 8 (session 7)
LEAN_ROWS = True  # int32 row offsets, no row mask where the layout allows (session 7: 10-60 ns less at decode)


@triton.jit(do_not_specialize=["n_rows"])
def _norm_kernel(
    # The parameters a one-program decode launch reads come first, so that they share one 64-byte line of the
    # constant bank (parameters start at 0x210; the first line holds 48 bytes): a kernel whose parameters
    # span more lines waits about 20 ns per extra line at decode sizes (session 20, runs 9-10).
    x_ptr,  # [R, N] input rows (layout x_*), unit column stride
    res_ptr,  # [R, N] residual rows (layout r_*; HAS_RESIDUAL)
    w_ptr,  # [N] weight, any float dtype (HAS_WEIGHT)
    y_ptr,  # [R, N] contiguous output
    h_ptr,  # [R, N] contiguous x + residual, rounded to its dtype (HAS_RESIDUAL)
    eps,
    w_offset,
    n_rows,
    x_inner,
    x_so,
    x_si,
    r_inner,
    r_so,
    r_si,
    N: tl.constexpr,  # row length
    INV_N: tl.constexpr,  # 1 / N (rms norm) or 1.0 (l2 norm): a multiply, not a division
    HAS_WEIGHT: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    X_TWO_LEVEL: tl.constexpr,
    R_TWO_LEVEL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SINGLE_TILE: tl.constexpr,  # BLOCK_N >= N
    EVEN_ROWS: tl.constexpr,  # n_rows % BLOCK_R == 0: no row mask
    NARROW: tl.constexpr,  # single-level layouts whose offsets fit int32: int32 row offsets
    ONE_PROGRAM: tl.constexpr,  # one program: rows from 0, so a one-row launch reads no row stride (no 2nd line)
    W_BYTES: tl.constexpr = 0,  # the weight's bytes ...
    W_LINES: tl.constexpr = 0,  # ... and its 128-byte lines asked of L2 before the wait (0: none)
    PDL: tl.constexpr = False,
):
    prefetch_vector_l2(w_ptr, W_BYTES, W_LINES)  # a hint, the only thing before the wait
    enter(PDL)  # a programmatic dependent launch: nothing else before this (kernels/dependent.py)
    if ONE_PROGRAM:
        rows = tl.arange(0, BLOCK_R)
    else:
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    if EVEN_ROWS:
        row_ok = tl.full([BLOCK_R], 1, tl.int1)
    else:
        row_ok = rows < n_rows
    if NARROW:  # fewer instructions before the first load (decode rows are latency-bound)
        x_row = rows * x_si
        out_row = rows * N
        r_row = rows * r_si
    else:
        x_row = row_offsets(rows, x_inner, x_so, x_si, X_TWO_LEVEL)
        out_row = rows.to(tl.int64) * N
        r_row = out_row
        if HAS_RESIDUAL:
            r_row = row_offsets(rows, r_inner, r_so, r_si, R_TWO_LEVEL)
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_TILE:
        col_ok = cols < N
        mask = row_ok[:, None] & col_ok[None, :]
        # every load is issued before the first use: one memory latency, not two
        x = tl.load(x_ptr + x_row[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            r = tl.load(res_ptr + r_row[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_WEIGHT:
            w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32) + w_offset
        if HAS_RESIDUAL:
            h = (x + r).to(h_ptr.dtype.element_ty)
            tl.store(h_ptr + out_row[:, None] + cols[None, :], h, mask=mask)
            x = h.to(tl.float32)
        ss = tl.sum(x * x, axis=1) * INV_N
        y = x * tl.rsqrt(ss + eps)[:, None]
        if HAS_WEIGHT:
            y = y * w[None, :]
        tl.store(y_ptr + out_row[:, None] + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_R, BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = row_ok[:, None] & (c < N)[None, :]
            x = tl.load(x_ptr + x_row[:, None] + c[None, :], mask=mask, other=0.0).to(tl.float32)
            if HAS_RESIDUAL:
                r = tl.load(res_ptr + r_row[:, None] + c[None, :], mask=mask, other=0.0).to(tl.float32)
                h = (x + r).to(h_ptr.dtype.element_ty)
                tl.store(h_ptr + out_row[:, None] + c[None, :], h, mask=mask)
                x = h.to(tl.float32)
            acc += x * x
        inv = tl.rsqrt(tl.sum(acc, axis=1) * INV_N + eps)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            col_ok = c < N
            mask = row_ok[:, None] & col_ok[None, :]
            if HAS_RESIDUAL:
                x = tl.load(h_ptr + out_row[:, None] + c[None, :], mask=mask, other=0.0).to(tl.float32)
            else:
                x = tl.load(x_ptr + x_row[:, None] + c[None, :], mask=mask, other=0.0).to(tl.float32)
            y = x * inv[:, None]
            if HAS_WEIGHT:
                w = tl.load(w_ptr + c, mask=col_ok, other=0.0).to(tl.float32) + w_offset
                y = y * w[None, :]
            tl.store(y_ptr + out_row[:, None] + c[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def config(n_rows: int, n_cols: int) -> tuple[int, int, bool, int]:
    """(BLOCK_R, BLOCK_N, SINGLE_TILE, num_warps) for a [n_rows, n_cols] problem."""
    single = n_cols <= MAX_TILE_COLS
    block_n = next_pow2(n_cols) if single else CHUNK_COLS
    block_r = min(next_pow2(n_rows), max(1, TILE_ELEMS // block_n))
    num_warps = min(16, max(1, block_r * block_n // (32 * ELEMS_PER_THREAD)))
    if n_rows <= DECODE_ROWS:
        num_warps = max(num_warps, DECODE_MIN_WARPS)
    return block_r, block_n, single, num_warps


class NormPlan:
    """The norm kernel prepared for one signature of (x, weight, residual).

    Call with the tensors and scalars of a matching call; returns ``(y, h)``
    (``h`` is None without a residual).
    """

    def __init__(self, x: torch.Tensor, weight: Optional[torch.Tensor], residual: Optional[torch.Tensor],
                 mean: bool):
        self.shape, self.dtype, self.device = tuple(x.shape), x.dtype, x.device
        self.x_canonical = is_canonical(x)  # outputs by torch.empty_like(x) (output_like)
        # the kernel reads the weight with unit stride: a strided weight vector is copied per call
        self.copy_w = strided_vector(weight)
        n_cols = x.shape[-1]
        xl = plan_rows(x.shape, x.stride())
        self.copy_x = xl is None
        xl = xl or contiguous_rows(x.shape)
        rl = xl
        self.copy_r = False
        if residual is not None:
            rl = plan_rows(residual.shape, residual.stride())
            self.copy_r = rl is None
            rl = rl or contiguous_rows(residual.shape)
        self.has_residual = residual is not None
        block_r, block_n, single, num_warps = config(xl.n_rows, n_cols)
        reach = (xl.n_rows + block_r) * max(xl.stride_inner, rl.stride_inner, n_cols)  # past the last row tile
        narrow = LEAN_ROWS and not (xl.two_level or rl.two_level) and reach < 2**31
        self.ints = (xl.n_rows, xl.inner, xl.stride_outer, xl.stride_inner, rl.inner, rl.stride_outer,
                     rl.stride_inner)
        grid = triton.cdiv(xl.n_rows, block_r)
        # one tile (decode rows): the weight is read after the wait, most often from DRAM; ask L2 for it before
        w_bytes = n_cols * weight.element_size() if weight is not None and single else 0
        self.launch = dependent_launch(
            _norm_kernel, (grid,),
            dict(N=n_cols, INV_N=1.0 / n_cols if mean else 1.0, HAS_WEIGHT=weight is not None,
                 HAS_RESIDUAL=residual is not None, X_TWO_LEVEL=xl.two_level, R_TWO_LEVEL=rl.two_level,
                 BLOCK_R=block_r, BLOCK_N=block_n, SINGLE_TILE=single,
                 EVEN_ROWS=LEAN_ROWS and xl.n_rows % block_r == 0, NARROW=narrow,
                 ONE_PROGRAM=grid == 1, W_BYTES=w_bytes, W_LINES=prefetch_lines(w_bytes, x.device)),
            x.device, True, num_warps=num_warps,
        )

    def __call__(self, x: torch.Tensor, weight: Optional[torch.Tensor], residual: Optional[torch.Tensor],
                 eps: float, weight_offset: float) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        if self.copy_x:
            x = x.contiguous()
        y = output_like(x, self.x_canonical)
        h = None
        if self.has_residual:
            if self.copy_r:
                residual = residual.contiguous()
            h = output_like(x, self.x_canonical)
        if self.copy_w:
            weight = weight.contiguous()
        self.launch(x, residual if residual is not None else x, weight if weight is not None else x, y,
                    h if h is not None else y, eps, weight_offset, *self.ints)
        return y, h
