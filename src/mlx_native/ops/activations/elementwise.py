"""Triton kernel for the elementwise ops: silu_mul, gelu_mul, sigmoid_mul, softcap.

Operands are ``[R, C]`` row views (each with its own row strides, so gate and
up may be the two halves of one fused projection); the output is contiguous.
Fully contiguous operands are processed as one flat row.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels import math as km
from ...runtime.memory import empty_like, row_layout
from ..common import next_pow2

OP_SILU_MUL = 0
OP_GELU_TANH_MUL = 1
OP_GELU_ERF_MUL = 2
OP_SIGMOID_MUL = 3
OP_SOFTCAP = 4

TILE_ELEMS = 4096
ELEMS_PER_THREAD = 16


@triton.jit(do_not_specialize=["n_rows"])
def _elementwise_kernel(
    a_ptr,  # [R, C] rows at (r // a_inner) * a_so + (r % a_inner) * a_si
    b_ptr,  # [R, C] second operand (HAS_B), addressed with b_*
    y_ptr,  # [R, C] contiguous output
    n_rows,
    n_cols,
    a_inner,
    a_so,
    a_si,
    b_inner,
    b_so,
    b_si,
    cap,  # softcap value
    OP: tl.constexpr,
    HAS_B: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_C)
    rows = (pid // n_col_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = (pid % n_col_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    a_off = ((rows // a_inner) * a_so + (rows % a_inner) * a_si)[:, None] + cols[None, :]
    a = tl.load(a_ptr + a_off, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        b_off = ((rows // b_inner) * b_so + (rows % b_inner) * b_si)[:, None] + cols[None, :]
        b = tl.load(b_ptr + b_off, mask=mask, other=0.0).to(tl.float32)
    if OP == 0:
        y = a * km.sigmoid(a) * b
    elif OP == 1:
        y = km.gelu_tanh(a) * b
    elif OP == 2:
        y = km.gelu_erf(a) * b
    elif OP == 3:
        y = a * km.sigmoid(b)
    else:
        y = cap * km.tanh(a / cap)
    y_off = rows[:, None] * n_cols + cols[None, :]
    tl.store(y_ptr + y_off, y.to(y_ptr.dtype.element_ty), mask=mask)


def elementwise(op: int, a: torch.Tensor, b: Optional[torch.Tensor] = None, cap: float = 1.0) -> torch.Tensor:
    """Launch ``op`` on validated, non-empty ``a`` (and ``b`` of a's shape); returns a's shape."""
    out_shape = a.shape
    if a.is_contiguous() and (b is None or b.is_contiguous()):
        a, b = a.reshape(1, -1), (b.reshape(1, -1) if b is not None else None)
    elif a.dim() == 1:
        a, b = a.reshape(1, -1), (b.reshape(1, -1) if b is not None else None)
    n_cols = a.shape[-1]
    a, al = row_layout(a)
    bl = al
    if b is not None:
        b, bl = row_layout(b)
    y = empty_like(a)
    block_c = min(next_pow2(n_cols), TILE_ELEMS)
    block_r = min(next_pow2(al.n_rows), max(1, TILE_ELEMS // block_c))
    num_warps = min(16, max(1, block_r * block_c // (32 * ELEMS_PER_THREAD)))
    grid = (triton.cdiv(al.n_rows, block_r) * triton.cdiv(n_cols, block_c),)
    _elementwise_kernel[grid](
        a, b if b is not None else a, y,
        al.n_rows, n_cols,
        al.inner, al.stride_outer, al.stride_inner,
        bl.inner, bl.stride_outer, bl.stride_inner,
        float(cap),
        OP=op, HAS_B=b is not None, BLOCK_R=block_r, BLOCK_C=block_c,
        num_warps=num_warps,
    )
    return y.view(out_shape)
