"""The quantized matmul kernel shared by the MLX-affine and GGUF ops (plain and expert-routed).

``out[r, n] = sum_k x[xrow(r), k] * W_e(r)[n, k]`` with W dequantized tile by tile
in registers, never in memory. One kernel, specialized by constexprs:

* ``FAMILY``: 0 = MLX affine (``w`` int32 words, ``s``/``b`` scales and biases,
  ``BITS``/``GS``; ``TRANS`` False reads ``W [K, N]`` packed along N as MLX's
  ``transpose=False``); 1 = GGUF blocks (``w`` raw bytes, type ``FMT``).
* ``USE_DOT``: tensor-core ``tl.dot`` of ``[BM, BK] x [BK, BN]`` tiles (prefill, and
  decode with 2-16 rows); else the mat-vec path (one row, ``BM == 1``): fp32
  multiply-adds on the dequantized tile, reduced once at the end.
* ``GROUPED``: rows come from a list (``rows_ptr``, -1 = padding) in blocks of
  ``BM`` that all use one expert (``bexp_ptr``); ``nblk_ptr`` (when given) holds
  the number of blocks in use, read on the device, so the grid is static and
  nothing syncs. Input row of output row ``r`` is ``xrow_ptr[r]`` (HAS_XROW) or
  ``r // x_div`` (x shared by the top-k slots of a token).
* ``SPLIT_K``: K is split over the programs of grid axis 1, which write fp32
  partials ``[split, R, N]`` summed by :func:`splitk_reduce_kernel` (deterministic).
* ``HAS_UP``: a second weight (the up projection) in the same pass; the output
  is ``act(gate) * up`` (``ACT`` 0: SiLU, 1: GELU-tanh), in fp32, one rounding.

Expert ids outside ``[0, n_experts)`` never address memory: their rows are NaN.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.arrival import arrive_last, rearm
from ...kernels.math import gated_act
from ...kernels.norm_handoff import handoff_store
from ..ggml.tiles import ggml_decode, ggml_load, planes_of
from .tiles import affine_decode, affine_gemv_compute, affine_load, affine_tile


@triton.jit
def _w_load(w_ptr, s_ptr, b_ptr, rows, row_ok, c0, c_end, stride_wr, stride_sr,
            FAMILY: tl.constexpr, FMT: tl.constexpr, BITS: tl.constexpr, GS: tl.constexpr, NC: tl.constexpr):
    """Issue the loads of one tile (10 raw tensors; formats without split loads gather in ``_w_decode``)."""
    if FAMILY == 0:
        if 32 % BITS == 0:
            w, sc, bi = affine_load(w_ptr, s_ptr, b_ptr, rows, row_ok, c0, c_end, stride_wr, stride_sr, BITS, GS, NC)
            return w, sc, bi, w, w, w, w, w, w, w
        else:
            return rows, rows, rows, rows, rows, rows, rows, rows, rows, rows
    else:
        return ggml_load(w_ptr, rows.to(tl.int64) * stride_wr, row_ok, c0, c_end, FMT, NC)


@triton.jit
def _w_decode(t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, w_ptr, s_ptr, b_ptr, rows, row_ok, c0, c_end, stride_wr,
              stride_sr, FAMILY: tl.constexpr, FMT: tl.constexpr, BITS: tl.constexpr, GS: tl.constexpr,
              NC: tl.constexpr):
    """The dequantized tile as planes ``(p0, p1)`` (see ``ggml_tile``; affine tiles are one plane)."""
    if FAMILY == 0:
        if 32 % BITS == 0:
            v = affine_decode(t0, t1, t2, BITS)
        else:
            v = affine_tile(w_ptr, s_ptr, b_ptr, rows, row_ok, c0, c_end, stride_wr, stride_sr, BITS, GS, NC)
        return v, v
    else:
        return ggml_decode(t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, w_ptr, rows.to(tl.int64) * stride_wr, row_ok, c0,
                           c_end, FMT, NC)


@triton.jit
def _x_load(x_row, row_ok, kx, k_hi, USE_DOT: tl.constexpr):
    if USE_DOT:
        return tl.load(x_row[:, None] + kx[None, :], mask=row_ok[:, None] & (kx < k_hi)[None, :], other=0.0)
    else:
        return tl.load(x_row + kx, mask=row_ok & (kx < k_hi), other=0.0)


@triton.jit
def _dot(x, w, acc, TRANS: tl.constexpr, DOT_IEEE: tl.constexpr, SWAP: tl.constexpr):
    """``acc + x @ w`` (``w.T`` when TRANS) on tensor cores, in x's dtype (fp32: IEEE).

    SWAP (TRANS only): ``acc [BN, BM] + w @ x.T``: for a few rows of x the weight tile is the
    wide ("M") operand of the MMA and x the narrow one.
    """
    if DOT_IEEE:
        xd = x.to(tl.float32)
        wd = w
    else:
        xd = x
        wd = w.to(x.dtype)
    if SWAP:
        if DOT_IEEE:
            out = tl.dot(wd, tl.trans(xd), acc, input_precision="ieee")
        else:
            out = tl.dot(wd, tl.trans(xd), acc)
    else:
        if TRANS:
            wd = tl.trans(wd)
        if DOT_IEEE:
            out = tl.dot(xd, wd, acc, input_precision="ieee")
        else:
            out = tl.dot(xd, wd, acc)
    return out


@triton.jit(do_not_specialize=["n_rows", "k_per_split"])
def qmm_kernel(
    x_ptr,  # [Rx, K] activations, unit column stride, row stride stride_xm
    w_ptr,  # affine: [E, ..] int32 words; ggml: [E * N * row_bytes] uint8
    s_ptr,  # affine: [E, .., groups] scales (ggml: unused)
    b_ptr,  # affine: [E, .., groups] biases (ggml: unused)
    w2_ptr, s2_ptr, b2_ptr,  # the up projection (HAS_UP), same layout
    out_ptr,  # [R, N] output, or [SPLIT, R, N] fp32 partials
    out2_ptr,  # [SPLIT, R, N] fp32 partials of the up projection (HAS_UP and SPLIT > 1)
    rows_ptr,  # GROUPED: [blocks * BM] output row ids, -1 = padding
    bexp_ptr,  # GROUPED: [blocks] expert of each block
    nblk_ptr,  # GROUPED and HAS_NBLK: [1] blocks in use
    xrow_ptr,  # GROUPED and HAS_XROW: [R] input row of each output row
    n_rows, N, K,
    stride_xm, x_div,
    stride_we, stride_wr, stride_se, stride_sr,
    n_experts, k_per_split,
    FAMILY: tl.constexpr, FMT: tl.constexpr, BITS: tl.constexpr, GS: tl.constexpr, TRANS: tl.constexpr,
    GROUPED: tl.constexpr, HAS_NBLK: tl.constexpr, HAS_XROW: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr,
    USE_DOT: tl.constexpr, SPLIT_K: tl.constexpr, DOT_IEEE: tl.constexpr, GROUP_M: tl.constexpr,
    NPLANES: tl.constexpr, RUN: tl.constexpr, SWAP: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_n = tl.cdiv(N, BN)
    if GROUP_M > 1:  # swizzle: GROUP_M row blocks share the columns they read (L2 reuse)
        num_m = tl.num_programs(0) // num_n
        width = GROUP_M * num_n
        first_m = (pid // width) * GROUP_M
        size_m = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % width) % size_m
        pid_n = (pid % width) // size_m
    else:
        pid_m = pid // num_n
        pid_n = pid % num_n

    bad = False
    if GROUPED:
        if HAS_NBLK:
            if pid_m >= tl.load(nblk_ptr):
                return
        r = tl.load(rows_ptr + pid_m * BM + tl.arange(0, BM))
        row_ok = r >= 0
        r = tl.where(row_ok, r, 0)
        if HAS_XROW:
            xr = tl.load(xrow_ptr + r)
        else:
            xr = r // x_div
        e = tl.load(bexp_ptr + pid_m).to(tl.int64)
        bad = (e < 0) | (e >= n_experts)
        e = tl.where(bad, 0, e)
    else:
        r = pid_m * BM + tl.arange(0, BM)
        row_ok = r < n_rows
        xr = r
        e = 0
    w_base = w_ptr + e * stride_we
    s_base = s_ptr + e * stride_se
    b_base = b_ptr + e * stride_se
    w2_base = w2_ptr + e * stride_we
    s2_base = s2_ptr + e * stride_se
    b2_base = b2_ptr + e * stride_se

    offs_n = pid_n * BN + tl.arange(0, BN)
    n_ok = offs_n < N
    k_lo = pid_k * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)
    x_row = x_ptr + xr.to(tl.int64) * stride_xm  # [BM] row pointers
    BKP: tl.constexpr = BK // NPLANES  # columns of one plane
    cp = tl.arange(0, BKP)
    if NPLANES == 1:
        kx_off = cp
    else:
        kx_off = (cp // RUN) * (2 * RUN) + cp % RUN  # K offset of plane-0 column c (plane 1: + RUN)
    # mat-vec over 2/4/8-bit affine rows: per-word accumulators (see affine_gemv_compute)
    WORD_GEMV: tl.constexpr = (FAMILY == 0) and (32 % BITS == 0) and TRANS and (not USE_DOT)
    if WORD_GEMV:
        ACC_R: tl.constexpr = BN
        ACC_C: tl.constexpr = BK * BITS // 32
    elif TRANS:
        ACC_R: tl.constexpr = BN
        ACC_C: tl.constexpr = BKP
    else:
        ACC_R: tl.constexpr = BK
        ACC_C: tl.constexpr = BN
    if SWAP:
        acc = tl.zeros([BN, BM], dtype=tl.float32)
        acc2 = tl.zeros([BN, BM], dtype=tl.float32)
    elif USE_DOT:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        acc2 = tl.zeros([BM, BN], dtype=tl.float32)
    else:
        acc = tl.zeros([ACC_R, ACC_C], dtype=tl.float32)
        accb = tl.zeros([ACC_R, ACC_C], dtype=tl.float32)
        acc2 = tl.zeros([ACC_R, ACC_C], dtype=tl.float32)
        acc2b = tl.zeros([ACC_R, ACC_C], dtype=tl.float32)
    if TRANS:
        WCOLS: tl.constexpr = BK
    else:
        WCOLS: tl.constexpr = BN
    arange_k = tl.arange(0, BK)

    # software pipeline: the loads of step k0 + BK are issued before step k0 is computed
    if TRANS:
        w_rows = offs_n
        w_ok = n_ok
        w_c0 = k_lo
        w_end = k_hi
    else:
        w_rows = k_lo + arange_k
        w_ok = w_rows < k_hi
        w_c0 = pid_n * BN
        w_end = N
    xa = _x_load(x_row, row_ok, k_lo + kx_off, k_hi, USE_DOT)
    xb = _x_load(x_row, row_ok, k_lo + kx_off + RUN, k_hi, USE_DOT)
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9 = _w_load(w_base, s_base, b_base, w_rows, w_ok, w_c0, w_end, stride_wr,
                                                     stride_sr, FAMILY, FMT, BITS, GS, WCOLS)
    u0, u1, u2, u3, u4, u5, u6, u7, u8, u9 = a0, a1, a2, a3, a4, a5, a6, a7, a8, a9
    if HAS_UP:
        u0, u1, u2, u3, u4, u5, u6, u7, u8, u9 = _w_load(w2_base, s2_base, b2_base, w_rows, w_ok, w_c0, w_end,
                                                         stride_wr, stride_sr, FAMILY, FMT, BITS, GS, WCOLS)
    for k0 in range(k_lo, k_hi, BK):
        kn = k0 + BK
        if TRANS:
            n_rows_w = offs_n
            n_ok_w = n_ok
            n_c0 = kn
            c_rows = offs_n
            c_ok = n_ok
            c_c0 = k0
        else:
            n_rows_w = kn + arange_k
            n_ok_w = n_rows_w < k_hi
            n_c0 = pid_n * BN
            c_rows = k0 + arange_k
            c_ok = c_rows < k_hi
            c_c0 = pid_n * BN
        nxa = _x_load(x_row, row_ok, kn + kx_off, k_hi, USE_DOT)
        nxb = _x_load(x_row, row_ok, kn + kx_off + RUN, k_hi, USE_DOT)
        n0, n1, n2, n3, n4, n5, n6, n7, n8, n9 = _w_load(w_base, s_base, b_base, n_rows_w, n_ok_w, n_c0, w_end,
                                                         stride_wr, stride_sr, FAMILY, FMT, BITS, GS, WCOLS)
        m0, m1, m2, m3, m4, m5, m6, m7, m8, m9 = n0, n1, n2, n3, n4, n5, n6, n7, n8, n9
        if HAS_UP:
            m0, m1, m2, m3, m4, m5, m6, m7, m8, m9 = _w_load(w2_base, s2_base, b2_base, n_rows_w, n_ok_w, n_c0, w_end,
                                                             stride_wr, stride_sr, FAMILY, FMT, BITS, GS, WCOLS)
        if WORD_GEMV:
            xf = xa.to(tl.float32)
            acc = affine_gemv_compute(a0, a1, a2, xf, acc, BITS)
            if HAS_UP:
                acc2 = affine_gemv_compute(u0, u1, u2, xf, acc2, BITS)
        else:
            p0, p1 = _w_decode(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, w_base, s_base, b_base, c_rows, c_ok, c_c0,
                               w_end, stride_wr, stride_sr, FAMILY, FMT, BITS, GS, WCOLS)
            if HAS_UP:
                q0, q1 = _w_decode(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, w2_base, s2_base, b2_base, c_rows, c_ok,
                                   c_c0, w_end, stride_wr, stride_sr, FAMILY, FMT, BITS, GS, WCOLS)
            if USE_DOT:
                acc = _dot(xa, p0, acc, TRANS, DOT_IEEE, SWAP)
                if HAS_UP:
                    acc2 = _dot(xa, q0, acc2, TRANS, DOT_IEEE, SWAP)
                if NPLANES == 2:
                    acc = _dot(xb, p1, acc, TRANS, DOT_IEEE, SWAP)
                    if HAS_UP:
                        acc2 = _dot(xb, q1, acc2, TRANS, DOT_IEEE, SWAP)
            else:  # BM == 1
                xf = xa.to(tl.float32)
                if TRANS:
                    acc += p0 * xf[None, :]
                    if HAS_UP:
                        acc2 += q0 * xf[None, :]
                    if NPLANES == 2:
                        xg = xb.to(tl.float32)
                        accb += p1 * xg[None, :]
                        if HAS_UP:
                            acc2b += q1 * xg[None, :]
                else:
                    acc += p0 * xf[:, None]
                    if HAS_UP:
                        acc2 += q0 * xf[:, None]
        xa, xb = nxa, nxb
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9 = n0, n1, n2, n3, n4, n5, n6, n7, n8, n9
        u0, u1, u2, u3, u4, u5, u6, u7, u8, u9 = m0, m1, m2, m3, m4, m5, m6, m7, m8, m9

    if SWAP:
        res = tl.trans(acc)
        res2 = tl.trans(acc2)
    elif USE_DOT:
        res = acc
        res2 = acc2
    else:
        if TRANS:
            if NPLANES == 2:
                acc += accb
                acc2 += acc2b
            res = tl.sum(acc, axis=1)[None, :]
            res2 = tl.sum(acc2, axis=1)[None, :]
        else:
            res = tl.sum(acc, axis=0)[None, :]
            res2 = tl.sum(acc2, axis=0)[None, :]
    mask = row_ok[:, None] & n_ok[None, :]
    if GROUPED:
        res = tl.where(bad, float("nan"), res)
        res2 = tl.where(bad, float("nan"), res2)
    out_off = r.to(tl.int64)[:, None] * N + offs_n[None, :]
    store_result(out_ptr, out_ptr, out2_ptr, out_ptr, res, res2, out_off, mask, n_rows * N, SPLIT_K, False, HAS_UP,
                 ACT)


@triton.jit
def splitk_sum(part_ptr, part2_ptr, offs, mask, split_stride, n_split, HAS_UP: tl.constexpr, ACT: tl.constexpr):
    """The fp32 sum over splits ``s = 0 .. n_split - 1`` (in that order) of the partial tiles at
    ``part_ptr + s * split_stride + offs`` (``offs``: int64 offsets, a tile of any shape; masked-off
    lanes give 0); with ``HAS_UP``, ``act(sum) * sum2`` (``ACT`` 0: SiLU, 1: GELU-tanh) where ``sum2``
    sums the up projection's partials at ``part2_ptr``. One split per loop step; the loads bypass L1
    (``.cg``): in the fused decode paths other SMs wrote the partials during the same launch."""
    acc = tl.zeros(offs.shape, dtype=tl.float32)
    acc2 = tl.zeros(offs.shape, dtype=tl.float32)
    p = part_ptr + offs
    p2 = part2_ptr + offs
    for _ in range(n_split):  # the pointers advance by split_stride (no int32 product s * split_stride)
        acc += tl.load(p, mask=mask, other=0.0, cache_modifier=".cg")
        p += split_stride
        if HAS_UP:
            acc2 += tl.load(p2, mask=mask, other=0.0, cache_modifier=".cg")
            p2 += split_stride
    if HAS_UP:
        acc = gated_act(acc, ACT) * acc2
    return acc


@triton.jit
def store_result(out_ptr, part_ptr, part2_ptr, cnt_ptr, res, res2, offs, mask, split_stride,
                 SPLIT_K: tl.constexpr, FUSE: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr):
    """Write a program's fp32 result tile ``res`` (``res2``: the up projection's, with HAS_UP) at int64
    ``offs``: to the output (``act(res) * res2`` with HAS_UP, cast to its dtype) or, with SPLIT_K, as this
    split's partials at ``part_ptr / part2_ptr + program_id(1) * split_stride``. With FUSE every split
    arrives on ``cnt_ptr`` and the last one sums the partials into the output (kernels/arrival.py)."""
    if not SPLIT_K:
        if HAS_UP:
            res = gated_act(res, ACT) * res2
        tl.store(out_ptr + offs, res.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        part = tl.program_id(1).to(tl.int64) * split_stride
        tl.store(part_ptr + part + offs, res, mask=mask)
        if HAS_UP:
            tl.store(part2_ptr + part + offs, res2, mask=mask)
        if FUSE:  # every program arrives, an empty K range included
            n_split = tl.num_programs(1)
            if arrive_last(cnt_ptr, n_split):
                total = splitk_sum(part_ptr, part2_ptr, offs, mask, split_stride, n_split, HAS_UP, ACT)
                tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=mask)
                rearm(cnt_ptr)


@triton.jit
def store_or_hand_off(out_ptr, part_ptr, cnt_ptr, res, res2, offs, mask, split_stride, res_ptr, nw_ptr, scaled_ptr,
                      sum_ptr, w_offset, SPLIT_K: tl.constexpr, FUSE: tl.constexpr, HAS_UP: tl.constexpr,
                      ACT: tl.constexpr, NORM_OUT: tl.constexpr):
    """A one-row mat-vec's result tile: :func:`store_result` (the up projection's partials beside ``part_ptr``'s),
    or with ``NORM_OUT`` (no K split, no up projection) a norm handoff's producer tile
    (``kernels/norm_handoff.handoff_store``: ``h`` at ``out_ptr``, ``h * w`` at ``scaled_ptr``, the tile's
    ``sum(h^2)`` at ``sum_ptr``)."""
    if NORM_OUT:
        handoff_store(out_ptr, res_ptr, nw_ptr, scaled_ptr, sum_ptr, res, offs, mask, w_offset)
    else:
        store_result(out_ptr, part_ptr, part_ptr, cnt_ptr, res, res2, offs, mask, split_stride, SPLIT_K, FUSE,
                     HAS_UP, ACT)


@triton.jit(do_not_specialize=["numel", "n_split"])
def splitk_reduce_kernel(
    part_ptr,  # [n_split, numel] fp32 partials
    part2_ptr,  # [n_split, numel] fp32 partials of the up projection (HAS_UP)
    out_ptr,  # [numel] output
    numel, n_split,
    HAS_UP: tl.constexpr, ACT: tl.constexpr, BLOCK: tl.constexpr,
):
    """The second launch of a K split (qmm, and the decode kernels without a fused merge)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < numel
    acc = splitk_sum(part_ptr, part2_ptr, offs, ok, numel, n_split, HAS_UP, ACT)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=ok)


