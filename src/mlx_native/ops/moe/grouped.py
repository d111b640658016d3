"""Expert-grouped tensor-core matmul for routed rows past decode (MoE prefill, batches of many tokens), on MLX
affine 4-bit experts (scales and biases in x's dtype) and GGUF Q4_K experts.

A prefill of ``T`` tokens with ``top_k`` of ``E`` experts routes about ``T top_k / E`` rows to each expert (32 for
512 tokens of Qwen3-30B-A3B). The rows are sorted by expert on the device into blocks of ``MP`` rows of one expert
(:class:`~mlx_native.ops.quant.grouping.RowGrouping`, no host sync); program ``(tile, block)`` gathers its block's rows
of x and runs the loop of ``quant/mmv.py``'s packed tiles over its expert's ``BN`` output rows: each step
dequantizes ``GPS * GS`` codes of every row in registers, two codes an instruction, into one tile of the column
order that x is reordered into, and one tensor-core dot takes all ``MP`` rows. The weights of an expert are read
once per block of its rows (the tiled kernel this replaces read them once per ``16-64`` rows too, but its
dequantization through shared memory made it 2-12x slower on dense calls of 17-127 rows).

With an up projection (``HAS_UP``: the fused gate/up pair) the program runs both matrices over the same x
steps and stores ``act(x Wg^T) * (x Wu^T)`` (fp32, one rounding). Expert ids outside ``[0, E)`` give NaN rows
and read no weights. Routed row ``r`` reads x row ``r // x_div`` (the slots of a token share its x), or ``xrow[r]``
(``HAS_XROW``: ``gather_qmm``'s lhs indices).

Other formats (GGUF Q6_K, Q8_0, Q5_K, ...; MLX affine of other bits or fp32 scales) go to :class:`DequantGroupedLaunch`:
experts dequantized to x's dtype a chunk at a time, then :func:`grouped_dense_kernel`. (Session 34 run 3: a kernel
decoding Q8_0 / Q6_K blocks in registers, read as int32 words, was 1.1-4.7x slower than that, at 255 registers; branch
``moe-blocks-kernel``.)
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...kernels.loads import pinned
from ...kernels.words import word_aligned
from ...runtime import env
from ...runtime.memory import empty
from ..quant import mmv
from ..quant.gemv import AFFINE, Q4_K
from ..quant.mmv import _affine_scale_words, _affine_step, _q4k_packed_step, _x_load_rows, _x_order
from ..quant.grouping import RowGrouping
from ..quant.qmm import store_result


@triton.jit
def _x_rows(xrow_ptr, r, x_div, HAS_XROW: tl.constexpr):
    """int64 x row of each routed row ``r``: ``xrow[r]`` (``HAS_XROW``) or ``r // x_div``."""
    if HAS_XROW:
        return tl.load(xrow_ptr + r).to(tl.int64)
    return (r // x_div).to(tl.int64)


@triton.jit
def grouped_mmv_kernel(
    x_ptr,  # [X, K] activations, bf16 / fp16 (row stride stride_xm, even; 4-byte aligned)
    rows_ptr,  # [blocks * MP] int32 routed row of each slot of a block, -1 = padding (RowGrouping)
    bexp_ptr,  # [blocks] int32 expert of each block: n_experts = invalid ids (NaN rows), more = past the last block
    xrow_ptr,  # HAS_XROW: [R] x row of each routed row (gather_qmm's lhs indices)
    w_ptr, s_ptr, b_ptr,  # MLX: [E, N, K / 8] int32 words, [E, N, K / GS] scales / biases; Q4_K: [E, N, row] bytes
    w2_ptr, s2_ptr, b2_ptr,  # the up projection (HAS_UP), same layout
    out_ptr,  # [R, N] output (row r: routed row r)
    N, K, stride_xm, x_div, stride_we, stride_wn, stride_se, stride_sn, n_experts,
    FMT: tl.constexpr, BN: tl.constexpr, GS: tl.constexpr, MP: tl.constexpr, GPS: tl.constexpr,
    X_F16: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr, ASM: tl.constexpr, HAS_XROW: tl.constexpr = False,
):
    """Routed row ``r`` reads x row ``r // x_div`` (``x_div``: the slots of a token sharing its x, or 1), or
    ``xrow[r]`` (``HAS_XROW``).
    ``stride_we`` / ``stride_wn``: words (MLX) or bytes (Q4_K); ``stride_se`` even (scale words)."""
    pid_n = tl.program_id(0)
    blk = tl.program_id(1)
    e = tl.load(bexp_ptr + blk)
    if e > n_experts:  # past the last block in use
        return
    bad = e == n_experts
    e = tl.where(bad, 0, e).to(tl.int64)
    m = tl.arange(0, MP)
    r = tl.load(rows_ptr + blk * MP + m)
    ok = r >= 0
    r = tl.where(ok, r, 0)
    xr = _x_rows(xrow_ptr, r, x_div, HAS_XROW)
    cols = pid_n * BN + tl.arange(0, BN)
    col_ok = cols < N
    rows = tl.where(col_ok, cols, 0)
    n_groups = K // GS
    KS: tl.constexpr = GPS * GS
    wp, w2p = w_ptr + e * stride_we, w2_ptr + e * stride_we
    acc = tl.zeros([BN, MP], dtype=tl.float32)
    acc2 = tl.zeros([BN, MP], dtype=tl.float32)
    xn = _x_load_rows(x_ptr, xr, ok, 0, stride_xm, GS, KS)  # x of the next step, as words (see mmv_kernel)
    if FMT == Q4_K:
        for g in range(0, n_groups, GPS):
            xs = _x_order(pinned(xn, ASM), KS, FMT, x_ptr.dtype.element_ty)
            # (m * 0 +: a tensor mask; the interpreter takes no scalar bool in one)
            xn = _x_load_rows(x_ptr, xr, ok & (m * 0 + g + GPS < n_groups), g + GPS, stride_xm, GS, KS)
            acc = _q4k_packed_step(xs, wp, rows, g, stride_wn, acc, BN, X_F16, ASM)
            if HAS_UP:
                acc2 = _q4k_packed_step(xs, w2p, rows, g, stride_wn, acc2, BN, X_F16, ASM)
    else:
        sp, bp = s_ptr + e * stride_se, b_ptr + e * stride_se
        s2p, b2p = s2_ptr + e * stride_se, b2_ptr + e * stride_se
        sw = _affine_scale_words(sp, rows, 0, n_groups, stride_sn, GPS)
        bw = _affine_scale_words(bp, rows, 0, n_groups, stride_sn, GPS)
        sw2 = sw
        bw2 = bw
        if HAS_UP:
            sw2 = _affine_scale_words(s2p, rows, 0, n_groups, stride_sn, GPS)
            bw2 = _affine_scale_words(b2p, rows, 0, n_groups, stride_sn, GPS)
        for g in range(0, n_groups, GPS):
            xs = _x_order(pinned(xn, ASM), KS, FMT, x_ptr.dtype.element_ty)
            sc, bc = pinned(sw, ASM), pinned(bw, ASM)
            xn = _x_load_rows(x_ptr, xr, ok & (m * 0 + g + GPS < n_groups), g + GPS, stride_xm, GS, KS)
            sw = _affine_scale_words(sp, rows, g + GPS, n_groups, stride_sn, GPS)
            bw = _affine_scale_words(bp, rows, g + GPS, n_groups, stride_sn, GPS)
            acc = _affine_step(xs, sc, bc, wp, rows, g, stride_wn, stride_sn, acc, BN, GS, KS, X_F16, ASM)
            if HAS_UP:
                sc2, bc2 = pinned(sw2, ASM), pinned(bw2, ASM)
                sw2 = _affine_scale_words(s2p, rows, g + GPS, n_groups, stride_sn, GPS)
                bw2 = _affine_scale_words(b2p, rows, g + GPS, n_groups, stride_sn, GPS)
                acc2 = _affine_step(xs, sc2, bc2, w2p, rows, g, stride_wn, stride_sn, acc2, BN, GS, KS, X_F16, ASM)
    acc = tl.where(bad, float("nan"), acc)
    mask = col_ok[:, None] & ok[None, :]
    out_off = r[None, :].to(tl.int64) * N + cols[:, None]
    store_result(out_ptr, out_ptr, out_ptr, out_ptr, acc, acc2, out_off, mask, 0, False, False, HAS_UP, ACT)


# ----------------------------------------------------------------------------- launch plan

MIN_ROWS = 17  # routed rows from which expert calls come here (fewer: the decode mat-vecs)
MP_MAX = 64  # rows of a block at most (the dot's N)
# (BN, warps) by block rows, 3 stages. H200 session 33 run 2 (bench/moe_prefill_sweep.py --configs all, Qwen3-30B-A3B
# at 512 tokens, 32 rows an expert on average, us with 90 us of the sort this replaced): gate/up pair MP 32 / BN 64 /
# 4 warps 250.0 (MP 64: 260.0; BN 128 / 8 warps 254.2; 8 warps on BN 64 334-444; 2 stages 3-17% slower), down MP 64 /
# BN 128 / 8 warps 187.9 (MP 32 193.5; BN 64 / 4 warps 197.0-200.1; MP 16 216-228).
CONFIG = {16: (64, 4), 32: (128, 8), 64: (128, 8)}
CONFIG_UP = {16: (64, 4), 32: (64, 4), 64: (64, 4)}
STAGES = 3
CONFIG_OVERRIDE: Optional[tuple] = None  # (MP, BN, warps, stages) for sweeps (bench/moe_prefill_sweep.py)


def block_rows(n_rows: int, n_experts: int) -> int:
    """Rows of a block (``MP``): the mean rows per expert as a power of two from 16, at most ``MP_MAX`` (a block is
    one pass over its expert's weights; rows past an expert's count are padding)."""
    return max(16, min(MP_MAX, triton.next_power_of_2(math.ceil(n_rows / max(1, n_experts)))))


def step_groups(fmt: int, k: int, group_size: int) -> int:
    """Groups per loop step (``GPS``): Q4_K half a super-block; MLX the widest step of whole groups of at most
    ``mmv.MMV_STEP_ROWS`` codes dividing ``k``."""
    if fmt == Q4_K.value:
        return mmv.Q4_K_GPS // 2
    step = mmv.MMV_STEP_ROWS
    while step > group_size and k % step:
        step //= 2
    return max(1, step // group_size)


def supports(fmt: int, n_rows: int, k: int, x_dtype: torch.dtype, bits: int = 4, group_size: int = 32,
             scale_dtype: Optional[torch.dtype] = None, scale_stride: int = 0) -> bool:
    """Whether an expert call of ``n_rows`` routed rows comes here: MLX affine 4-bit (``fmt`` ``gemv.AFFINE``,
    group size 32 / 64 / 128, scales / biases in x's dtype, an even ``scale_stride`` = N K / group_size per
    expert) or GGUF Q4_K (``k`` a multiple of 256), bf16 / fp16 x, at least ``MIN_ROWS`` rows;
    ``MLX_NATIVE_MMV=off`` turns it off."""
    if env.settings.mmv == "off" or n_rows < MIN_ROWS or x_dtype not in (torch.bfloat16, torch.float16):
        return False
    if fmt == Q4_K.value:
        return k % 256 == 0
    return (fmt == AFFINE.value and bits == 4 and group_size in (32, 64, 128) and k % group_size == 0
            and scale_dtype == x_dtype and scale_stride % 2 == 0)


class GroupedLaunch:
    """:func:`grouped_mmv_kernel` for ``n_rows`` routed rows against experts stacked ``[E, n, k]`` (contiguous).

    Args:
        fmt: ``gemv.AFFINE`` or GGUF ``Q4_K``'s type id. x_div: routed rows per x row. strides: ``(stride_xm,
            stride_we, stride_wn, stride_se, stride_sn)`` (MLX: words and scale elements; Q4_K: bytes, the scale
            strides unused). act: ``qmm.ACT_CODES`` code of a fused gate/up pair (``None``: one matrix).
            has_xrow: the calls give each routed row's x row (``xrow``) instead of ``x_div``.

    Call with ``(x, erow, args, args_up=None, xrow=None)`` (``erow [n_rows]`` expert of each routed row; ``args``
    the experts: MLX ``(w, scales, biases)``, Q4_K ``(raw,)``; ``args_up`` the up projection's) -> ``[n_rows, n]``.
    """

    def __init__(self, fmt: int, n: int, k: int, group_size: int, n_rows: int, n_experts: int, x_div: int,
                 x_dtype: torch.dtype, strides: tuple, device, act: Optional[int] = None, has_xrow: bool = False):
        has_up = act is not None
        mp = block_rows(n_rows, n_experts)
        bn, warps = (CONFIG_UP if has_up else CONFIG)[mp]
        stages = STAGES
        if CONFIG_OVERRIDE is not None:
            mp, bn, warps, stages = CONFIG_OVERRIDE
        self.mp, self.n, self.n_rows, self.n_experts = mp, n, n_rows, n_experts
        self.x_dtype, self.device, self.fmt = x_dtype, device, fmt
        stride_xm = strides[0]
        self.x_copy = stride_xm % 2 == 1  # x is read as int32 words: rows of an odd stride are copied
        if self.x_copy:
            stride_xm = k
        self.ints = (n, k, stride_xm, x_div, *strides[1:], n_experts)
        gs = 32 if fmt == Q4_K.value else group_size
        self.grouping = RowGrouping(n_rows, n_experts, mp, device)
        self.launch = Launch(grouped_mmv_kernel, (triton.cdiv(n, bn), self.grouping.max_blocks), dict(
            FMT=fmt, BN=bn, GS=gs, MP=mp, GPS=step_groups(fmt, k, group_size), X_F16=x_dtype == torch.float16,
            HAS_UP=has_up, ACT=act or 0, ASM=not env.settings.triton_interpret, HAS_XROW=has_xrow), num_warps=warps,
            num_stages=stages)

    def __call__(self, x, erow, args, args_up=None, xrow=None) -> torch.Tensor:
        rows, bexp, _ = self.grouping(erow)
        x = x.contiguous() if self.x_copy else word_aligned(x)
        w, s, b = self._operands(args)
        w2, s2, b2 = (w, s, b) if args_up is None else self._operands(args_up)
        out = empty((self.n_rows, self.n), dtype=self.x_dtype, device=self.device)
        self.launch(x, rows, bexp, rows if xrow is None else xrow, w, s, b, w2, s2, b2, out, *self.ints)
        return out

    def _operands(self, args: tuple) -> tuple:
        """The kernel's ``(w, s, b)`` pointers: MLX words and word-aligned scales / biases; Q4_K the raw bytes."""
        if self.fmt == AFFINE.value:
            w, s, b = args
            return w, word_aligned(s), word_aligned(b)
        return args * 3


# ----------------------------------------------------------------------------- other formats: dequantized chunks


@triton.jit(do_not_specialize=["e_lo", "e_hi"])
def grouped_dense_kernel(
    x_ptr,  # [X, K] activations, bf16 / fp16 (row stride stride_xm)
    rows_ptr, bexp_ptr, xrow_ptr,  # as grouped_mmv_kernel's (RowGrouping; HAS_XROW: x row of each routed row)
    w_ptr, w2_ptr,  # [e_hi - e_lo, N, K] dequantized weights of experts [e_lo, e_hi) in x's dtype (w2: up projection)
    out_ptr,  # [R, N]
    N, K, stride_xm, x_div, e_lo, e_hi, n_experts,
    BN: tl.constexpr, BK: tl.constexpr, MP: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr,
    HAS_XROW: tl.constexpr = False,
):
    """The blocks of experts ``[e_lo, e_hi)`` (the others exit; the invalid bucket's NaN rows come with the chunk
    of expert 0): ``out[r] = x[r // x_div] @ W_e.T`` over tiles of ``BK`` columns, one tensor-core dot each."""
    pid_n = tl.program_id(0)
    blk = tl.program_id(1)
    e = tl.load(bexp_ptr + blk)
    bad = e == n_experts
    if (e > n_experts) | ((e != n_experts) & ((e < e_lo) | (e >= e_hi))) | (bad & (e_lo > 0)):
        return
    e = tl.where(bad, 0, e - e_lo).to(tl.int64)
    m = tl.arange(0, MP)
    r = tl.load(rows_ptr + blk * MP + m)
    ok = r >= 0
    r = tl.where(ok, r, 0)
    xrow = x_ptr + _x_rows(xrow_ptr, r, x_div, HAS_XROW)[None, :] * stride_xm
    cols = pid_n * BN + tl.arange(0, BN)
    col_ok = cols < N
    wrow = e * N * K + tl.where(col_ok, cols, 0).to(tl.int64)[:, None] * K
    acc = tl.zeros([BN, MP], dtype=tl.float32)
    acc2 = tl.zeros([BN, MP], dtype=tl.float32)
    kk = tl.arange(0, BK)
    for k0 in range(0, K, BK):
        k_ok = k0 + kk < K
        xt = tl.load(xrow + (k0 + kk)[:, None], mask=k_ok[:, None] & ok[None, :], other=0.0)  # [BK, MP]
        wt = tl.load(w_ptr + wrow + (k0 + kk)[None, :], mask=k_ok[None, :], other=0.0)
        acc = tl.dot(wt, xt, acc)
        if HAS_UP:
            acc2 = tl.dot(tl.load(w2_ptr + wrow + (k0 + kk)[None, :], mask=k_ok[None, :], other=0.0), xt, acc2)
    acc = tl.where(bad, float("nan"), acc)
    out_off = r[None, :].to(tl.int64) * N + cols[:, None]
    store_result(out_ptr, out_ptr, out_ptr, out_ptr, acc, acc2, out_off, col_ok[:, None] & ok[None, :], 0, False,
                 False, HAS_UP, ACT)


# Dequantized bytes of experts per chunk (the workspace, with an up projection's, never grows past this).
CHUNK_BYTES = 128 << 20
# BN, BK, warps, stages. H200 session 34 run 4 (bench/moe_formats_sweep.py --dense, Qwen3-30B-A3B Q6_K / Q8_0 at 512 and
# 2048 tokens): BN 128 (4 or 8 warps) 0-5% faster on the down projection at 2048 tokens, 2-13% slower on the gate/up
# pair; BK 128 4-25% slower, 4 stages -3 to +3%. The chunk's dequantized weights are streamed: none moves it much.
DENSE_CONFIG = (64, 64, 4, 3)


def dense_supports(n_rows: int, x_dtype: torch.dtype) -> bool:
    """Expert calls of any format past the decode kernels (:class:`DequantGroupedLaunch`): bf16 / fp16 x, at least
    ``MIN_ROWS`` rows (``MLX_NATIVE_MMV=off`` turns it off)."""
    return env.settings.mmv != "off" and n_rows >= MIN_ROWS and x_dtype in (torch.bfloat16, torch.float16)


def grouped_launch(fmt: int, n: int, k: int, n_rows: int, n_experts: int, x_div: int, x_dtype: torch.dtype,
                   strides: tuple, device, dequant, act: Optional[int] = None, has_xrow: bool = False,
                   bits: int = 4, group_size: int = 32, scale_dtype: Optional[torch.dtype] = None):
    """The expert-grouped launch of an expert call past decode, or None (the caller's tiled kernel):
    :class:`GroupedLaunch` where :func:`supports` takes the format, else :class:`DequantGroupedLaunch` where
    :func:`dense_supports` does. ``fmt``: ``gemv.AFFINE`` or the GGUF type id; ``strides`` as :class:`GroupedLaunch`
    takes them; ``dequant``: the chunk dequantizer of :class:`DequantGroupedLaunch`. Both launches take
    ``(x, erow, args, args_up, xrow=None)``."""
    if supports(fmt, n_rows, k, x_dtype, bits, group_size, scale_dtype, strides[3]):
        return GroupedLaunch(fmt, n, k, group_size, n_rows, n_experts, x_div, x_dtype, strides, device, act, has_xrow)
    if dense_supports(n_rows, x_dtype):
        return DequantGroupedLaunch(n, k, n_rows, n_experts, x_div, x_dtype, strides[0], device, dequant, act,
                                    has_xrow)
    return None


class DequantGroupedLaunch:
    """Routed rows on experts of a format without :func:`grouped_mmv_kernel` (GGUF Q6_K, Q8_0, Q5_K, ...; MLX affine
    of other bits or fp32 scales): the experts are dequantized to x's dtype a chunk at a time (at most
    ``CHUNK_BYTES``) and :func:`grouped_dense_kernel` runs the blocks of the chunk's experts. (The tiled kernel
    that had these calls took 5.7-28.7 ms for Qwen3-30B-A3B's Q6_K down projection at 128-2048 tokens on the
    H200, session 33 run 4.)

    Args:
        dequant: ``(args, r0, r1, ws)`` writes rows ``r0:r1`` of the expert stack ``args`` (its experts' ``n`` rows
            one after the other) into the first ``r1 - r0`` rows of ``ws [*, k]`` in x's dtype, as
            ``qmm.ChunkedPrefill``'s (``quant.kernel.rows_dequantizer``, ``ggml.kernel.rows_dequantizer``). Other
            args as :class:`GroupedLaunch`'s, ``strides`` only ``stride_xm``.

    Call with ``(x, erow, args, args_up, xrow=None)`` (``args_up`` None without an up projection) -> ``[n_rows, n]``.
    """

    def __init__(self, n: int, k: int, n_rows: int, n_experts: int, x_div: int, x_dtype: torch.dtype, stride_xm: int,
                 device, dequant, act: Optional[int] = None, has_xrow: bool = False):
        has_up = act is not None
        mp = block_rows(n_rows, n_experts)
        bn, bk, warps, stages = DENSE_CONFIG
        self.n, self.k, self.n_rows, self.n_experts = n, k, n_rows, n_experts
        self.x_dtype, self.device = x_dtype, device
        self.dequant = dequant
        per_expert = n * k * torch.empty((), dtype=x_dtype).element_size() * (2 if has_up else 1)
        self.chunk = max(1, min(n_experts, CHUNK_BYTES // per_expert))
        self.grouping = RowGrouping(n_rows, n_experts, mp, device)
        self.ints = (n, k, stride_xm, x_div)
        self.launch = Launch(grouped_dense_kernel, (triton.cdiv(n, bn), self.grouping.max_blocks), dict(
            BN=bn, BK=bk, MP=mp, HAS_UP=has_up, ACT=act or 0, HAS_XROW=has_xrow), num_warps=warps, num_stages=stages)

    def __call__(self, x, erow, args, args_up=None, xrow=None) -> torch.Tensor:
        rows, bexp, _ = self.grouping(erow)
        out = empty((self.n_rows, self.n), dtype=self.x_dtype, device=self.device)
        shape = (min(self.chunk, self.n_experts), self.n, self.k)
        ws = torch.empty(shape, dtype=self.x_dtype, device=self.device)
        ws2 = torch.empty(shape, dtype=self.x_dtype, device=self.device) if args_up is not None else ws
        for e0 in range(0, self.n_experts, self.chunk):
            e1 = min(self.n_experts, e0 + self.chunk)
            self.dequant(args, e0 * self.n, e1 * self.n, ws.view(-1, self.k))
            if args_up is not None:
                self.dequant(args_up, e0 * self.n, e1 * self.n, ws2.view(-1, self.k))
            self.launch(x, rows, bexp, rows if xrow is None else xrow, ws, ws2, out, *self.ints, e0, e1,
                        self.n_experts)
        return out
