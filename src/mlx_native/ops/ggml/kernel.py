"""Plans of the GGUF ops: dequantize / embedding kernel, and the matmul launches of ``quant.qmm``."""

from __future__ import annotations

import functools
import math
from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.dependent import dependent_launch, enter
from ...kernels.launch import Launch
from ...runtime.device import device_info
from ...runtime.memory import empty
from ..common import next_pow2
from ..quant import gemv, mmv, qmm
from ..quant.qmm import QmmLaunch, select_kind, WeightSpec, choose_config
from . import block_mmv, formats, q4_idot, q4_mv, q4k_idot, q4k_idot_rows, q4k_mv, q6k_idot, q6k_mv, q8_mv
from .tiles import STRUCTURED, ggml_elem, ggml_tile, planes_of, tile_unit

_FLOAT_DTYPES = {formats.F32.id: torch.float32, formats.F16.id: torch.float16, formats.BF16.id: torch.bfloat16}


@triton.jit(do_not_specialize=["n_rows", "n_table"])
def _dequant_kernel(
    raw_ptr,  # [n_table * row_bytes] uint8 blocks
    ids_ptr,  # [n_rows] row ids (HAS_IDS: embedding lookup)
    out_ptr,  # [n_rows, K] contiguous
    n_rows, n_table, row_bytes, K,
    FMT: tl.constexpr, HAS_IDS: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, PDL: tl.constexpr = 0,
):
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    row_ok = rows < n_rows
    src = rows.to(tl.int64)
    if HAS_IDS:
        src = tl.load(ids_ptr + rows, mask=row_ok, other=0).to(tl.int64)
        bad = (src < 0) | (src >= n_table)
        src = tl.where(bad, 0, src)
    mask = row_ok[:, None] & (cols < K)[None, :]
    v = ggml_elem(raw_ptr, (src * row_bytes)[:, None], cols[None, :], mask, FMT)
    if HAS_IDS:
        v = tl.where(bad[:, None], float("nan"), v)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * K + cols[None, :], v.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n_rows"])