# ----------------------------------------------------------------------------- launch plans

import dataclasses  # noqa: E402
from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...kernels.arrival import can_fuse, counters  # noqa: E402
from ...kernels.launch import Launch  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ...runtime.memory import empty  # noqa: E402
from ..common import next_pow2  # noqa: E402
from .grouping import RowGrouping  # noqa: E402

# False: the decode kernels (mmv, gemv) leave the split-K sum to a second launch (splitk_reduce_kernel)
# instead of merging in place; read when a plan is built (bench/quant.py times both).
FUSED_SPLITK = True


class SplitK:
    """fp32 partials ``[split, n_rows, n]`` of a launch split over K, and how they reach the output.

    Two ways:

    * two launches (qmm, ``FUSED_SPLITK = False``, or a plan built during CUDA-graph capture): the
      kernel stores the partials and :func:`splitk_reduce_kernel` sums them into the output;
    * fused (``tiles`` given: the decode kernels ``mmv_kernel`` and ``gemv_kernel``, ``FUSE``): the
      plan owns int32 arrival counters ``[tiles]``, one per program along the kernel's output axis
      (one output tile), zeroed here. Each program stores its partial tile, then counts in on its
      tile's counter (every program, an empty K range included); the last of the ``split`` to arrive
      sums the tile's partials (:func:`splitk_sum`, the reduce kernel's math, same order, so the two
      ways give identical bits), stores the output and sets the counter back to zero
      (``kernels/arrival.py``: ordering, and why the plan is built outside a capture). One plan must
      not run in two launches at once (two streams, or concurrent replays of graphs captured from it):
      they would share the counters.

    Args:
        split: number of K splits (> 1). n_rows, n: output shape. has_up, act: a fused gate/up pair
            (two sets of partials, ``act(gate) * up`` applied after the sum).
        tiles: output tiles of a kernel that can merge its own partials (None: two launches).
    """

    BLOCK = 1024

    def __init__(self, split: int, n_rows: int, n: int, has_up: bool, act: int, device, tiles: Optional[int] = None):
        self.split, self.numel, self.has_up, self.device = split, n_rows * n, has_up, device
        self.shape = (split, n_rows, n)
        self.fused = tiles is not None and FUSED_SPLITK and can_fuse(torch.device(device))
        self.counters = counters((tiles,), device) if self.fused else None
        self.reduce = None if self.fused else Launch(
            splitk_reduce_kernel, (triton.cdiv(self.numel, self.BLOCK),), dict(HAS_UP=has_up, ACT=act,
                                                                              BLOCK=self.BLOCK), num_warps=4)

    def partials(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(part, part2, cnt)``: ``[split, n_rows, n]`` fp32 (``part2`` is ``part`` without an up
        projection) and the counters (``part`` as an unused pointer when not fused)."""
        part = torch.empty(self.shape, dtype=torch.float32, device=self.device)
        part2 = torch.empty_like(part) if self.has_up else part
        return part, part2, (self.counters if self.fused else part)

    def reduce_into(self, part: torch.Tensor, part2: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out`` after the split launch: the reduce launch, unless the kernel merged in place."""
        if self.reduce is not None:
            self.reduce(part, part2, out, self.numel, self.split)
        return out


def run_split(launch, splitk: Optional[SplitK], head: tuple, out: torch.Tensor, ints: tuple) -> torch.Tensor:
    """``launch(*head, out, part, cnt, *ints)`` of a decode kernel without an up projection: ``part`` and
    ``cnt`` are ``out`` when K is not split (``splitk`` None), else ``splitk``'s partials and counters;
    returns ``out`` once the splits are summed."""
    if splitk is None:
        launch(*head, out, out, out, *ints)
        return out
    part, _, cnt = splitk.partials()
    launch(*head, out, part, cnt, *ints)
    return splitk.reduce_into(part, part, out)


ACT_CODES = {"silu": 0, "gelu_tanh": 1}
DECODE_MAX_ROWS = 16  # up to this many rows of x: the decode kernels


@dataclasses.dataclass(frozen=True)
class Config:
    """Launch configuration of :func:`qmm_kernel` (``use_dot`` False needs ``bm == 1``)."""

    bm: int
    bn: int
    bk: int
    split: int
    use_dot: bool
    num_warps: int
    num_stages: Optional[int] = None
    group_m: int = 1
    swap: bool = False  # decode dots as W @ x.T (weight tile on the wide side of the MMA)


GEMV_BK = 256  # K columns per step of the general kernel's one-row tiles (transposed weights)

# Hook for sweeps: a callable (kind, m, n, k, spec) -> Config or None, consulted before the heuristics.
CONFIG_OVERRIDE = None


@dataclasses.dataclass(frozen=True)
class WeightSpec:
    """What the kernel needs to know about a weight: family (0 affine, 1 ggml), format, packing."""

    family: int
    fmt: int = 0
    bits: int = 4
    group_size: int = 64
    trans: bool = True
    unit: int = 32  # columns of K a tile step must be a multiple of

    @property
    def k_align(self) -> int:
        return self.group_size if self.family == 0 else self.unit

    @property
    def planes(self) -> tuple[int, int]:
        return (1, 0) if self.family == 0 else planes_of(self.fmt)


def select_kind(m: int, ieee: bool) -> str:
    """Kernel path for ``m`` rows: "gemv" (one row per program set; also fp32 decode, where
    per-row fp32 multiply-adds beat FMA-emulated fp32 dots in speed and accuracy), "decode"
    (tensor-core tiles of 16 rows) or "prefill"."""
    if m == 1 or (ieee and m <= DECODE_MAX_ROWS):
        return "gemv"
    return "decode" if m <= DECODE_MAX_ROWS else "prefill"


def _cap(v: int, n: int, lo: int) -> int:
    """``v`` shrunk toward ``n`` (a small problem gets a small tile), never below ``lo``."""
    return max(lo, min(v, next_pow2(n)))


def choose_config(kind: str, m: int, n: int, k: int, spec: WeightSpec, device, groups: int = 1) -> Config:
    """Heuristic configs (no autotuning: decode must be graph-capturable with no first-call stall).

    kind: "gemv" (one row per program set), "decode" (2-16 shared rows, tensor cores), "prefill".
    ``groups``: independent row sets sharing the grid (expert rows in the mat-vec path).
    """
    if CONFIG_OVERRIDE is not None:
        cfg = CONFIG_OVERRIDE(kind, m, n, k, spec)
        if cfg is not None:
            return cfg
    sms = device_info(device).sm_count
    align = spec.k_align
    if not spec.trans:  # W [K, N] packed along N: tiles are BK rows x BN (>= group) columns
        bn = max(spec.group_size, _cap(64, n, 16))
        bk = _cap(32 if kind == "gemv" else 64, k, 16)
    else:
        bn = _cap(16 if kind == "gemv" else (64 if kind == "decode" else 128), n, 16)
        # one-row tiles of 16 x 1024 spilled (H100, scripts/slow_gemv_probe.py: MLX 3-bit 4096 x 14336 2036 us,
        # Q6_K 6524 us); 16 x 256 took 183 / 410 us
        bk = max(align, _cap(GEMV_BK if kind == "gemv" else (128 if kind == "decode" else 64), k, 16))
    if kind == "prefill":
        bm = _cap(128 if m >= 256 else 64, m, 16)
        warps = 8 if bm * bn >= 128 * 128 else 4
        return Config(bm, bn, bk, 1, True, warps, num_stages=1, group_m=8)
    bm = 1 if kind == "gemv" else 16
    tiles = triton.cdiv(n, bn) * groups
    steps = triton.cdiv(k, bk)
    split = 1
    while tiles * split < 2 * sms and steps // (split * 2) >= 2 and split < 16:
        split *= 2
    return Config(bm, bn, bk, split, kind != "gemv", 4, num_stages=1, swap=kind == "decode" and bn >= 64)


class QmmLaunch:
    """:func:`qmm_kernel` prepared for one signature.

    Args:
        spec: the weight format.
        cfg: launch config.
        n, k: output / input features. n_rows: output rows ``R``.
        grid_m: row blocks (plain: ``cdiv(R, BM)``; grouped: the static maximum).
        grouped, has_nblk, has_up, act: see the kernel.
        out_dtype, compute_ieee: output dtype; fp32 dots in IEEE precision.
        strides: (stride_xm, x_div, stride_we, stride_wr, stride_se, stride_sr, n_experts).
    """

    def __init__(self, spec: WeightSpec, cfg: Config, n: int, k: int, n_rows: int, grid_m: int, grouped: bool,
                 has_nblk: bool, has_xrow: bool, has_up: bool, act: int, out_dtype: torch.dtype, compute_ieee: bool,
                 strides: tuple, device):
        self.cfg, self.n, self.k, self.n_rows = cfg, n, k, n_rows
        self.out_dtype, self.device = out_dtype, device
        steps = triton.cdiv(k, cfg.bk)
        self.split = max(1, min(cfg.split, steps))
        self.k_per_split = triton.cdiv(steps, self.split) * cfg.bk
        self.split = triton.cdiv(k, self.k_per_split)
        self.ints = (n_rows, n, k, *strides[:6], strides[6], self.k_per_split)
        grid = (grid_m * triton.cdiv(n, cfg.bn), self.split)
        self.launch = Launch(qmm_kernel, grid, dict(
            FAMILY=spec.family, FMT=spec.fmt, BITS=spec.bits, GS=spec.group_size, TRANS=spec.trans,
            GROUPED=grouped, HAS_NBLK=has_nblk, HAS_XROW=has_xrow, HAS_UP=has_up, ACT=act, USE_DOT=cfg.use_dot,
            SPLIT_K=self.split > 1, NPLANES=spec.planes[0], RUN=max(1, spec.planes[1]),
            SWAP=cfg.swap and cfg.use_dot and spec.trans,
            DOT_IEEE=compute_ieee, GROUP_M=cfg.group_m if not grouped else 1, BM=cfg.bm, BN=cfg.bn, BK=cfg.bk),
            num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        if self.split > 1:
            self.splitk = SplitK(self.split, n_rows, n, has_up, act, device)

    def __call__(self, x, w, s, b, w2, s2, b2, rows=None, bexp=None, nblk=None, xrow=None) -> torch.Tensor:
        out = empty((self.n_rows, self.n), dtype=self.out_dtype, device=self.device)
        rows = rows if rows is not None else x
        bexp = bexp if bexp is not None else x
        nblk = nblk if nblk is not None else x
        xrow = xrow if xrow is not None else x
        w2 = w2 if w2 is not None else w
        s2 = s2 if s2 is not None else s
        b2 = b2 if b2 is not None else b
        if self.split == 1:
            self.launch(x, w, s, b, w2, s2, b2, out, out, rows, bexp, nblk, xrow, *self.ints)
            return out
        part, part2, _ = self.splitk.partials()
        self.launch(x, w, s, b, w2, s2, b2, part, part2, rows, bexp, nblk, xrow, *self.ints)
        return self.splitk.reduce_into(part, part2, out)


def stack_strides(w: torch.Tensor, scales: torch.Tensor) -> tuple[int, int, int, int]:
    """``(stride_we, stride_wr, stride_se, stride_sr)`` of the contiguous ``[E, R, C]`` expert stacks of words and
    scales that :class:`RoutedLaunch` calls pass (``.contiguous()`` of the given ones; an up projection shares
    them)."""
    return w.shape[-2] * w.shape[-1], w.shape[-1], scales.shape[-2] * scales.shape[-1], scales.shape[-1]


class RoutedLaunch:
    """Expert-routed rows: row ``r`` multiplies x row ``xrow[r]`` (or ``r // x_div``) by expert ``erow[r]``.

    Up to ``DECODE_MAX_ROWS`` rows: one mat-vec program set per row (each expert's
    weight is streamed once per row that uses it). More rows: rows sorted by expert
    on the device (:class:`~mlx_native.ops.quant.grouping.RowGrouping`) into blocks of one expert, tensor-core tiles.
    """

    def __init__(self, spec: WeightSpec, n: int, k: int, n_rows: int, n_experts: int, x_div: int, has_xrow: bool,
                 has_up: bool, act: int, out_dtype: torch.dtype, compute_ieee: bool, strides: tuple, device):
        self.n_experts = n_experts
        self.gemv = n_rows <= DECODE_MAX_ROWS
        stride_xm, stride_we, stride_wr, stride_se, stride_sr = strides
        st = (stride_xm, x_div, stride_we, stride_wr, stride_se, stride_sr, n_experts)
        self.fast = False
        if self.gemv:
            from . import gemv

            if gemv.supports(spec.family, spec.fmt, spec.bits, spec.trans) and CONFIG_OVERRIDE is None:
                self.fast = True
                self.launch = gemv.GemvLaunch(spec.family, spec.fmt, spec.bits, spec.group_size, n, k, n_rows, True,
                                              has_xrow, has_up, act, out_dtype, st, device)
                self.fallback = None
                self._fallback_args = (spec, n, k, n_rows, has_xrow, has_up, act, out_dtype, compute_ieee, st, device)
                return
            cfg = choose_config("gemv", 1, n, k, spec, device, groups=n_rows)
            self.rows = torch.arange(n_rows, dtype=torch.int32, device=device)
            self.launch = QmmLaunch(spec, cfg, n, k, n_rows, n_rows, True, False, has_xrow, has_up, act, out_dtype,
                                    compute_ieee, st, device)
        else:
            self.bm = max(16, min(64, next_pow2(n_rows // max(1, n_experts))))
            base = choose_config("prefill", self.bm, n, k, spec, device)
            cfg = dataclasses.replace(base, bm=self.bm, group_m=1)
            self.grouping = RowGrouping(n_rows, n_experts, self.bm, device)
            grid_m = self.grouping.max_blocks
            self.launch = QmmLaunch(spec, cfg, n, k, n_rows, grid_m, True, True, has_xrow, has_up, act, out_dtype,
                                    compute_ieee, st, device)

    def __call__(self, x, erow, w, s, b, w2=None, s2=None, b2=None, xrow=None) -> torch.Tensor:
        if self.fast:
            try:
                return self.launch(x, w, s, b, w2, s2, b2, erow=erow, xrow=xrow)
            except Exception as exc:  # noqa: BLE001 - a compile failure of the mat-vec kernel: general kernel
                if "ompil" not in type(exc).__name__ and "ompil" not in str(exc)[:200]:
                    raise
                import warnings

                warnings.warn(f"expert matmul: the mat-vec kernel failed to compile ({exc!r:.300}); "
                              f"using the general kernel")
                spec, n, k, n_rows, has_xrow, has_up, act, out_dtype, ieee, st, device = self._fallback_args
                cfg = choose_config("gemv", 1, n, k, spec, device, groups=n_rows)
                self.rows = torch.arange(n_rows, dtype=torch.int32, device=device)
                self.launch = QmmLaunch(spec, cfg, n, k, n_rows, n_rows, True, False, has_xrow, has_up, act,
                                        out_dtype, ieee, st, device)
                self.fast = False
        if self.gemv:
            return self.launch(x, w, s, b, w2, s2, b2, rows=self.rows, bexp=erow, xrow=xrow)
        rows, bexp, nblk = self.grouping(erow)
        return self.launch(x, w, s, b, w2, s2, b2, rows=rows, bexp=bexp, nblk=nblk, xrow=xrow)


# ----------------------------------------------------------------------------- prefill through cuBLAS

# From this many rows, dense tiles go to cuBLAS (ChunkedPrefill), where the tensor-core decode kernel does not take
# them (mmv.MID_ROWS_MAX). H100 session 32 run 5 (bench/mid_rows_sweep.py, us at 17 / 64 rows, the tiled kernel
# against the chunks): Q6_K 4096 x 14336 8020 / 3021 against 211 / 211, 14336 x 4096 17027 / 7409 against 214 / 216;
# Q8_0 14336 x 4096 299 / 415 against 119 / 120; MLX 8-bit 727 / 973 against 118 / 119, 3-bit 1528 / 1853 against
# 116 / 118; Q4_0 at 100 rows 90-302 against 28-110. Two shapes lost (the tiled kernel was faster there): 4096 x
# 14336 at 17-32 rows Q8_0 87 -> 118 us, Q5_K 109 -> 114.
PREFILL_CUBLAS_MIN_M = 17
# Dequantized bytes per chunk (the workspace never grows past this). The GEMM is compute-bound and runs best on the
# widest chunk: H100 session 16 (bench/prefill_chunk_sweep.py), M = 1024 K 4096 x N 14336 0.67-0.69x cuBLAS in four
# 3584-row chunks (L2-sized 32 MB, widened to 2 waves of 128 x 128 tiles) -> 0.73x in one; M = 4096 0.84-0.88x ->
# 0.92-0.96x. Dequantizing chunk i + 1 on a side stream while chunk i multiplied lost 0-30% (the GEMM holds every SM).
CHUNK_BYTES = 128 << 20


def chunk_rows(n: int, row_bytes: int) -> int:
    """Rows of W per chunk of :class:`ChunkedPrefill`: the ``n`` rows split into the fewest equal chunks of at most
    ``CHUNK_BYTES``, multiples of 64 rows."""
    rows = max(64, CHUNK_BYTES // max(1, row_bytes))
    return min(n, triton.cdiv(triton.cdiv(n, triton.cdiv(n, rows)), 64) * 64)


class ChunkedPrefill:
    """``out = x @ W.T`` for many rows: W is dequantized a chunk of output rows at a time into a
    reusable workspace (at most ``CHUNK_BYTES``) and each chunk is one cuBLAS GEMM writing its
    columns of ``out`` in place.

    The fused Triton prefill kernel (dequantized tiles into shared memory, tensor-core dots)
    measured 0.1-0.25x of cuBLAS bf16 on the H100; dequantizing chunks of up to 128 MB and letting
    cuBLAS run the dots reaches 0.71-0.95x at M >= 1024 (see bench/results).

    Args:
        dequant_rows: ``(w_args, n0, n1, ws)`` writes rows ``n0:n1`` of W into ``ws[: n1 - n0]``.
    """

    def __init__(self, m: int, n: int, k: int, compute_dtype: torch.dtype, out_dtype: torch.dtype, device,
                 dequant_rows):
        self.m, self.n, self.k = m, n, k
        self.compute_dtype, self.out_dtype, self.device = compute_dtype, out_dtype, device
        self.chunk = chunk_rows(n, k * torch.empty((), dtype=compute_dtype).element_size())
        self.dequant_rows = dequant_rows

    def __call__(self, x2: torch.Tensor, w_args: tuple) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.out_dtype, device=self.device)
        xc = x2 if x2.dtype == self.compute_dtype else x2.to(self.compute_dtype)
        ws = torch.empty((min(self.chunk, self.n), self.k), dtype=self.compute_dtype, device=self.device)
        for n0 in range(0, self.n, self.chunk):
            n1 = min(self.n, n0 + self.chunk)
            self.dequant_rows(w_args, n0, n1, ws)
            if self.out_dtype == self.compute_dtype:
                torch.mm(xc, ws[: n1 - n0].T, out=out[:, n0:n1])
            else:
                out[:, n0:n1] = torch.mm(xc, ws[: n1 - n0].T)
        return out
