"""Triton kernel for the elementwise ops: silu_mul, gelu_mul, sigmoid_mul, softcap.

Operands are ``[R, C]`` row views (each with its own row layout, so gate and
up may be the two halves of one fused projection); the output is contiguous.
Fully contiguous operands are processed as one flat row.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels import math as km
from ...kernels.dependent import dependent_launch, enter
from ...kernels.rows import row_offsets
from ...runtime.memory import contiguous_rows, is_canonical, output_like, plan_rows
from ...runtime.device import device_info
from ..common import next_pow2, prev_pow2

OP_SILU_MUL = 0
OP_GELU_TANH_MUL = 1
OP_GELU_ERF_MUL = 2
OP_SIGMOID_MUL = 3
OP_SOFTCAP = 4

TILE_ELEMS = 4096  # elements per program for large problems (16 per thread at 8 warps)
MIN_TILE_ELEMS = 1024  # small problems: tiles shrink to this so that more SMs take part
NUM_WARPS = 8
PROGRAMS_PER_SM = 2  # tiles shrink until there are this many programs per SM (or MIN_TILE_ELEMS)


@triton.jit(do_not_specialize=["n_rows"])
def _elementwise_kernel(
    a_ptr,  # [R, C] rows (layout a_*), unit column stride
    b_ptr,  # [R, C] second operand (HAS_B), layout b_*
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
    A_TWO_LEVEL: tl.constexpr,
    B_TWO_LEVEL: tl.constexpr,
    FLAT: tl.constexpr,  # one contiguous run of n_cols elements: no row arithmetic
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
    PDL: tl.constexpr = False,
):
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid = tl.program_id(0)
    if FLAT:
        cols = pid.to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
        rows = tl.zeros([BLOCK_R], dtype=tl.int32)
        mask = (cols < n_cols)[None, :]
        a_off = cols[None, :]
        b_off = a_off
    else:
        n_col_blocks = tl.cdiv(n_cols, BLOCK_C)
        rows = (pid // n_col_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = (pid % n_col_blocks).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        a_off = row_offsets(rows, a_inner, a_so, a_si, A_TWO_LEVEL)[:, None] + cols[None, :]
        b_off = row_offsets(rows, b_inner, b_so, b_si, B_TWO_LEVEL)[:, None] + cols[None, :]
    a = tl.load(a_ptr + a_off, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
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
    y_off = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    tl.store(y_ptr + y_off, y.to(y_ptr.dtype.element_ty), mask=mask)


class ElementwisePlan:
    """The elementwise kernel prepared for one signature of (a, b)."""

    def __init__(self, op: int, a: torch.Tensor, b: Optional[torch.Tensor]):
        self.shape, self.dtype, self.device = tuple(a.shape), a.dtype, a.device
        self.a_canonical = is_canonical(a)  # the output by torch.empty_like(a) (output_like)
        flat = a.is_contiguous() and (b is None or b.is_contiguous())
        if flat:  # one flat row of numel elements
            al = bl = contiguous_rows((1, a.numel()))
            n_cols = a.numel()
        else:
            n_cols = a.shape[-1]
            al = plan_rows(a.shape, a.stride())
            bl = plan_rows(b.shape, b.stride()) if b is not None else al
        self.copy_a, self.copy_b = al is None, bl is None
        al = al or contiguous_rows(a.shape)
        bl = bl or contiguous_rows(a.shape)
        wanted = PROGRAMS_PER_SM * device_info(a.device).sm_count
        tile = min(TILE_ELEMS, max(MIN_TILE_ELEMS, prev_pow2(max(1, al.n_rows * n_cols // wanted))))
        block_c = min(next_pow2(n_cols), tile)
        block_r = min(next_pow2(al.n_rows), max(1, tile // block_c))
        num_warps = min(NUM_WARPS, max(1, block_r * block_c // 128))
        self.has_b = b is not None
        self.ints = (al.n_rows, n_cols, al.inner, al.stride_outer, al.stride_inner, bl.inner, bl.stride_outer,
                     bl.stride_inner)
        self.launch = dependent_launch(
            _elementwise_kernel, (triton.cdiv(al.n_rows, block_r) * triton.cdiv(n_cols, block_c),),
            dict(OP=op, HAS_B=b is not None, A_TWO_LEVEL=al.two_level, B_TWO_LEVEL=bl.two_level,
                 FLAT=al.n_rows == 1,
                 BLOCK_R=block_r, BLOCK_C=block_c),
            a.device, True, num_warps=num_warps,
        )

    def __call__(self, a: torch.Tensor, b: Optional[torch.Tensor], cap: float = 1.0) -> torch.Tensor:
        if self.copy_a:
            a = a.contiguous()
        if self.copy_b:
            b = b.contiguous()
        y = output_like(a, self.a_canonical)
        self.launch(a, b if b is not None else a, y, *self.ints, cap)
        return y