def _dequant_tile_kernel(
    raw_ptr,  # [n_rows * row_bytes] uint8 blocks of a structured type (tiles.STRUCTURED)
    out_ptr,  # [n_rows, K] contiguous
    n_rows, row_bytes, K,
    FMT: tl.constexpr, NPLANES: tl.constexpr, RUN: tl.constexpr, BR: tl.constexpr, BK: tl.constexpr,
):
    """Whole blocks per program (contiguous code bytes, one scale load per block)."""
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    k0 = tl.program_id(1) * BK
    row_ok = rows < n_rows
    p0, p1 = ggml_tile(raw_ptr, rows.to(tl.int64) * row_bytes, row_ok, k0, K, FMT, BK)
    BKP: tl.constexpr = BK // NPLANES
    cp = tl.arange(0, BKP)
    if NPLANES == 1:
        kx = k0 + cp
    else:
        kx = k0 + (cp // RUN) * (2 * RUN) + cp % RUN
    base = out_ptr + rows.to(tl.int64)[:, None] * K
    mask = row_ok[:, None] & (kx < K)[None, :]
    tl.store(base + kx[None, :], p0.to(out_ptr.dtype.element_ty), mask=mask)
    if NPLANES == 2:
        tl.store(base + (kx + RUN)[None, :], p1.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & ((kx + RUN) < K)[None, :])


def streamed_launch(type_id: int, x_dtype: torch.dtype, m: int, n: int, k: int, x_row_stride: int,
                    device, pairs: bool = False) -> Optional[functools.partial]:
    """The streamed mat-vec that ``ggml_matmul`` of ``m`` rows of x (row stride ``x_row_stride``) against an
    ``(n, k)`` matrix of this type runs, as a builder of its launch plan (a ``partial`` of the plan's class: its
    ``func`` names the kernel), or None. One row: ``q4k_mv`` (Q4_K / Q5_K rows that take no integer-dot step),
    ``q4k_idot`` (Q4_K, Q5_K), ``q4_idot`` (Q4_0 / Q4_1 matrices large enough; ``q4_mv`` for rows that take no
    integer-dot step); 1-4 rows: ``q6k_idot`` (Q6_K matrices large enough, of whole 2048-value steps); 2 rows:
    ``q4k_idot_rows`` (Q4_K, ``IDOT_ROWS_MAX``; not the matrices that ``mmv.over_idot_rows`` sends to the
    tensor-core kernel), Q5_K 2-4 rows (``Q5K_ROWS_MAX``); 1-4 rows: ``q8_mv`` (Q8_0), ``q6k_mv`` (Q6_K) and
    ``q4k_mv`` (Q5_K rows the integer-dot kernels do not take) with ``MR`` rows; 2-4 rows: ``q4_mv`` with ``MR`` rows
    (Q4_0 / Q4_1; not the rows that ``mmv.wide_rows`` sends to the tensor-core kernel: 3-4 rows of large matrices).
    ``pairs``: the rows are stacked gate/up pairs, which the integer-dot kernels take only in rows of whole steps."""
    if qmm.CONFIG_OVERRIDE is not None or type_id not in formats.BY_ID:
        return None
    raw_bytes = n * formats.row_bytes(formats.BY_ID[type_id], k)
    sms = device_info(device).sm_count
    if m > 1 and (m - 1) * x_row_stride + k >= 2**31:  # the multi-row kernels' x offsets are int32
        return None
    if q4k_idot_rows.supports_rows(type_id, x_dtype, x_dtype, m, k, raw_bytes) and not (
            mmv.supports_gguf(type_id, x_dtype, m, k, raw_bytes) and mmv.prefer(m, n, k, type_id)
            and mmv.over_idot_rows(m, n, k, type_id)):  # (mmv takes no Q5_K)
        rows = q4k_idot_rows.Q5kIdotRowsLaunch if type_id == q4k_mv.Q5K_ID else q4k_idot_rows.Q4kIdotRowsLaunch
        return functools.partial(rows, m, n, k, x_dtype, x_row_stride, device)
    if q4k_mv.supports(type_id, x_dtype, m, k, raw_bytes):  # one row; Q5_K 1-4
        if q4k_idot.supports(type_id, x_dtype, x_dtype, m, k, raw_bytes, pairs):
            idot = q4k_idot.Q5kIdotLaunch if type_id == q4k_mv.Q5K_ID else q4k_idot.Q4kIdotLaunch
            return functools.partial(idot, n, k, x_dtype, device)
        if type_id == q4k_mv.Q5K_ID:
            return functools.partial(q4k_mv.Q5kMvLaunch, n, k, x_dtype, device, m=m, x_row_stride=x_row_stride)
        return functools.partial(q4k_mv.Q4kMvLaunch, n, k, x_dtype, device)
    if q6k_idot.supports(type_id, x_dtype, x_dtype, m, n, k, raw_bytes, x_row_stride):
        return functools.partial(q6k_idot.Q6kIdotLaunch, n, k, x_dtype, device, m=m, x_row_stride=x_row_stride)
    if q8_mv.supports(type_id, x_dtype, m, n, k, raw_bytes, sms, x_row_stride):
        return functools.partial(q8_mv.Q8MvLaunch, n, k, x_dtype, device, m=m, x_row_stride=x_row_stride)
    if q6k_mv.supports(type_id, x_dtype, m, n, k, raw_bytes, sms, x_row_stride):
        return functools.partial(q6k_mv.Q6kMvLaunch, n, k, x_dtype, device, m=m, x_row_stride=x_row_stride)
    if q4_mv.supports(type_id, x_dtype, m, n, k, raw_bytes, sms) and not (
            mmv.supports_gguf(type_id, x_dtype, m, k, raw_bytes) and mmv.wide_rows(m, n, k)):
        if m == 1 and q4_idot.supports(type_id, x_dtype, x_dtype, m, n, k, raw_bytes, sms, pairs):
            return functools.partial(q4_idot.Q4IdotLaunch, type_id, n, k, x_dtype, device)
        return functools.partial(q4_mv.Q4MvLaunch, type_id, n, k, x_dtype, device, m=m, x_row_stride=x_row_stride)
    return None


def streamed_plan_class(type_id: int, x_dtype: torch.dtype, m: int, n: int, k: int, device,
                        pairs: bool = False) -> Optional[type]:
    """The launch-plan class of the streamed mat-vec that ``ggml_matmul`` of ``m`` contiguous rows of x against an
    ``(n, k)`` matrix of this type runs (:func:`streamed_launch`), or None."""
    build = streamed_launch(type_id, x_dtype, m, n, k, k, device, pairs)
    return None if build is None else build.func


def takes_streamed(type_id: int, x_dtype: torch.dtype, m: int, n: int, k: int, device) -> bool:
    """Whether ``ggml_matmul`` of ``m`` contiguous rows of x against an ``(n, k)`` matrix of this type runs a
    streamed mat-vec (:func:`streamed_launch`)."""
    return streamed_plan_class(type_id, x_dtype, m, n, k, device) is not None


# Rows of x that run as slices of SLICE_ROWS rows on the streamed mat-vecs (one launch a slice) instead of the tiled
# decode kernel, by type, up to this many rows. H200, session 39 run 7 (us, tiled -> slices; 4096 x 14336 / 14336 x
# 4096 / 4096 x 4096): Q6_K 5 rows 105.3 / 88.8 / 32.1 -> 73.5 / 89.4 / 25.1, 8 rows 105.7 / 89.1 / 32.1 -> 75.0 /
# 83.7 / 32.9 (12 rows 107 -> 109, dequantize + cuBLAS 97); Q8_0 5 rows 70.8 / 65.3 / 24.5 -> 66.9 / 58.2 / 22.1
# (8 rows 70.9 -> 88.8); Q5_K 5 rows 98.6 / 88.4 / 31.4 -> 72.0 / 87.5 / 30.8 (8 rows 88.7 -> 130.8 on 14336 x 4096).
SLICED_ROWS = {q6k_mv.Q6K_ID: 8, q8_mv.Q8_ID: 5, q4k_mv.Q5K_ID: 5}
SLICE_ROWS = 4


def row_slices(type_id: int, m: int) -> tuple[int, ...]:
    """The slices (rows each, in order) that ``m`` rows of x against a matrix of this type run as (:data:`SLICED_ROWS`;
    ``()``: not sliced)."""
    if not SLICE_ROWS < m <= SLICED_ROWS.get(type_id, 0):
        return ()
    return (SLICE_ROWS,) * (m // SLICE_ROWS) + ((m % SLICE_ROWS,) if m % SLICE_ROWS else ())


def aligned(raw: torch.Tensor) -> torch.Tensor:
    """Raw bytes at a 16-byte aligned address (a copy only for odd slices of a buffer)."""
    return raw if raw.data_ptr() % 16 == 0 else raw.clone()


def _dequant_launch(t, n_rows: int, n_table: int, k: int, has_ids: bool, device=None) -> tuple[Launch, tuple]:
    """The dequantize launch of ``n_rows`` rows (``has_ids``: an embedding lookup, a programmatic dependent on
    ``device``: a decode step's first launch) and its ints."""
    if not has_ids and t.id in STRUCTURED:
        planes, run = planes_of(t.id)
        bk = max(tile_unit(t.id), min(256, next_pow2(k)))
        br = max(1, min(next_pow2(n_rows), 4096 // bk))
        launch = Launch(_dequant_tile_kernel, (triton.cdiv(n_rows, br), triton.cdiv(k, bk)),
                        dict(FMT=t.id, NPLANES=planes, RUN=max(run, 1), BR=br, BK=bk), num_warps=4)
        return launch, (n_rows, formats.row_bytes(t, k), k)
    bc = min(1024, next_pow2(k))
    br = max(1, min(next_pow2(n_rows), 4096 // bc))
    launch = dependent_launch(_dequant_kernel, (triton.cdiv(n_rows, br), triton.cdiv(k, bc)),
                              dict(FMT=t.id, HAS_IDS=has_ids, BR=br, BC=bc), device, True, dependent=has_ids,
                              num_warps=4)
    return launch, (n_rows, n_table, formats.row_bytes(t, k), k)


class DequantPlan:
    def __init__(self, raw, t, shape, dtype):
        self.t, self.shape, self.dtype = t, tuple(shape), dtype
        self.numel = math.prod(self.shape)
        if self.numel == 0:
            return
        k = self.shape[-1]
        rows = self.numel // k
        self.launch, self.ints = _dequant_launch(t, rows, rows, k, False)

    def __call__(self, raw):
        out = empty(self.shape, dtype=self.dtype, device=raw.device)
        run_dequant(self.launch, self.ints, aligned(raw.reshape(-1)), out)
        return out


class EmbeddingPlan:
    def __init__(self, ids, raw, t, shape, dtype):
        self.t, self.shape, self.dtype = t, tuple(shape), dtype
        self.out_shape = (*ids.shape, shape[1])
        self.numel = math.prod(self.out_shape)
        if self.numel == 0:
            return
        self.launch, self.ints = _dequant_launch(t, ids.numel(), shape[0], shape[1], True, raw.device)

    def __call__(self, ids, raw):
        out = empty(self.out_shape, dtype=self.dtype, device=raw.device)
        self.launch(aligned(raw.reshape(-1)), ids.reshape(-1).contiguous(), out, *self.ints)
        return out


def run_dequant(launch: Launch, ints: tuple, raw: torch.Tensor, out: torch.Tensor) -> None:
    """Run a launch of :func:`_dequant_launch` (the two kernels take different arguments)."""
    if launch.kernel is _dequant_tile_kernel:
        launch(raw, out, *ints)
    else:
        launch(raw, raw, out, *ints)


def rows_dequantizer(t, width: int):
    """``dequant(args, r0, r1, ws)``: rows ``r0:r1`` of the GGUF blocks ``args = (raw,)`` (rows of ``width`` values of
    type ``t``; an expert stack's rows one after the other) dequantized into the first ``r1 - r0`` rows of ``ws [*,
    width]``; one launch per row count, kept (``qmm.ChunkedPrefill``, ``moe/grouped.py``)."""
    rb = formats.row_bytes(t, width)
    launches = {}

    def dequant(args, r0, r1, ws):
        (raw,) = args
        rows = r1 - r0
        if rows not in launches:
            launches[rows] = _dequant_launch(t, rows, rows, width, False)
        launch, ints = launches[rows]
        run_dequant(launch, ints, raw[r0 * rb:r1 * rb], ws)

    return dequant


def weight_spec(t) -> WeightSpec:
    return WeightSpec(1, t.id, unit=tile_unit(t.id))


class MatmulPlan:
    """ggml_matmul: float types with x's dtype go to torch.matmul on a view of the bytes (no copy); the tensor-core
    decode kernel of GGUF Q6_K / Q8_0 / Q5_K (``block_mmv``) their calls of 4-64 (Q6_K), 3-64 (Q5_K) or 5-64 (Q8_0
    rows of whole 128-value steps) bf16/fp16 rows of x; one bf16/fp16 row of x against Q4_K, Q5_K, Q6_K, Q8_0 (and
    Q4_0 / Q4_1 matrices large enough), 2 rows against Q4_K / Q5_K and 2-4 against Q4_0 / Q4_1 / Q6_K / Q8_0, the
    streamed mat-vecs (:func:`streamed_launch`); the tensor-core decode kernel of 4-bit weights (``quant/mmv.py``)
    other Q4_K calls with 2-128 bf16/fp16 rows, Q4_0 / Q4_1 calls with 5-64 (3-4 on large matrices; ``mmv.prefer``,
    ``mmv.MID_ROWS_MAX``), and with ``MLX_NATIVE_MMV=on`` the other Q4_0 / Q4_1 / Q4_K calls with 1-16 rows; Q6_K
    calls of 5-8 rows and Q5_K / Q8_0 calls of 5 that ``block_mmv`` does not take the streamed mat-vecs on slices of
    4 rows (:func:`row_slices`); other calls of 17 rows or more chunked dequantize + cuBLAS
    (``qmm.PREFILL_CUBLAS_MIN_M``); everything else runs the fused kernels on the blocks."""

    def __init__(self, x, raw, t, n, k):
        self.t, self.n, self.k = t, n, k
        self.out_shape = (*x.shape[:-1], n)
        self.empty = math.prod(self.out_shape) == 0
        if self.empty:
            return
        m = math.prod(x.shape[:-1])
        self.view_dtype = _FLOAT_DTYPES.get(t.id) if _FLOAT_DTYPES.get(t.id) == x.dtype else None
        if self.view_dtype is not None:
            return
        kind = select_kind(m, x.dtype == torch.float32)
        spec = weight_spec(t)
        cfg = choose_config(kind, m, n, k, spec, x.device)
        x2 = x.reshape(m, k)
        rb = formats.row_bytes(t, k)
        strides = (x2.stride(0) if x2.stride(-1) == 1 else k, 1, 0, rb, 0, 0, 1)
        self.kind, self.cfg = kind, cfg
        self.chunked = None
        tensor_core = (kind in ("gemv", "decode") or mmv.mid_rows(m, t.id)) and mmv.supports_gguf(
            t.id, x.dtype, m, k, n * rb) and mmv.prefer(m, n, k, t.id) and qmm.CONFIG_OVERRIDE is None
        blocks = block_mmv.supports(t.id, x.dtype, m, k, n * rb) and qmm.CONFIG_OVERRIDE is None
        if kind == "prefill" and m >= qmm.PREFILL_CUBLAS_MIN_M and not (tensor_core or blocks) \
                and qmm.CONFIG_OVERRIDE is None:
            self.chunked = qmm.ChunkedPrefill(m, n, k, x.dtype, x.dtype, x.device, rows_dequantizer(t, k))
            self.kind = "prefill (chunked dequantize + cuBLAS)"
            return
        if blocks:
            self.launch = block_mmv.BlockMmvLaunch(t.id, m, n, k, x.dtype, strides[0], x.device)
            self.kind = "block mmv"
            return
        build = streamed_launch(t.id, x.dtype, m, n, k, strides[0], x.device)
        if build is not None:
            self.launch = build()
            self.kind = "streamed"
            return
        slices = () if tensor_core else row_slices(t.id, m)
        builds = [streamed_launch(t.id, x.dtype, r, n, k, strides[0], x.device) for r in slices]
        if slices and all(b is not None for b in builds):
            self.slices = [(sum(slices[:i]), r, b()) for i, (r, b) in enumerate(zip(slices, builds))]
            self.kind = "streamed slices"
            return
        if tensor_core:
            self.launch = mmv.MmvLaunch(m, n, k, mmv.GGUF_GROUP, x.dtype, x.dtype, (strides[0], rb, 0), x.device,
                                        fmt=t.id)
            self.kind = "mmv"
            return
        if kind == "gemv" and gemv.supports(1, t.id, 4, True) and n * rb < 2**31 \
                and qmm.CONFIG_OVERRIDE is None:
            self.launch = gemv.WithFallback(
                gemv.GemvLaunch(1, t.id, 4, 64, n, k, m, False, False, False, 0, x.dtype, strides, x.device),
                lambda: QmmLaunch(spec, cfg, n, k, m, m, False, False, False, False, 0, x.dtype,
                                  x.dtype == torch.float32, strides, x.device), "ggml_matmul")
            self.kind = "gemv*"
            return
        self.launch = QmmLaunch(spec, cfg, n, k, m, triton.cdiv(m, cfg.bm), False, False, False, False, 0, x.dtype,
                                x.dtype == torch.float32, strides, x.device)

    def __call__(self, x, raw):
        if self.view_dtype is not None:
            w = raw.reshape(-1).view(self.view_dtype).view(self.n, self.k)
            return torch.matmul(x, w.T)
        x2 = x.reshape(-1, self.k)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        r = aligned(raw.reshape(-1))
        if self.chunked is not None:
            return self.chunked(x2, (r,)).view(self.out_shape)
        if self.kind in ("streamed", "block mmv"):
            return self.launch(x2, r).view(self.out_shape)
        if self.kind == "streamed slices":
            return torch.cat([launch(x2[i:i + rows], r) for i, rows, launch in self.slices]).view(self.out_shape)
        return self.launch(x2, r, r, r, None, None, None).view(self.out_shape)


__all__ = ["DequantPlan", "EmbeddingPlan", "MatmulPlan", "STRUCTURED", "streamed_launch", "takes_streamed",
           "weight_spec"]
