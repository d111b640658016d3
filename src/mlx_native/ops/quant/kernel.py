"""Plans of the MLX-affine ops: dequantize kernel, and the matmul launches of :mod:`.qmm`.

``quantize`` runs as torch ops (see api.py); everything else runs Triton kernels.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...kernels.dependent import dependent_launch, enter
from ...kernels.launch import Launch
from ...runtime.memory import empty
from ..common import next_pow2
from . import affine_idot, affine_idot_rows, affine_mv, affine_mv_odd, gemv, mmv, qmm
from .qmm import QmmLaunch, select_kind, RoutedLaunch, WeightSpec, choose_config
from .tiles import affine_tile


@triton.jit(do_not_specialize=["n_rows", "n_table"])
def _dequant_kernel(
    w_ptr,  # [n_table, C * BITS / 32] int32 words
    s_ptr,  # [n_table, C / GS] scales
    b_ptr,  # [n_table, C / GS] biases
    ids_ptr,  # [n_rows] table rows to dequantize (HAS_IDS: embedding lookup; else row r is table row r)
    out_ptr,  # [n_rows, C] contiguous
    n_rows, n_table, n_cols, stride_wr, stride_sr,
    BITS: tl.constexpr, GS: tl.constexpr, HAS_IDS: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
    PDL: tl.constexpr = 0,
):
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    c0 = tl.program_id(1) * BC
    row_ok = rows < n_rows
    src = rows
    if HAS_IDS:
        src = tl.load(ids_ptr + rows, mask=row_ok, other=0).to(tl.int64)
        bad = (src < 0) | (src >= n_table)  # out-of-range ids give NaN rows (checking would sync the host)
        src = tl.where(bad, 0, src)
    v = affine_tile(w_ptr, s_ptr, b_ptr, src, row_ok, c0, n_cols, stride_wr, stride_sr, BITS, GS, BC)
    if HAS_IDS:
        v = tl.where(bad[:, None], float("nan"), v)
    cols = c0 + tl.arange(0, BC)
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * n_cols + cols[None, :], v.to(out_ptr.dtype.element_ty), mask=mask)


def dequant_launch(rows: int, width: int, group_size: int, bits: int, has_ids: bool, device=None) -> Launch:
    """:func:`_dequant_kernel` over ``rows x width`` outputs: tiles of up to 1024 columns, 4096 values
    (``has_ids``: an embedding lookup, a programmatic dependent on ``device``: a decode step's first launch)."""
    bc = max(group_size, min(1024, next_pow2(width)))
    br = max(1, min(next_pow2(rows), 4096 // bc))
    return dependent_launch(_dequant_kernel, (triton.cdiv(rows, br), triton.cdiv(width, bc)),
                            dict(BITS=bits, GS=group_size, HAS_IDS=has_ids, BR=br, BC=bc), device, True,
                            dependent=has_ids, num_warps=4)


def rows_dequantizer(width: int, group_size: int, bits: int):
    """``dequant(args, r0, r1, ws)``: rows ``r0:r1`` of the MLX affine weights ``args = (w, scales, biases)``
    (``w`` int32 words; leading dims flattened into rows, e.g. an expert stack) dequantized into the first ``r1 - r0``
    rows of ``ws [*, width]``; one launch per row count, kept (``qmm.ChunkedPrefill``, ``moe/grouped.py``)."""
    launches = {}

    def dequant(args, r0, r1, ws):
        w_, s_, b_ = (u.reshape(-1, u.shape[-1]) for u in args)
        rows = r1 - r0
        if rows not in launches:
            launches[rows] = dequant_launch(rows, width, group_size, bits, False)
        launches[rows](w_[r0:r1], s_[r0:r1], b_[r0:r1], w_, ws, rows, rows, width, w_.stride(0), s_.stride(0))

    return dequant


def _words(w: torch.Tensor) -> torch.Tensor:
    return w.view(torch.int32) if w.dtype == torch.uint32 else w


def _rows2d(t: torch.Tensor) -> torch.Tensor:
    """``t [..., C]`` as ``[R, C]`` with a unit last stride (a view when possible)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 or t2.shape[-1] == 1 else t2.contiguous()


def _scale_rows(scales: torch.Tensor, biases: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scales, biases)`` as contiguous ``[R, G]`` rows (the dequantize kernel reads both with one row stride,
    ``G``; a copy only for views)."""
    return _rows2d(scales).contiguous(), _rows2d(biases).contiguous()


class DequantPlan:
    def __init__(self, w, scales, biases, group_size, bits, width):
        self.group_size, self.bits = group_size, bits
        self.out_shape = (*w.shape[:-1], width)
        self.numel = math.prod(self.out_shape)
        if self.numel == 0:
            return
        rows = math.prod(w.shape[:-1])
        w2 = _rows2d(w)
        self.dtype, self.rows, self.width = scales.dtype, rows, width
        self.ints = (rows, rows, width, w2.stride(0), scales.shape[-1])
        self.launch = dequant_launch(rows, width, group_size, bits, False)

    def __call__(self, w, scales, biases):
        out = empty(self.out_shape, dtype=self.dtype, device=w.device)
        w2 = _words(_rows2d(w))
        self.launch(w2, *_scale_rows(scales, biases), w2, out, *self.ints)
        return out


class EmbeddingPlan:
    """``quantized_embedding``: the rows ``ids`` of a packed ``[vocab, K]`` table, dequantized in one launch."""

    def __init__(self, ids, w, scales, group_size, bits, width, dtype):
        self.dtype = dtype
        self.out_shape = (*ids.shape, width)
        self.numel = math.prod(self.out_shape)
        if self.numel == 0:
            return
        self.ints = (ids.numel(), w.shape[0], width, w.stride(0), scales.shape[-1])
        self.launch = dequant_launch(ids.numel(), width, group_size, bits, True, w.device)

    def __call__(self, ids, w, scales, biases):
        out = empty(self.out_shape, dtype=self.dtype, device=w.device)
        self.launch(_words(w), *_scale_rows(scales, biases), ids.reshape(-1).contiguous(), out, *self.ints)
        return out


class QmmPlan:
    """quantized_matmul: 4-bit weights and one row of x the streamed mat-vecs (``affine_idot.py`` for a
    bf16/fp16 result and rows of whole integer-dot steps, else ``affine_mv.py``), 2 to
    ``affine_idot_rows.IDOT_ROWS_MAX`` rows that the integer-dot kernel would take its multi-row variant
    (``affine_idot_rows.py``; x rows may be strided); one row of 3/5/6-bit weights ``affine_mv_odd.py``; other
    one-row calls the word-level mat-vec, other calls
    of 2-16 rows the tensor-core decode kernel (``mmv.py``, where it measured faster; 4-bit 16-bit-x calls of 17-128
    rows too, ``mmv.MID_ROWS_MAX``), other calls of 17 rows or more chunked dequantize + cuBLAS
    (``qmm.PREFILL_CUBLAS_MIN_M``) or, with ``transpose=False``, the tiled kernel."""

    def __init__(self, x, w, scales, biases, transpose, group_size, bits, n, k, out_dtype):
        self.out_dtype = out_dtype
        self.out_shape = (*x.shape[:-1], n)
        self.empty = math.prod(self.out_shape) == 0
        if self.empty:
            return
        m = math.prod(x.shape[:-1])
        self.m, self.k = m, k
        kind = select_kind(m, out_dtype == torch.float32)
        spec = WeightSpec(0, 0, bits, group_size, transpose)
        cfg = choose_config(kind, m, n, k, spec, x.device)
        x2 = _rows2d(x)
        w_rs, s_rs = w.shape[-1], scales.shape[-1]  # row strides of the contiguous w / scales the calls pass
        strides = (x2.stride(0), 1, 0, w_rs, 0, s_rs, 1)
        self.kind, self.cfg = kind, cfg
        self.chunked = None
        tensor_core = (kind in ("gemv", "decode") or mmv.mid_rows(m)) and mmv.supports(
            bits, group_size, transpose, x.dtype, out_dtype, m) and mmv.prefer(m, n, k) and w.numel() < 2**31 \
            and qmm.CONFIG_OVERRIDE is None
        if kind == "prefill" and transpose and m >= qmm.PREFILL_CUBLAS_MIN_M and not tensor_core \
                and qmm.CONFIG_OVERRIDE is None:
            compute = out_dtype if out_dtype == torch.float32 else x.dtype
            self.chunked = qmm.ChunkedPrefill(m, n, k, compute, out_dtype, x.device,
                                              rows_dequantizer(k, group_size, bits))
            self.kind = "prefill (chunked dequantize + cuBLAS)"
            return
        if affine_idot.supports(bits, group_size, transpose, x.dtype, out_dtype, m, k, w.numel()) \
                and qmm.CONFIG_OVERRIDE is None:
            self.launch = affine_idot.AffineIdotLaunch(n, k, group_size, out_dtype, x.device)
            self.kind = "affine_idot"
            return
        if affine_idot_rows.supports_rows(bits, group_size, transpose, x.dtype, out_dtype, m, k, w.numel()) \
                and (m - 1) * x2.stride(0) + k < 2**31 and qmm.CONFIG_OVERRIDE is None \
                and not (tensor_core and mmv.over_idot_rows(m, n, k)):
            self.launch = affine_idot_rows.AffineIdotRowsLaunch(m, n, k, group_size, out_dtype, x2.stride(0),
                                                                x.device)
            self.kind = "affine_idot_rows"
            return
        if affine_mv.supports(bits, group_size, transpose, x.dtype, m, k, w.numel()) and qmm.CONFIG_OVERRIDE is None:
            self.launch = affine_mv.AffineMvLaunch(n, k, group_size, out_dtype, x.device)
            self.kind = "affine_mv"
            return
        if affine_mv_odd.supports(bits, group_size, transpose, x.dtype, m, k, w.numel()) \
                and qmm.CONFIG_OVERRIDE is None:
            self.launch = affine_mv_odd.AffineOddMvLaunch(n, k, group_size, bits, out_dtype, x.device)
            self.kind = "affine_mv_odd"
            return
        if tensor_core:
            self.launch = mmv.MmvLaunch(m, n, k, group_size, x.dtype, out_dtype,
                                        (x2.stride(0), w_rs, s_rs), x.device,
                                        scale_dtype=scales.dtype)
            self.kind = "mmv"
            return
        if kind == "gemv" and gemv.supports(0, 0, bits, transpose) and w.numel() < 2**31 and qmm.CONFIG_OVERRIDE is None:
            self.launch = gemv.WithFallback(
                gemv.GemvLaunch(0, 0, bits, group_size, n, k, m, False, False, False, 0, out_dtype, strides, x.device),
                lambda: QmmLaunch(spec, cfg, n, k, m, m, False, False, False, False, 0, out_dtype,
                                  out_dtype == torch.float32, strides, x.device), "quantized_matmul")
            self.kind = "gemv*"
            return
        self.launch = QmmLaunch(spec, cfg, n, k, m, triton.cdiv(m, cfg.bm), False, False, False, False, 0, out_dtype,
                                out_dtype == torch.float32, strides, x.device)

    def __call__(self, x, w, scales, biases):
        if self.chunked is not None:
            args = (_words(w.contiguous()), scales.contiguous(), biases.contiguous())
            return self.chunked(_rows2d(x), args).view(self.out_shape)
        out = self.launch(_rows2d(x), _words(w.contiguous()), scales.contiguous(), biases.contiguous(), None, None,
                          None)
        return out.view(self.out_shape)


class GatherQmmPlan:
    """gather_qmm: output row ``b * M + m`` = x row ``lhs[b] * M + m`` times matrix ``rhs[b]``. Past the decode rows
    (``grouped.MIN_ROWS``) with bf16 / fp16 x and ``transpose``: the expert-grouped tensor-core kernels of
    ``moe/grouped.py`` (4-bit with scales in x's dtype: in registers; other formats: dequantized chunks); else
    ``qmm.RoutedLaunch``."""

    def __init__(self, x, w, scales, biases, batch, transpose, group_size, bits, n, k, out_dtype):
        from ..moe import grouped

        self.out_dtype = out_dtype
        m = x.shape[-2]
        self.out_shape = (*batch, m, n)
        self.empty = math.prod(self.out_shape) == 0
        if self.empty:
            return
        self.m, self.k = m, k
        n_mats = math.prod(w.shape[:-2])
        rows = math.prod(batch) * m
        self.n_mats = n_mats
        self.arange_m = torch.arange(m, device=x.device, dtype=torch.int64) if m > 1 else None
        self.kind = "routed"
        strides = (k, *qmm.stack_strides(w, scales))  # x rows, expert stacks as the calls pass them
        if transpose and out_dtype == x.dtype and qmm.CONFIG_OVERRIDE is None:
            launch = grouped.grouped_launch(gemv.AFFINE.value, n, k, rows, n_mats, 1, x.dtype, strides, x.device,
                                            rows_dequantizer(k, group_size, bits), has_xrow=True, bits=bits,
                                            group_size=group_size, scale_dtype=scales.dtype)
            if launch is not None:
                self.launch, self.kind = launch, "grouped"
                return
        spec = WeightSpec(0, 0, bits, group_size, transpose)
        self.launch = RoutedLaunch(spec, n, k, rows, n_mats, 1, True, False, 0, out_dtype, out_dtype == torch.float32,
                                   strides, x.device)

    def __call__(self, x, w, scales, biases, lhs, rhs):
        m, k = self.m, self.k
        x2 = x.reshape(-1, k).contiguous()
        lhs, rhs = lhs.reshape(-1), rhs.reshape(-1)
        if m == 1:
            xrow, erow = lhs, rhs
        else:
            xrow = (lhs.to(torch.int64)[:, None] * m + self.arange_m[None, :]).reshape(-1)
            erow = rhs.repeat_interleave(m)
        w3 = _words(w.reshape(self.n_mats, *w.shape[-2:]).contiguous())
        s3 = scales.reshape(self.n_mats, *scales.shape[-2:]).contiguous()
        b3 = biases.reshape(self.n_mats, *biases.shape[-2:]).contiguous()
        if self.kind == "grouped":
            out = self.launch(x2, erow, (w3, s3, b3), xrow=xrow)
        else:
            out = self.launch(x2, erow, w3, s3, b3, xrow=xrow)
        return out.view(self.out_shape)
