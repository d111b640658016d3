"""Decode mat-vec for MLX affine 3-, 5- and 6-bit weights and one row of x, streamed like ``affine_mv.py``.

``out[n] = sum_g S[n, g] * sum_{k in g} q[n, k] x[k] + B[n, g] * sum_{k in g} x[k]``

MLX packs a row's codes as one little-endian bit stream (code ``k`` at bits ``[k b, (k + 1) b)``, ``b`` = BITS)
stored as int32 words, so a code may straddle two words; the pattern repeats every ``b`` words. A *unit* is 32
codes = ``b`` consecutive words (12 / 20 / 24 bytes, 4-byte aligned; 6-bit units 8-byte aligned); a scale group
holds ``GS / 32`` units.

Tiles are ``[T, W, RT]``: ``T`` units of a row (one per thread and row) on adjacent lanes, then the remaining
lanes and the warps on ``W`` groups of ``RT`` rows, the ``RT`` rows of each thread in registers (``BN = W RT``
rows a program, row ``w RT + r`` at ``[:, w, r]``); a loop step is ``T`` units of each row. The words of a unit
are ``b`` loads at a lane stride of ``b`` words (6-bit: ``b / 2`` 8-byte loads), each load instruction reading
every ``b``-th word of a contiguous run, the ``b`` loads of the unit together the whole run (the later ones from
L1); scales and biases are loaded per unit (the lanes of one group load the same address). x comes as
``[T, W, 4]`` int32 words (the same for every ``W``, so that it has 8 values per thread and each thread loads
its unit's 8 values at once: four 16-byte loads per unit, shared by the thread's rows). Row offsets are int64
from the tile's first row, split into a per-thread base and per-register constants, so that a step costs one
address per pointer and thread and every row and word is an immediate offset. Triton 3.6's coalescing finds no
contiguous axis in the word loads and keeps the axes in order (lanes on ``T``, warps on ``W``, ``RT`` in
registers); the x loads, contiguous along their last axis only, get the same layout for the others, so every
``convert_layout`` left in the loop's TTGIR is between equivalent layouts (the loop's SASS has no shared-memory
access, shuffle or barrier other than ``FENCE``).

Decoding, per unit and row: the ``b`` words give ``2 b`` 32-bit *windows* at bits ``16 h`` of the unit (even
windows: the words; odd ones ``w_i >> 16 | w_{i+1} << 16``, one funnel shift, the last one ``w_{b-1} >> 16``),
so code ``c`` (bit ``p = c b`` of the unit) lies in window ``p // 16`` at a constant offset ``s = p % 16`` <= 15
(its top bit <= 21, straddling codes included): one LOP3 ``(W & (2**b - 1) << s) | 0x4B000000`` (the fp32
``2**23 + q 2**s``; the magic number a runtime value), one FMA ``f 2**-s - 2**(23 - s)`` = ``q`` exactly (an
FADD for ``s = 0``), one FMA into ``a = sum q x``. Per unit and row ``acc += S a + B xs`` (``xs``: the unit's
x sum, shared by the thread's rows); x values are one shift / mask each (``kernels.words.x_pair``).

The loop runs two steps an iteration (as ``ggml/q6k_mv.py``): each step's words, scales and biases are loaded
before the step ahead of it is decoded (register prefetch) into registers that step released, so no copies
follow each step; the second step is skipped past the split's end and the last loads of a split reload its
last step. ``FENCE`` puts a CTA barrier after each batch of loads, without which ptxas sinks them next to
their use. A K split is summed in the same launch (``qmm.store_result``).

Offline sm_90 SASS (Triton 3.6 / ptxas of its wheel, K = 4096 or 14336, GS = 64, bf16 x and scales, T = 32,
FENCE, the two-step loop): 3-bit with RT = 8 3.79 instructions per code (168 registers), 5-bit and 6-bit with
RT = 4 4.35 / 4.29 (128 registers); 3-bit with RT = 4 4.27 (96 registers), 5 / 6 bits with RT = 8 3.94 / 3.80
(255 registers); fp16 x +0.01-0.03; no spills. The 64 ``convert_layout`` in the loop's TTGIR (the x planes
and their splits) lower to nothing: no shared memory, shuffle or barrier besides the two fences in the loop.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter
from ...kernels.loads import last_split, load_or_zero, tail_mask
from ...kernels.words import word_aligned, x_pair
from .affine_mv import code_f32, row_tile
from .qmm import store_result


@triton.jit
def _windows(ws, BITS: tl.constexpr):
    """The ``2 BITS`` windows of a unit's words ``ws`` (a tuple of ``BITS`` int32 tensors): window ``h`` holds
    bits ``[16 h, 16 h + 32)`` of the unit (zeros past its end)."""
    win = ()
    for i in tl.static_range(BITS):
        lo = (ws[i] >> 16) & 0xFFFF
        if i + 1 < BITS:
            win = win + (ws[i], lo | (ws[i + 1] << 16))
        else:
            win = win + (ws[i], lo)
    return win


@triton.jit
def _load(w_ptr, s_ptr, b_ptr, w_off, s_off, j, BITS: tl.constexpr, UPG: tl.constexpr, PAIRS: tl.constexpr,
          mask=None):
    """The words (a tuple of ``BITS`` ``[T, W, RT]`` tensors: word ``i`` of each unit), scales and biases of the
    step at unit ``j`` (0 where ``mask [T, 1, 1]`` is False); ``PAIRS``: the words as 8-byte pairs (even BITS)."""
    wp = (w_ptr + j * BITS) + w_off  # the scalar step offset first: one address per thread, rows as immediates
    ws = ()
    if PAIRS:
        for i in tl.static_range(BITS // 2):
            lo, hi = tl.split(load_or_zero(wp[:, :, :, None] + (2 * i + tl.arange(0, 2))[None, None, None, :],
                                           None if mask is None else mask[:, :, :, None]))
            ws = ws + (lo, hi)
    else:
        for i in tl.static_range(BITS):
            ws = ws + (load_or_zero(wp + i, mask),)
    S = load_or_zero((s_ptr + j // UPG) + s_off, mask)
    B = load_or_zero((b_ptr + j // UPG) + s_off, mask)
    return ws, S, B


@triton.jit
def _step(acc, ws, S, B, xp, magic, BITS: tl.constexpr, X_BF16: tl.constexpr, x_mask=None):
    """``acc [T, W, RT]`` + one step: the units' words ``ws``, scales and biases ``S, B``; ``xp`` ``[T, W, 4]``
    pointers to the first 4 int32 words of x (8 values) of each unit (the same for every ``W``; 0 where ``x_mask``
    is False)."""
    win = _windows(ws, BITS)
    for c8 in tl.static_range(4):  # codes 8 c8 .. 8 c8 + 7
        xw = load_or_zero(xp + 4 * c8, x_mask)
        e, o = tl.split(tl.reshape(xw, (xw.shape[0], xw.shape[1], 2, 2)))  # words 0 2 / 1 3
        v0, v2 = tl.split(e)
        v1, v3 = tl.split(o)
        x0, x1 = x_pair(v0, X_BF16)
        x2, x3 = x_pair(v1, X_BF16)
        x4, x5 = x_pair(v2, X_BF16)
        x6, x7 = x_pair(v3, X_BF16)
        xv = (x0[:, :, None], x1[:, :, None], x2[:, :, None], x3[:, :, None], x4[:, :, None], x5[:, :, None],
              x6[:, :, None], x7[:, :, None])
        xc = ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]))
        if c8 == 0:
            xs = xc
        else:
            xs += xc
        for c in tl.static_range(8):  # code 8 c8 + c at bit p = (8 c8 + c) BITS: window p // 16, offset p % 16
            q = code_f32(win[(8 * c8 + c) * BITS // 16], (8 * c8 + c) * BITS % 16, magic, BITS)
            if c8 + c == 0:
                a = q * xv[c]
            else:
                a = tl.fma(q, xv[c], a)
    acc = tl.fma(S.to(tl.float32), a, acc)
    return tl.fma(B.to(tl.float32), xs, acc)


@triton.jit(do_not_specialize=["units_per_split", "magic"])
def affine_mv_odd_kernel(
    x_ptr,  # [K] activations, bf16 or fp16 (read as int32 words of two values: 4-byte aligned)
    w_ptr,  # [N, K * BITS / 32] int32 words (code k at bits [k BITS, (k + 1) BITS) of the row)
    s_ptr, b_ptr,  # [N, K / GS] scales / biases
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, units_per_split, magic,
    BITS: tl.constexpr, N_UNITS: tl.constexpr, GS: tl.constexpr, BN: tl.constexpr, RT: tl.constexpr,
    T: tl.constexpr, EVEN_N: tl.constexpr, PREFETCH: tl.constexpr, FENCE: tl.constexpr, PAIRS: tl.constexpr,
    SPLIT_K: tl.constexpr, FUSE: tl.constexpr,
    PDL: tl.constexpr = False, TAIL: tl.constexpr = 0,
):
    """Units of 32 codes (``BITS`` words): ``N_UNITS = K / 32`` per row, ``T`` per loop step; ``units_per_split``
    is a multiple of ``T``, and ``N_UNITS - TAIL`` of it (whole steps; ``TAIL`` units of a last, partial step,
    run by the last K split with its loads issued before the loop). ``BN = W RT`` rows: tiles ``[T, W, RT]``, row
    ``w RT + r`` at ``[:, w, r]``."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    X_BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    STRIDE_W: tl.constexpr = N_UNITS * BITS  # words per row
    UPG: tl.constexpr = GS // 32  # units per scale group
    STRIDE_S: tl.constexpr = N_UNITS // UPG
    W: tl.constexpr = BN // RT
    pid_n = tl.program_id(0)
    t = tl.arange(0, T)[:, None, None]
    if EVEN_N:  # int64 offsets from the tile's first row: a per-thread base and per-register constants (row r of
        # the thread's RT), folded into the loads' immediate offsets
        w_ptr += (pid_n * BN).to(tl.int64) * STRIDE_W
        s_ptr += (pid_n * BN).to(tl.int64) * STRIDE_S
        b_ptr += (pid_n * BN).to(tl.int64) * STRIDE_S
        rw = (tl.arange(0, W) * RT).to(tl.int64)[None, :, None]  # the thread's first row
        rc = tl.arange(0, RT).to(tl.int64)[None, None, :]
        w_off = (t * BITS + rw * STRIDE_W) + rc * STRIDE_W  # [T, W, RT]: word 0 of unit t
        s_off = (t // UPG + rw * STRIDE_S) + rc * STRIDE_S
    else:  # rows past N read row 0 (not stored)
        rr = pid_n * BN + tl.arange(0, W)[:, None] * RT + tl.arange(0, RT)[None, :]
        rr = tl.where(rr < N, rr, 0).to(tl.int64)[None, :, :]
        w_off = t * BITS + rr * STRIDE_W
        s_off = t // UPG + rr * STRIDE_S
    # [T, W, 4]: the x words (codes 0-7) of unit t, the same for every W (so that a thread loads them at once)
    x_off = tl.broadcast_to(t * 16 + tl.arange(0, 4)[None, None, :], (T, W, 4))
    xw_ptr = x_ptr.to(tl.pointer_type(tl.int32))
    j_lo = tl.program_id(1) * units_per_split
    j_hi = tl.minimum(N_UNITS, j_lo + units_per_split)
    acc = tl.zeros([T, W, RT], dtype=tl.float32)
    last = j_hi - T
    if TAIL:  # the row's last, partial step: its first TAIL units, for the last split
        T0: tl.constexpr = N_UNITS - TAIL  # its first unit (a whole number of scale groups: T is)
        tail = tail_mask(tl.arange(0, T), TAIL, last_split())[:, None, None]
        ws_t, S_t, B_t = _load(w_ptr, s_ptr, b_ptr, w_off, s_off, T0, BITS, UPG, PAIRS, tail)
    ws, S, B = _load(w_ptr, s_ptr, b_ptr, w_off, s_off, j_lo, BITS, UPG, PAIRS)
    if PREFETCH:  # two steps an iteration, each one's operands loaded into the registers the step before released
        for j in range(j_lo, j_hi, 2 * T):
            ws2, S2, B2 = _load(w_ptr, s_ptr, b_ptr, w_off, s_off, tl.minimum(j + T, last), BITS, UPG, PAIRS)
            if FENCE:  # keeps the loads above ahead of the step (ptxas moves no load across a barrier)
                tl.debug_barrier()
            acc = _step(acc, ws, S, B, (xw_ptr + 16 * j) + x_off, magic, BITS, X_BF16)
            ws, S, B = _load(w_ptr, s_ptr, b_ptr, w_off, s_off, tl.minimum(j + 2 * T, last), BITS, UPG, PAIRS)
            if FENCE:
                tl.debug_barrier()
            if j + T < j_hi:
                acc = _step(acc, ws2, S2, B2, (xw_ptr + 16 * (j + T)) + x_off, magic, BITS, X_BF16)
    else:
        acc = _step(acc, ws, S, B, (xw_ptr + 16 * j_lo) + x_off, magic, BITS, X_BF16)
        for j in range(j_lo + T, j_hi, T):
            ws, S, B = _load(w_ptr, s_ptr, b_ptr, w_off, s_off, j, BITS, UPG, PAIRS)
            acc = _step(acc, ws, S, B, (xw_ptr + 16 * j) + x_off, magic, BITS, X_BF16)
    if TAIL:
        acc = _step(acc, ws_t, S_t, B_t, (xw_ptr + 16 * T0) + x_off, magic, BITS, X_BF16, tail)
    res = tl.reshape(tl.sum(acc, axis=0), (BN,))
    _, row_ok = row_tile(N, BN, EVEN_N)
    store_result(out_ptr, part_ptr, part_ptr, cnt_ptr + pid_n, res, res, pid_n * BN + tl.arange(0, BN).to(tl.int64),
                 row_ok, N, SPLIT_K, FUSE, False, 0)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from .affine_mv import MAGIC, StreamedMvLaunch, step_with_tail  # noqa: E402

# From the H100 sweep (bench/odd_bits_sweep.py, bench/results/2026-11-25-h100-session17/run5; rows per thread x
# units per step x programs per SM, g64, bf16): 32 units a step (a warp reads 384 / 640 / 768 contiguous bytes of a
# row's 3- / 5- / 6-bit words per word load), the 4 warps on row groups, register prefetch with the fence (like
# Q8_0's), K split until about 2 programs per SM, 4 rows per thread. K x N 4096 x 14336 / 14336 x 4096: 3-bit 15.7 /
# 16.9 us (57 / 52% of copy; 8 rows a thread, the offline SASS favourite at 3.8 instructions a code, took 18.0 /
# 21.6), 5-bit 19.6 / 20.6 (71 / 68%), 6-bit 22.2 / 22.3 (74%); the general kernel took 164-191 us and bf16
# cuBLAS 42-45. The best of the 12 variants was within 3% of these except 6-bit 4096 x 14336 (20.8 us with 2 rows
# a thread and 16-unit steps, but 23.0 on 14336 x 4096).
ODD_MAX_T = 32  # units (32 codes) per row and loop step: the most up to this that divide the row (see tiling)
ODD_MIN_T = 8  # rows that take no step of at least this many units are not taken
ODD_RT = {3: 4, 5: 4, 6: 4}  # rows per thread, by bits
ODD_WARPS = 4
ODD_PREFETCH = True
ODD_FENCE = True  # a CTA barrier after each batch of prefetch loads (see the module docstring)
PROGRAMS_PER_SM = 2  # split K until about this many programs per SM
ODD_BITS = (3, 5, 6)


def tile_rows(t: int, rt: int, warps: int = 0) -> int:
    """Rows per program for steps of ``t`` units: the threads left after the units' lanes take rows, ``rt``
    each."""
    return rt * max(1, 32 * (warps or ODD_WARPS) // t)


def supports(bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, m: int, k: int, words: int) -> bool:
    """One row of bf16/fp16 x against MLX affine 3-, 5- or 6-bit weights (``transpose=True``) whose rows take a
    loop step (:func:`tiling`: whole steps, or steps of ODD_MAX_T units and a partial one); ``words``: elements of
    the packed weight (int32 offsets). ``MLX_NATIVE_AFFINE_MV=0`` turns it off (as the 4-bit ``affine_mv``)."""
    return (env.settings.affine_mv and bits in ODD_BITS and transpose and m == 1 and group_size in (32, 64, 128)
            and x_dtype in (torch.bfloat16, torch.float16) and words < 2**31 and tiling(k)[0] > 0)


def tiling(k: int, n: int = 0, sms: int = 0, max_t: int = 0, rt: int = 4, warps: int = 0,
           programs_per_sm: int = 0) -> tuple[int, int]:
    """``(units (32 values) per loop step, units of a last partial step)`` for ``n`` rows of ``k`` columns on
    ``sms`` SMs: the most units, a power of two from ``max_t`` (ODD_MAX_T) down to ODD_MIN_T, that divide the row
    (``(0, 0)`` for rows of none and under ``max_t`` units), or steps of ``max_t`` units and a partial one where
    :func:`~mlx_native.ops.quant.affine_mv.step_with_tail` takes them (K = 11008: 344 units, 8-unit steps -> 10
    steps of 32 and one of 24; 5376 x 4096 keeps 8-unit steps); ``rt``, ``warps``, ``programs_per_sm``: the plan's
    tiles and K-split target."""
    if k % 32:
        return 0, 0
    return step_with_tail(k // 32, max_t or ODD_MAX_T, ODD_MIN_T, lambda t: triton.cdiv(n, tile_rows(t, rt, warps)),
                          (programs_per_sm or PROGRAMS_PER_SM) * sms)


class AffineOddMvLaunch(StreamedMvLaunch):
    """:func:`affine_mv_odd_kernel` for ``(x [1, k] bf16/fp16, w [n, k * bits / 32] int32 or uint32, scales,
    biases [n, k / group_size])``, all contiguous (the row strides are compile-time constants); scales and
    biases of any float dtype; calls return ``[1, n]`` of ``out_dtype``. Knobs (0 / None: the module's
    defaults): ``max_t`` the most units per step, ``rt`` rows per thread, ``programs_per_sm`` the K split's
    target, ``prefetch``, ``fence``, ``warps``."""

    def __init__(self, n: int, k: int, group_size: int, bits: int, out_dtype: torch.dtype, device, max_t: int = 0,
                 rt: int = 0, programs_per_sm: int = 0, prefetch=None, fence=None, warps: int = 0):
        rt, warps = rt or ODD_RT[bits], warps or ODD_WARPS
        t, tail = tiling(k, n, device_info(device).sm_count, max_t, rt, warps, programs_per_sm)
        bn = tile_rows(t, rt, warps)
        target = (programs_per_sm or PROGRAMS_PER_SM) * device_info(device).sm_count
        constexprs = dict(BITS=bits, N_UNITS=k // 32, GS=group_size, BN=bn, RT=rt, T=t, EVEN_N=n % bn == 0,
                          PREFETCH=ODD_PREFETCH if prefetch is None else prefetch,
                          FENCE=ODD_FENCE if fence is None else fence, PAIRS=bits % 2 == 0, TAIL=tail)
        super().__init__(affine_mv_odd_kernel, n, triton.cdiv(n, bn), k // 32 // t, t, target, (n,), constexprs,
                         out_dtype, device, tail_ints=(MAGIC,), num_warps=warps)

    def __call__(self, x, w, s, b, *unused) -> torch.Tensor:
        return self.run(word_aligned(x), w.view(torch.int32) if w.dtype == torch.uint32 else w, s, b)
