"""Decode mat-vec for GGUF Q4_K and Q5_K weights and a few rows of x (2-4), by integer dot products.

``out[m, n] = sum_j d sc_j sum_{k in j} q[n, k] x[m, k] - dmin m_j sum_{k in j} x[m, k]`` over the 32-value
sub-blocks ``j`` of each 256-value super-block (layout in ``q4k_mv.py``), for ``x [M, K]`` (bf16/fp16, unit column
stride, any row stride), the raw Q4_K rows read as int32 words ``[N, K / 256 * 36]``, ``out [M, N]`` (x's dtype).
The integer-dot mat-vec of ``q4k_idot.py`` (one row) for the decode of a few tokens at once, as
``quant/affine_idot_rows.py`` is for MLX affine weights: each program streams its weight tiles once and does the
integer dot of every loop step against all ``M`` rows of x (the tensor-core kernel ``quant/mmv.py`` that took these
calls before costs about four times the one-row time).

Tiles as in ``q4k_idot.py``: two ``[4 * CH, BN]`` word tiles (words 0-3 and 4-7 of a 64-value chunk) plus the
``[4 * CH, BN]`` super-block headers; each thread owns one chunk (two 16-byte loads, two whole sub-blocks) of each
of the program's ``BN`` weight rows and the header of its super-block, the ``CH`` chunks of a loop step (``CH / 4``
super-blocks) on consecutive lanes. Shared by the ``M`` rows of x, per chunk and weight row: the header decode
(``q4k_idot._scales``, ``d sc`` and ``-dmin m`` of the two sub-blocks) and the code bytes of each word
(``w & 0x0F0F0F0F``: four values of sub-block ``2 c``, ``w & 0xF0F0F0F0``: 16 x four values of ``2 c + 1``). Each
row of x: the thread quantizes its 64 values of the row (two chunks of 32, int16 with a power-of-two scale,
``kernels/idot.py``; pairs of consecutive values) and reuses them for the ``BN`` weight rows: 4 ``dp2a`` per word
into two int32 sums, then four FMAs per chunk in fp32 (the chunks' float sums carry Inf / NaN of x, which the
integers cannot).

Rows of x: as in ``affine_idot_rows.py``, the ``M`` rows run as up to four parts of ``R0 > R1 > R2 > R3`` rows,
the binary digits of ``M`` (3 = 2 + 1), each with an accumulator ``[R, CH, BN]`` (rows of x and of the weights in
registers, chunks on the lanes): tensor shapes stay powers of two and no padded row of x is loaded or computed.
x's loads are 16-byte vectors when the row stride is a multiple of 16 (Triton's specialization of the
stride; x contiguous: K, a multiple of 256). A K split stores fp32 partials ``[split, M, N]``; the last split to
arrive on a (row tile, part) counter sums that part's partials in the same launch (``qmm.store_result``). Rows of
whole loop steps only (``q4k_idot.step_warps``).

Cost (offline sm_90 SASS of the loop, local Triton 3.9, ``compile_sass`` of ``scripts/sass_probe.py``; 2 warps, K
4096, no prefetch, bf16 or fp16 x alike; the one-row kernel: 2.6 per code with 4-row tiles, 2.0 with 8):

    ========  =======================  =======================
    rows       8-row tiles              4-row tiles
    ========  =======================  =======================
    M = 2     3.20 per code, 217 reg    4.41, 168 reg
    M = 3     4.56, 255 reg, 57 spill   6.26, 225 reg
    M = 4     5.83, 255 reg, 80 spill   8.20, 244 reg
    ========  =======================  =======================

("spill": local loads and stores per loop step and thread; register prefetch adds 10-40 registers: 35 spills at
M = 2 with 8-row tiles, none with 4-row tiles up to M = 4; parts 2 + 2 for M = 4 spill more than one part of 4).
Each row of x adds its 4 ``dp2a`` per word (0.5 per code), its chunk epilogue (about 0.1) and the quantization of
its 64 values per thread (about 280 instructions: bf16/fp16 -> fp32, abs-max, float sum, rounding FMA, ``prmt``
pairs), shared by the tile's weight rows: 4.4 / BN per code; the header decode and the code bytes (about 0.9 per
code with 8-row tiles) are paid once for all rows. At the H100's bandwidth a code has about 6 instructions of issue
time, so this should stay near memory-bound at M = 2 and cost more from M = 3-4.

Q5_K (``Q5K``): the fifth bits as in ``q4k_idot.py`` (``q4k_idot.codes``: code bytes 4 x / 8 x the codes, made
once for all rows of x). Offline sm_90 SASS (Triton 3.6, 2 warps, K 4096): 4.5 instructions per code at M = 2 with
8-row tiles, 7.5 at M = 4, no spills (``q4k_mv``'s ``MR`` rows that took these calls: 8.4-16.6). The Q4_K kernel
compiles exactly as before.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.dependent import enter
from ...kernels.idot import dp2a
from ...kernels.loads import pinned
from ...runtime.device import device_info
from ..quant.affine_idot import thread_words
from ..quant.affine_idot_rows import RowsLaunch, part_accs, store_parts
from ..quant.affine_mv import MAGIC, row_tile
from . import q4k_idot
from .q4k_idot import _scales, _tiles, codes, tile_offsets, x_chunk
from .q4k_mv import Q4K_ID, Q5K_ID, Q5K_SB_WORDS, SB_WORDS

SBW = tl.constexpr(SB_WORDS)  # 32-bit words per super-block
Q5K_SBW = tl.constexpr(Q5K_SB_WORDS)  # Q5_K


@triton.jit
def _cols(p):
    """``[R, C, 4]`` -> its 4 columns, ``[R, C, 1]`` each (broadcast over a tile's weight rows)."""
    R: tl.constexpr = p.shape[0]
    C: tl.constexpr = p.shape[1]
    a, b = tl.split(tl.reshape(p, (R, C, 2, 2)))  # columns 0 2 / 1 3
    p0, p2 = tl.split(a)
    p1, p3 = tl.split(b)
    return p0[:, :, None], p1[:, :, None], p2[:, :, None], p3[:, :, None]


@triton.jit
def _word_dot(c, p0, p1, acc, ASM: tl.constexpr):
    """``acc [R, CH, BN]`` (int32) plus the integer dot of the code bytes ``c [CH, BN]`` (bytes 0-1 / 2-3) with the
    x pairs ``p0 / p1 [R, CH, 1]`` of every row of x (``kernels/idot.py``; the code bytes are made once for the
    ``R`` rows, the ``dp2a`` operands broadcast to ``[R, CH, BN]``)."""
    shape: tl.constexpr = acc.shape
    wm = tl.broadcast_to(c[None, :, :], shape)
    acc = dp2a(tl.broadcast_to(p0, shape), wm, acc, False, ASM)
    return dp2a(tl.broadcast_to(p1, shape), wm, acc, True, ASM)


@triton.jit
def _fifth_bits(qa, qb, q_sh):
    """Each thread's 8 Q5_K fifth-bit words (``qa qb [4 * CH, BN]``: words 0-3 / 4-7 of the super-blocks; bits ``2 c``,
    ``2 c + 1`` of each byte belong to chunk ``c``) moved to bits 6 / 7 by ``<< q_sh`` (``[CH, 1]``, ``6 - 2 c``):
    ``t0 .. t7 [CH, BN]``, fifth-bit word ``w`` beside nibble word ``w``. Unused values compile away (Q4_K)."""
    t0, t1, t2, t3 = thread_words(qa)
    t4, t5, t6, t7 = thread_words(qb)
    return t0 << q_sh, t1 << q_sh, t2 << q_sh, t3 << q_sh, t4 << q_sh, t5 << q_sh, t6 << q_sh, t7 << q_sh


@triton.jit
def _half_dot(w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, p0, p1, p2, p3, zero,
              HI: tl.constexpr, Q5K: tl.constexpr, ASM: tl.constexpr):
    """``zero [R, CH, BN]`` (int32) + the integer dots of one sub-block of each thread's chunk, the code bytes
    (``q4k_idot.codes``) of its 8 nibble words ``w0 .. w7 [CH, BN]`` (low nibbles: sub-block ``2 c``; ``HI``: ``2 c +
    1``; Q5K: fifth bits in ``t0 .. t7``), with the sub-block's x pairs ``p_u [R, CH, 4]`` (values ``8 u .. 8 u +
    7``, consecutive pairs: word ``2 u`` takes columns 0-1, word ``2 u + 1`` columns 2-3)."""
    a0, a1, a2, a3 = _cols(p0)
    acc = _word_dot(codes(w0, t0, HI, Q5K), a0, a1, zero, ASM)
    acc = _word_dot(codes(w1, t1, HI, Q5K), a2, a3, acc, ASM)
    a0, a1, a2, a3 = _cols(p1)
    acc = _word_dot(codes(w2, t2, HI, Q5K), a0, a1, acc, ASM)
    acc = _word_dot(codes(w3, t3, HI, Q5K), a2, a3, acc, ASM)
    a0, a1, a2, a3 = _cols(p2)
    acc = _word_dot(codes(w4, t4, HI, Q5K), a0, a1, acc, ASM)
    acc = _word_dot(codes(w5, t5, HI, Q5K), a2, a3, acc, ASM)
    a0, a1, a2, a3 = _cols(p3)
    acc = _word_dot(codes(w6, t6, HI, Q5K), a0, a1, acc, ASM)
    return _word_dot(codes(w7, t7, HI, Q5K), a2, a3, acc, ASM)


@triton.jit
def _part_step(acc, w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, S0, nB0, S1, nB1, x_ptr, x_off,
               stride_x, ROW0: tl.constexpr, Q5K: tl.constexpr, ASM: tl.constexpr):
    """``acc [R, CH, BN]`` + one loop step of the x rows ``ROW0 .. ROW0 + R - 1`` (at ``x_ptr + row * stride_x +
    x_off``, ``x_off [CH, 8]``: value 0 of each thread's chunk) against the nibble words ``w0 .. w7 [CH, BN]`` of
    each thread's chunk (``Q5K``: fifth bits ``t0 .. t7``), with the sub-blocks' ``d sc`` / ``-dmin m`` ``S0 nB0
    S1 nB1 [CH, BN]``. One sub-block after the other (quantize x, dot, fold into ``acc``), so that one int32 sum per
    row pair is live at a time."""
    R: tl.constexpr = acc.shape[0]
    xo = (tl.arange(0, R) + ROW0)[:, None, None] * stride_x + x_off[None, :, :]
    zero = tl.zeros(acc.shape, dtype=tl.int32)
    p0, p1, p2, p3, scale, xsum = x_chunk(x_ptr, xo, ASM)  # values 0-31: sub-block 2 c
    dot = _half_dot(w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, p0, p1, p2, p3, zero, False, Q5K,
                    ASM)
    if Q5K:  # the code bytes are 4 x the codes (Q4_K: 1 x)
        scale = scale * 0.25
    acc = tl.fma(S0[None, :, :] * scale[:, :, None], dot.to(tl.float32), acc)
    acc = tl.fma(nB0[None, :, :], xsum[:, :, None], acc)
    p0, p1, p2, p3, scale, xsum = x_chunk(x_ptr + 32, xo, ASM)  # values 32-63: sub-block 2 c + 1
    dot = _half_dot(w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, p0, p1, p2, p3, zero, True, Q5K,
                    ASM)
    acc = tl.fma(S1[None, :, :] * (scale * (0.125 if Q5K else 0.0625))[:, :, None], dot.to(tl.float32), acc)
    return tl.fma(nB1[None, :, :], xsum[:, :, None], acc)


@triton.jit
def _step(acc0, acc1, acc2, acc3, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr, x_off, stride_x,
          R1: tl.constexpr, R2: tl.constexpr, R3: tl.constexpr, Q5K: tl.constexpr, ASM: tl.constexpr):
    """The accumulators of the four parts + one loop step: words 0-3 / 4-7 of each thread's chunk ``wa wb
    [4 * CH, BN]``, headers ``h [4 * CH, BN]`` of their super-blocks (``sa sh keep``: see ``q4k_idot._scales``), x
    at ``x_ptr + row * stride_x + x_off``; the parts of 0 rows stay as they are. ``Q5K``: the fifth-bit words
    ``qa qb`` of the super-blocks (:func:`_fifth_bits`, ``q_sh``)."""
    R0: tl.constexpr = acc0.shape[0]
    S0, nB0, S1, nB1 = _scales(h, sa, sh, keep, magic)
    w0, w1, w2, w3 = thread_words(wa)
    w4, w5, w6, w7 = thread_words(wb)
    t0, t1, t2, t3, t4, t5, t6, t7 = _fifth_bits(qa, qb, q_sh)  # Q4_K: unused
    acc0 = _part_step(acc0, w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, S0, nB0, S1, nB1, x_ptr,
                      x_off, stride_x, 0, Q5K, ASM)
    if R1 > 0:
        acc1 = _part_step(acc1, w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, S0, nB0, S1, nB1,
                          x_ptr, x_off, stride_x, R0, Q5K, ASM)
    if R2 > 0:
        acc2 = _part_step(acc2, w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, S0, nB0, S1, nB1,
                          x_ptr, x_off, stride_x, R0 + R1, Q5K, ASM)
    if R3 > 0:
        acc3 = _part_step(acc3, w0, w1, w2, w3, w4, w5, w6, w7, t0, t1, t2, t3, t4, t5, t6, t7, S0, nB0, S1, nB1,
                          x_ptr, x_off, stride_x, R0 + R1 + R2, Q5K, ASM)
    return acc0, acc1, acc2, acc3


@triton.jit(do_not_specialize=["steps_per_split", "magic"])
def q4k_idot_rows_kernel(
    x_ptr,  # [M, K] activations, bf16 or fp16, row stride stride_x
    w_ptr,  # [N, K / 256 * 36] int32 words of the raw Q4_K rows
    out_ptr,  # [M, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, M, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN) * parts] int32 arrival counters, one per row tile and part (FUSE)
    N, stride_x, steps_per_split, magic,
    STRIDE_W: tl.constexpr, BN: tl.constexpr, CH: tl.constexpr, EVEN_N: tl.constexpr, PREFETCH: tl.constexpr,
    SPLIT_K: tl.constexpr, FUSE: tl.constexpr, ASM: tl.constexpr,
    R0: tl.constexpr, R1: tl.constexpr = 0, R2: tl.constexpr = 0, R3: tl.constexpr = 0,
    PDL: tl.constexpr = False, Q5K: tl.constexpr = False,
):
    """Steps of ``CH`` chunks (``CH / 4`` super-blocks, ``64 * CH`` values of each row of x); ``K / 256`` is a whole
    number of steps and of ``steps_per_split``. The rows of x are ``R0 > R1 > R2 > R3`` (powers of two, or 0: no
    such part), ``M = R0 + R1 + R2 + R3``. ``Q5K``: the rows are Q5_K (``[N, K / 256 * 44]`` words)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    STEP_W: tl.constexpr = CH // 4 * (Q5K_SBW if Q5K else SBW)  # words of a row per loop step
    PARTS: tl.constexpr = (R0 > 0) + (R1 > 0) + (R2 > 0) + (R3 > 0)
    rows, row_ok = row_tile(N, BN, EVEN_N)
    sa, sh, keep, q_sh, h_off, w_off, x_off = tile_offsets(rows, STRIDE_W, CH, Q5K)  # as q4k_idot_kernel's
    i_lo = pid_k * steps_per_split
    i_hi = i_lo + steps_per_split
    acc0, acc1, acc2, acc3 = part_accs(R0, R1, R2, R3, CH, BN)
    wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, i_lo * STEP_W, Q5K)
    if PREFETCH:
        for s in range(i_lo, i_hi):  # this step's tiles taken at its top (kernels.loads.pinned)
            wa_s, wb_s, h_s = pinned(wa, ASM), pinned(wb, ASM), pinned(h, ASM)
            qa_s, qb_s = pinned(qa, ASM), pinned(qb, ASM)  # Q4_K: unused
            nxt = tl.minimum(s + 1, i_hi - 1)  # the last step reloads itself
            wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, nxt * STEP_W, Q5K)
            acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, wa_s, wb_s, h_s, qa_s, qb_s, sa, sh, keep, q_sh,
                                           magic, x_ptr + s * (CH * 64), x_off, stride_x, R1, R2, R3, Q5K, ASM)
    else:
        acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic,
                                       x_ptr + i_lo * (CH * 64), x_off, stride_x, R1, R2, R3, Q5K, ASM)
        for s in range(i_lo + 1, i_hi):
            wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, s * STEP_W, Q5K)
            acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic,
                                           x_ptr + s * (CH * 64), x_off, stride_x, R1, R2, R3, Q5K, ASM)
    store_parts(out_ptr, part_ptr, cnt_ptr + pid_n * PARTS, acc0, acc1, acc2, acc3, pid_n, row_ok, N, R1, R2, R3,
                SPLIT_K, FUSE)


# ----------------------------------------------------------------------------- launch plans

# From the H100 sweep (bench/gguf_mv_sweep.py --types Q4_K --rows 2,3,4, bench/results/2026-11-25-h100-session17/
# run2): 8-row weight tiles where they give at least BIG_TILES_PER_SM tiles per SM (K 4096 x N 14336: M = 2 / 3 / 4
# 24.6 / 35.6 / 39.0 us against 31.1 / 40.9 / 48.8 with 4 rows; x's quantization, 4 / BN instructions per code and
# row of x, is the largest per-row cost), else 4-row tiles (14336 x 4096, 512 tiles of 8 rows: M = 2 / 3 29.3 /
# 36.7 us against 33.4 / 43.4); the tensor-core kernel took 65-76 us. The one-row kernel's warps (2 where K
# allows); a K split only below one program per SM (1 or 2 per SM: within 0.2%); register prefetch by the rule
# below (its double tiles cost registers next to M rows of accumulators: 255 and spills at 8-row tiles). From 3
# rows the tensor-core kernel with packed tiles (quant/mmv.py, session 19 run 6: K 4096 x N 14336 / 14336 x 4096
# at 2-16 rows 33-34 / 30-31 us) beats these (3 rows 35.6 / 36.7, 4 rows 39.0 / 49.7 us).
IDOT_ROWS_MAX = 2
# Q5_K has no tensor-core kernel: 2-4 rows here, the same tile rules (session 36 run 3, H200, us, q4k_mv's MR rows ->
# these; M 2 / 3 / 4): 4096 x 14336 42.5 / 61.7 / 75.9 -> 28.9 / 38.5 / 48.8, 14336 x 4096 52.8 / 67.1 / 81.0 ->
# 29.9 / 39.7 / 64.3, 4096 x 4096 17.1 / 21.1 -> 12.8 / 17.6 (M 2 / 3); the other tile sizes were slower or equal.
Q5K_ROWS_MAX = 4
IDOT_ROWS_BN = 8  # weight rows per program ...
IDOT_ROWS_SMALL_BN = 4  # ... with fewer than BIG_TILES_PER_SM of them per SM
BIG_TILES_PER_SM = 8
PROGRAMS_PER_SM = 1  # split K only below one program per SM
PREFETCH_MIN_WEIGHTS = 1 << 23  # register prefetch from this N x K ...
PREFETCH_BELOW_ROWS_PER_SM = 40  # ... with fewer output rows than this per SM. Session 30 run 2 (H100, M2, us, off
# / on): K x N 4096 x 2048 6.80 / 5.87, 4096 x 4096 12.6 / 10.8, 14336 x 4096 29.2 / 27.6, 14336 x 1024 17.0 /
# 16.2 (14336 x 2048 20.5 / 22.6); smaller: 4096 x 1024 4.24 / 4.38, 2048 x 2048 3.74 / 4.08; more rows: 4096 x
# 6144 14.6 / 15.9, 4096 x 14336 24.5 / 38.8 (from 3 << 22 weights 2 rows go to quant/mmv.py unless
# MLX_NATIVE_MMV=off: mmv.over_idot_rows)


def tile_rows(n: int, sms: int) -> int:
    """Weight rows per program for ``n`` output rows on ``sms`` SMs (see the sweep above)."""
    return IDOT_ROWS_BN if triton.cdiv(n, IDOT_ROWS_BN) >= BIG_TILES_PER_SM * sms else IDOT_ROWS_SMALL_BN


def step_warps(k: int) -> int:
    """Warps per program for rows of ``k`` columns: the one-row kernel's (``q4k_idot.step_warps``, 8 super-blocks
    of a row per warp and step; 0: no whole step)."""
    return q4k_idot.step_warps(k)


def supports_rows(ggml_type: int, x_dtype: torch.dtype, out_dtype: torch.dtype, m: int, k: int,
                  raw_bytes: int) -> bool:
    """``2 <= m <= IDOT_ROWS_MAX`` rows of bf16/fp16 x against Q4_K rows (``Q5K_ROWS_MAX``: Q5_K) that one row would
    send to the integer-dot
    mat-vec (:func:`q4k_idot.supports`: a bf16/fp16 result, rows of whole steps, ``raw_bytes < 2**31``;
    ``MLX_NATIVE_GGML_IDOT=0`` and ``MLX_NATIVE_GGUF_MV=0`` turn it off). Rows of x must also satisfy
    ``(m - 1) * row_stride + k < 2**31`` (int32 offsets; :class:`Q4kIdotRowsLaunch` refuses others)."""
    most = {Q4K_ID: IDOT_ROWS_MAX, Q5K_ID: Q5K_ROWS_MAX}.get(ggml_type, 0)
    return 2 <= m <= most and q4k_idot.supports(ggml_type, x_dtype, out_dtype, 1, k, raw_bytes, pairs=True)


class Q4kIdotRowsLaunch(RowsLaunch):
    """:func:`q4k_idot_rows_kernel` for ``(x [m, k] with row stride x_row_stride and unit column stride,
    raw [n * k / 256 * 144] uint8)``, the raw rows read as int32 words; calls return ``[m, n]`` of ``out_dtype``.
    Loop steps of ``2048 warps`` values, split over K to about ``programs_per_sm`` programs per SM
    (:class:`~mlx_native.ops.quant.affine_idot_rows.RowsLaunch`). ``bn``, ``warps``, ``programs_per_sm``,
    ``prefetch``: the sweep's knobs (0 / None: the module's rules)."""

    q5k = False  # Q5_K rows (:class:`Q5kIdotRowsLaunch`)

    def __init__(self, m: int, n: int, k: int, out_dtype: torch.dtype, x_row_stride: int, device, bn: int = 0,
                 warps: int = 0, programs_per_sm: int = 0, prefetch: Optional[bool] = None):
        if (m - 1) * x_row_stride + k >= 2**31:
            raise ValueError(f"q4k_idot_rows: x rows of stride {x_row_stride} past int32 offsets")
        sms = device_info(device).sm_count
        warps = warps or step_warps(k)
        if prefetch is None:
            prefetch = n * k >= PREFETCH_MIN_WEIGHTS and n < PREFETCH_BELOW_ROWS_PER_SM * sms
        super().__init__(q4k_idot_rows_kernel, m, n, bn or tile_rows(n, sms), k // 256 // (8 * warps), warps,
                         (programs_per_sm or PROGRAMS_PER_SM) * sms, prefetch, (n, x_row_stride), (MAGIC,),
                         dict(STRIDE_W=k // 256 * (Q5K_SB_WORDS if self.q5k else SB_WORDS), Q5K=self.q5k),
                         out_dtype, device, trigger=True)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(x, raw.view(torch.int32))


class Q5kIdotRowsLaunch(Q4kIdotRowsLaunch):
    """:class:`Q4kIdotRowsLaunch` for Q5_K rows (``raw [n * k / 256 * 176] uint8``)."""

    q5k = True
