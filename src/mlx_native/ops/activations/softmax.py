"""Triton kernel for row softmax with fp32 accumulation.

Rows up to ``MAX_TILE_COLS`` stay in registers; longer rows take an online
(max, sum) pass over column chunks and a second pass that writes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...kernels.rows import row_offsets
from ...runtime.memory import contiguous_rows, empty, plan_rows
from ..common import next_pow2

MAX_TILE_COLS = 16384
CHUNK_COLS = 4096
TILE_ELEMS = 2048
ELEMS_PER_THREAD = 16


@triton.jit(do_not_specialize=["n_rows"])
def _softmax_kernel(
    x_ptr,  # [R, N] rows at (r // x_inner) * x_so + (r % x_inner) * x_si
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


class SoftmaxPlan:
    """The softmax kernel prepared for one signature of ``x [..., N]`` (softmax over N)."""

    def __init__(self, x: torch.Tensor):
        self.shape, self.dtype, self.device = x.shape, x.dtype, x.device
        n_cols = x.shape[-1]
        xl = plan_rows(x.shape, x.stride()) if x.stride(-1) == 1 or n_cols == 1 else None
        self.copy_x = xl is None
        xl = xl or contiguous_rows(x.shape)
        single = n_cols <= MAX_TILE_COLS
        block_n = next_pow2(n_cols) if single else CHUNK_COLS
        block_r = min(next_pow2(xl.n_rows), max(1, TILE_ELEMS // block_n))
        num_warps = min(16, max(1, block_r * block_n // (32 * ELEMS_PER_THREAD)))
        self.ints = (xl.n_rows, n_cols, xl.inner, xl.stride_outer, xl.stride_inner)
        self.launch = Launch(_softmax_kernel, (triton.cdiv(xl.n_rows, block_r),),
                             dict(X_TWO_LEVEL=xl.two_level, BLOCK_R=block_r, BLOCK_N=block_n, SINGLE_TILE=single),
                             num_warps=num_warps)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.copy_x:
            x = x.contiguous()
        y = empty(self.shape, dtype=self.dtype, device=self.device)
        self.launch(x, y, *self.ints)
        return y
