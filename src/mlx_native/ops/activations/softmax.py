"""Triton kernels for row softmax with fp32 accumulation.

Three paths, chosen per plan:
  * rows up to ``MAX_TILE_COLS`` stay in registers (one read, one write);
  * few long rows (fewer rows than SMs): each row is split over several
    programs: a stats kernel writes per-chunk (max, sum of exp), an apply
    kernel combines them and writes its chunk (two launches, all SMs busy);
  * many long rows: one program per row, an online (max, sum) pass over
    column chunks, then a second pass that writes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...kernels.rows import row_offsets
from ...runtime.device import device_info
from ...runtime.memory import contiguous_rows, empty, plan_rows
from ..common import next_pow2, prev_pow2

MAX_TILE_COLS = 32768
CHUNK_COLS = 4096  # many long rows: column chunk of the two-pass loop
TILE_ELEMS = 2048
SPLIT_MIN_COLS = 4096  # few rows at least this long: split rows over programs
SPLIT_MIN_CHUNK = 1024
SPLIT_MAX_CHUNKS = 256


@triton.jit(do_not_specialize=["n_rows"])
def _softmax_kernel(
    x_ptr,  # [R, N] rows (layout x_*), unit column stride
    y_ptr,  # [R, N] contiguous output
    n_rows,
    n_cols,
    x_inner,
    x_so,
    x_si,
    X_TWO_LEVEL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SINGLE_TILE: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < n_rows
    x_row = row_offsets(rows, x_inner, x_so, x_si, X_TWO_LEVEL)
    y_row = rows.to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_TILE:
        mask = row_ok[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + x_row[:, None] + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        x = tl.where(row_ok[:, None], x, 0.0)  # padding rows stay finite
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e / tl.sum(e, axis=1)[:, None]
        tl.store(y_ptr + y_row[:, None] + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        m = tl.full([BLOCK_R], -float("inf"), dtype=tl.float32)
        s = tl.zeros([BLOCK_R], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            mask = row_ok[:, None] & (c < n_cols)[None, :]
            x = tl.load(x_ptr + x_row[:, None] + c[None, :], mask=mask, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            # rows that have seen only -inf keep m_new = -inf; avoid (-inf) - (-inf)
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe[:, None]), axis=1)
            m = m_new
        m_safe = tl.where(m == -float("inf"), 0.0, m)
        inv = 1.0 / s
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            mask = row_ok[:, None] & (c < n_cols)[None, :]
            x = tl.load(x_ptr + x_row[:, None] + c[None, :], mask=mask, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - m_safe[:, None]) * inv[:, None]
            tl.store(y_ptr + y_row[:, None] + c[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n_rows"])
def _softmax_stats_kernel(
    x_ptr,  # [R, N] rows (layout x_*)
    stats_ptr,  # [R, n_chunks, 2] fp32: (chunk max, chunk sum of exp(x - chunk max))
    n_rows,
    n_cols,
    n_chunks,
    x_inner,
    x_so,
    x_si,
    X_TWO_LEVEL: tl.constexpr,
    CHUNK: tl.constexpr,
):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    x_row = row_offsets(row, x_inner, x_so, x_si, X_TWO_LEVEL)
    c = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + x_row + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    s = tl.sum(tl.exp(x - m_safe), axis=0)
    base = (row * n_chunks + chunk) * 2
    tl.store(stats_ptr + base, m)
    tl.store(stats_ptr + base + 1, s)


@triton.jit(do_not_specialize=["n_rows"])
def _softmax_apply_kernel(
    x_ptr,  # [R, N] rows (layout x_*)
    stats_ptr,  # [R, n_chunks, 2] from _softmax_stats_kernel
    y_ptr,  # [R, N] contiguous output
    n_rows,
    n_cols,
    n_chunks,
    x_inner,
    x_so,
    x_si,
    X_TWO_LEVEL: tl.constexpr,
    CHUNK: tl.constexpr,
    BLOCK_CHUNKS: tl.constexpr,
):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    x_row = row_offsets(row, x_inner, x_so, x_si, X_TWO_LEVEL)
    c = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + x_row + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
    k = tl.arange(0, BLOCK_CHUNKS)
    k_ok = k < n_chunks
    ms = tl.load(stats_ptr + (row * n_chunks + k) * 2, mask=k_ok, other=-float("inf"))
    ss = tl.load(stats_ptr + (row * n_chunks + k) * 2 + 1, mask=k_ok, other=0.0)
    m = tl.max(ms, axis=0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    total = tl.sum(tl.where(ms == -float("inf"), 0.0, ss * tl.exp(ms - m_safe)), axis=0)
    y = tl.exp(x - m_safe) / total
    tl.store(y_ptr + row.to(tl.int64) * n_cols + c, y.to(y_ptr.dtype.element_ty), mask=c < n_cols)


class SoftmaxPlan:
    """The softmax kernels prepared for one signature of ``x [..., N]`` (softmax over N)."""

    def __init__(self, x: torch.Tensor):
        self.shape, self.dtype, self.device = x.shape, x.dtype, x.device
        n_cols = x.shape[-1]
        xl = plan_rows(x.shape, x.stride()) if x.stride(-1) == 1 or n_cols == 1 else None
        self.copy_x = xl is None
        xl = xl or contiguous_rows(x.shape)
        sm_count = device_info(x.device).sm_count
        self.split = n_cols >= SPLIT_MIN_COLS and 2 * xl.n_rows <= sm_count
        layout = (xl.inner, xl.stride_outer, xl.stride_inner)
        if self.split:
            chunk = next_pow2(triton.cdiv(n_cols * xl.n_rows, 2 * sm_count))
            chunk = max(chunk, SPLIT_MIN_CHUNK, next_pow2(triton.cdiv(n_cols, SPLIT_MAX_CHUNKS)))
            n_chunks = triton.cdiv(n_cols, chunk)
            self.stats_shape = (xl.n_rows, n_chunks, 2)
            self.ints = (xl.n_rows, n_cols, n_chunks, *layout)
            warps = min(8, max(1, chunk // 256))
            grid = (xl.n_rows, n_chunks)
            self.stats = Launch(_softmax_stats_kernel, grid, dict(X_TWO_LEVEL=xl.two_level, CHUNK=chunk),
                                num_warps=warps)
            self.apply = Launch(_softmax_apply_kernel, grid,
                                dict(X_TWO_LEVEL=xl.two_level, CHUNK=chunk, BLOCK_CHUNKS=next_pow2(n_chunks)),
                                num_warps=warps)
            return
        single = n_cols <= MAX_TILE_COLS
        block_n = next_pow2(n_cols) if single else CHUNK_COLS
        block_r = min(next_pow2(xl.n_rows), max(1, TILE_ELEMS // block_n))
        num_warps = prev_pow2(min(32, max(1, block_r * block_n // 512)))
        self.ints = (xl.n_rows, n_cols, *layout)
        self.launch = Launch(_softmax_kernel, (triton.cdiv(xl.n_rows, block_r),),
                             dict(X_TWO_LEVEL=xl.two_level, BLOCK_R=block_r, BLOCK_N=block_n, SINGLE_TILE=single),
                             num_warps=num_warps)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.copy_x:
            x = x.contiguous()
        y = empty(self.shape, dtype=self.dtype, device=self.device)
        if self.split:
            stats = torch.empty(self.stats_shape, dtype=torch.float32, device=self.device)
            n_rows, n_cols, n_chunks, *layout = self.ints
            self.stats(x, stats, n_rows, n_cols, n_chunks, *layout)
            self.apply(x, stats, y, n_rows, n_cols, n_chunks, *layout)
        else:
            self.launch(x, y, *self.ints)
        return y
