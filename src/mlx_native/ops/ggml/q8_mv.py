"""Decode mat-vec for GGUF Q8_0 weights and one to four rows of x, streamed like ``ggml/q4_mv.py``.

A block holds 32 values in 34 bytes: ``d`` (fp16) and 32 int8 codes, value ``= d * q``. Blocks are only 2-byte
aligned, but a pair of them is 68 bytes = 17 32-bit words, so rows of an even number of blocks (``K % 64 ==
0``) keep every pair 4-byte aligned. Words of a pair (A, B): word 0 = ``d_A`` | codes A0 A1 (high half), words
1-7 = codes ``A 4w-2 .. A 4w+1``, word 8 = codes A30 A31 | ``d_B`` (high half), words 9-16 = codes ``B 4(w-9)
.. B 4(w-9)+3``. The kernel streams code words 1-16 (8 per block), the A word that holds A30 A31 taking A0 A1
from word 0's high half in place of ``d_B`` (one bit select): every code word holds 4 codes of one block.

Tiles are ``[L lanes, G pairs, BN rows]``: ``L = 16 / WPL`` lanes per pair, the first half on block A, the
second on B, lane ``m`` of a block taking its code words ``m`` (and ``m + L / 2`` for ``WPL = 2``) and its
block's scale word (word 0 for A, word 8 for B: one load per lane, pair and row, ``d`` from its low / high
half). Triton 3.6's coalescing orders a load's axes by contiguity, ties in axis order: the code words
(contiguous along the lanes) and the scale words and x (``[L, G, 1]``, contiguous nowhere) all get the
order lanes, pairs, rows, hence one layout (lanes on the words and the pairs, warps on the pairs, the rows in
registers): nothing is converted in the loop, and each thread loads its x once for its rows. (Triton 3.9
breaks the ties in reverse axis order: there ``[BN, G, L]`` is the layout-stable shape, and this one
converts the scale words and x through shared memory each step.)

Per code word and row: 4 byte decodes (one LOP3 ``(w & 0xFF << s) ^ (0x80 << s | 2**23)``, the fp32 ``2**23 +
(q + 128) 2**s`` -- bytes 2-3 after a shift or a byte extract -- and one FMA giving ``q`` exactly) and 4 FMAs
into ``a = sum q x``; per lane, pair and row one scale-word load, a shift and a cvt for ``d`` and ``acc += d
a``. Compiled for sm_90 by Triton 3.6 (ptxas 12.8, the default tiles) the loop body is 354 SASS per thread and
64 codes (~5.5 a code, x words, register moves and loop included; 95 registers), 342 without the fence (64
registers); ``WPL = 1`` takes 404 (168 registers). 2-byte units (16 per block, two loads per 4 codes) came to
5.9 a code: the compiler packs the 16-bit values in pairs (a PRMT in and one out). The next step's words are
loaded before the current one is decoded (register prefetch); ``FENCE`` puts a CTA barrier after those loads,
without which ptxas sinks them to the end of the loop body, next to the register moves that consume them, so
that each warp waits for its own loads; a K split is summed in the same launch (``qmm.store_result``).

Rows of x (``MR``, 2 to 4; the one-row code is its own constexpr branch and compiles as before): each code word's
four codes are decoded once, then each row of x costs its x words, 4 FMAs and ``acc += d a`` (offline sm_90 SASS:
7.0 / 8.5 / 9.9 instructions a code for 2 / 3 / 4 rows against 5.55); the rows' results are joined into one
``store_result`` (``affine_mv.store_rows``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter, leave_loop
from ...kernels.loads import last_split, load_or_zero, tail_mask
from ...kernels.words import bit_select, half_lo, word_aligned, x_pair
from ..quant.affine_mv import glu_row_tile, row_tile, store_rows

PAIR_WORDS: tl.constexpr = tl.constexpr(17)  # 32-bit words per pair of blocks


@triton.jit
def _q8(w, S: tl.constexpr, c):
    """fp32 ``q`` of the int8 at bits ``[S, S + 8)`` of ``w`` (``S`` 0 or 8), exactly: ``c = 0x80 << S | 2**23``
    (fp32 bits, a runtime value: mask, sign flip and or are one LOP3) makes the fp32 ``2**23 + (q + 128) 2**S``."""
    f = ((w & (0xFF << S)) ^ c).to(tl.float32, bitcast=True)
    return tl.fma(f, 1.0 / (1 << S), -(8388608.0 / (1 << S) + 128.0))


@triton.jit
def pair_lanes(w_ptr, pid_n, N, STRIDE_W: tl.constexpr, BN: tl.constexpr, EVEN_N: tl.constexpr, L: tl.constexpr,
               G: tl.constexpr, TW: tl.constexpr, UP_ROWS: tl.constexpr = 0):
    """The tiles of kernels that read pairs of blocks (A, B) of ``TW`` words, ``L`` lanes a pair (the first half on
    block A, the second on B), ``G`` pairs a step, ``BN`` rows of ``STRIDE_W`` words: ``(w_ptr, rows, row_ok, b,
    m, p_off)`` with ``b [L]`` each lane's block (0: A, 1: B), ``m [L]`` its index among the block's lanes, and
    ``p_off [1, G, BN]`` int64 word offsets of the step's first pairs from ``w_ptr`` (with ``EVEN_N`` moved to the
    tile's first row, so that the row offsets are constants folded into the loads' addresses). ``UP_ROWS = N > 0``:
    the rows of ``affine_mv.glu_row_tile`` (a gate/up pair of ``N`` rows each; ``N`` a constant, so that with
    ``EVEN_N`` the up rows' offsets fold too)."""
    if UP_ROWS > 0:
        rows, row_ok = glu_row_tile(N, BN, EVEN_N)
        j = tl.arange(0, BN)
        first, tile_rows = pid_n * (BN // 2), j // 2 + (j % 2) * UP_ROWS  # the tile's rows from its first
    else:
        rows, row_ok = row_tile(N, BN, EVEN_N)
        first, tile_rows = pid_n * BN, tl.arange(0, BN)
    if EVEN_N:
        w_ptr += first.to(tl.int64) * STRIDE_W
        r_off = tile_rows.to(tl.int64) * STRIDE_W
    else:
        r_off = rows.to(tl.int64) * STRIDE_W
    li = tl.arange(0, L)
    H: tl.constexpr = L // 2
    p_off = (tl.arange(0, G).to(tl.int64) * TW)[None, :, None] + r_off[None, None, :]
    return w_ptr, rows, row_ok, li // H, li % H, p_off


@triton.jit
def _word_codes(w, c_lo, c_hi):
    """fp32 ``q`` of the 4 int8 codes of the code words ``w`` (bytes 0-3)."""
    hi = w >> 16
    return _q8(w, 0, c_lo), _q8(w, 8, c_hi), _q8(hi, 0, c_lo), _q8(hi, 8, c_hi)


@triton.jit
def _codes_dot(q0, q1, q2, q3, xp, x_lo, x_hi, a, X_BF16: tl.constexpr, x_mask=None):
    """``a + sum_b q_b x_b`` over the 4 codes of a word; x of bytes 0-1 / 2-3 are the words at ``xp + x_lo`` / ``xp
    + x_hi`` ([L, G, 1]; 0 where ``x_mask`` is False)."""
    x0, x1 = x_pair(load_or_zero(xp + x_lo, x_mask), X_BF16)
    x2, x3 = x_pair(load_or_zero(xp + x_hi, x_mask), X_BF16)
    a = tl.fma(q0, x0, a)
    a = tl.fma(q1, x1, a)
    a = tl.fma(q2, x2, a)
    return tl.fma(q3, x3, a)


@triton.jit
def _word_dot(w, xp, x_lo, x_hi, a, c_lo, c_hi, X_BF16: tl.constexpr, x_mask=None):
    """``a + sum_b q_b x_b`` over the 4 int8 codes of the code words ``w`` [L, G, BN], x as in :func:`_codes_dot`
    (written out with the x loads first: decoding the codes first, as the rows of x do, took 127 registers instead
    of 96 in the one-row loop, offline sm_90 SASS)."""
    x0, x1 = x_pair(load_or_zero(xp + x_lo, x_mask), X_BF16)
    x2, x3 = x_pair(load_or_zero(xp + x_hi, x_mask), X_BF16)
    hi = w >> 16
    a = tl.fma(_q8(w, 0, c_lo), x0, a)
    a = tl.fma(_q8(w, 8, c_hi), x1, a)
    a = tl.fma(_q8(hi, 0, c_lo), x2, a)
    return tl.fma(_q8(hi, 8, c_hi), x3, a)


@triton.jit
def _step_words(w_ptr, c_off, s_off, base, H: tl.constexpr, WPL: tl.constexpr, mask=None):
    """One step's code words ``(w0, w1)`` (``w1 = w0`` for ``WPL = 1``) and scale words at word ``base`` (0 where
    ``mask`` is False)."""
    w0 = load_or_zero(w_ptr + c_off + base, mask)
    w1 = w0
    if WPL == 2:
        w1 = load_or_zero(w_ptr + c_off + (base + H), mask)
    return w0, w1, load_or_zero(w_ptr + s_off + base, mask)


@triton.jit
def _step(acc, w0, w1, sw, xp, x0_off, x2_off, x4_off, x6_off, splice, d_sh, c_lo, c_hi, WPL: tl.constexpr,
          X_BF16: tl.constexpr, x_mask=None):
    """``acc [L, G, BN]`` + one step: code words ``w0`` (``w1``) and scale words ``sw`` of the step whose x words
    start at ``xp`` (x 0 where ``x_mask`` is False)."""
    if WPL == 2:
        a = _word_dot(w0, xp, x0_off, x2_off, 0.0, c_lo, c_hi, X_BF16, x_mask)
        a = _word_dot(bit_select(splice, sw, w1), xp, x4_off, x6_off, a, c_lo, c_hi, X_BF16, x_mask)
    else:
        a = _word_dot(bit_select(splice, sw, w0), xp, x0_off, x2_off, 0.0, c_lo, c_hi, X_BF16, x_mask)
    return tl.fma(half_lo(sw >> d_sh), a, acc)


@triton.jit
def _row_acc(acc, p0, p1, p2, p3, r0, r1, r2, r3, d, xp, x0_off, x2_off, x4_off, x6_off, WPL: tl.constexpr,
             X_BF16: tl.constexpr, x_mask=None):
    """``acc + d a`` for one row of x (its step's words at ``xp``): ``a`` the dot of the decoded codes ``p`` (and
    ``r``, the second code word, for ``WPL = 2``) with x."""
    a = _codes_dot(p0, p1, p2, p3, xp, x0_off, x2_off, 0.0, X_BF16, x_mask)
    if WPL == 2:
        a = _codes_dot(r0, r1, r2, r3, xp, x4_off, x6_off, a, X_BF16, x_mask)
    return tl.fma(d, a, acc)


@triton.jit
def _step_rows(acc0, acc1, acc2, acc3, w0, w1, sw, xp, stride_xw, x0_off, x2_off, x4_off, x6_off, splice, d_sh, c_lo,
               c_hi, WPL: tl.constexpr, MR: tl.constexpr, X_BF16: tl.constexpr, x_mask=None):
    """:func:`_step` for ``MR`` (2-4) rows of x, ``stride_xw`` words apart: the codes decoded once, then per row of x
    4 FMAs a code word and ``acc += d a``."""
    if WPL == 2:
        p0, p1, p2, p3 = _word_codes(w0, c_lo, c_hi)
        r0, r1, r2, r3 = _word_codes(bit_select(splice, sw, w1), c_lo, c_hi)
    else:
        p0, p1, p2, p3 = _word_codes(bit_select(splice, sw, w0), c_lo, c_hi)
        r0, r1, r2, r3 = p0, p1, p2, p3  # (unused)
    d = half_lo(sw >> d_sh)
    acc0 = _row_acc(acc0, p0, p1, p2, p3, r0, r1, r2, r3, d, xp, x0_off, x2_off, x4_off, x6_off, WPL, X_BF16, x_mask)
    acc1 = _row_acc(acc1, p0, p1, p2, p3, r0, r1, r2, r3, d, xp + stride_xw, x0_off, x2_off, x4_off, x6_off, WPL,
                    X_BF16, x_mask)
    if MR > 2:
        acc2 = _row_acc(acc2, p0, p1, p2, p3, r0, r1, r2, r3, d, xp + 2 * stride_xw, x0_off, x2_off, x4_off, x6_off,
                        WPL, X_BF16, x_mask)
    if MR > 3:
        acc3 = _row_acc(acc3, p0, p1, p2, p3, r0, r1, r2, r3, d, xp + 3 * stride_xw, x0_off, x2_off, x4_off, x6_off,
                        WPL, X_BF16, x_mask)
    return acc0, acc1, acc2, acc3


@triton.jit
def _step_any(acc0, acc1, acc2, acc3, w0, w1, sw, xp, stride_xw, x0_off, x2_off, x4_off, x6_off, splice, d_sh, c_lo,
              c_hi, WPL: tl.constexpr, MR: tl.constexpr, X_BF16: tl.constexpr, x_mask=None):
    """One step for ``MR`` rows of x: :func:`_step` into ``acc0`` for one row, else :func:`_step_rows`."""
    if MR == 1:
        acc0 = _step(acc0, w0, w1, sw, xp, x0_off, x2_off, x4_off, x6_off, splice, d_sh, c_lo, c_hi, WPL, X_BF16,
                     x_mask)
    else:
        acc0, acc1, acc2, acc3 = _step_rows(acc0, acc1, acc2, acc3, w0, w1, sw, xp, stride_xw, x0_off, x2_off, x4_off,
                                            x6_off, splice, d_sh, c_lo, c_hi, WPL, MR, X_BF16, x_mask)
    return acc0, acc1, acc2, acc3


@triton.jit
def rows_loop(w_ptr, b, m, p_off, x_ptr, stride_xw, j_lo, j_hi, is_last, c_lo, c_hi, N_UNITS: tl.constexpr,
              UPS: tl.constexpr, WPL: tl.constexpr, FENCE: tl.constexpr, TAIL: tl.constexpr, MR: tl.constexpr):
    """The ``[L, G, BN]`` fp32 accumulators of ``MR`` rows of x (``x_ptr``: bf16/fp16, rows ``stride_xw`` words
    apart) against code words ``j_lo .. j_hi`` of the rows at :func:`pair_lanes`' ``(w_ptr, b, m, p_off)``, and with
    ``TAIL`` the row's last, partial step where ``is_last`` (a K split's last program)."""
    X_BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    G: tl.constexpr = UPS // 16  # pairs per step
    L: tl.constexpr = 16 // WPL  # lanes per pair: the first half on block A, the second on block B
    H: tl.constexpr = L // 2
    # [L, G, BN] word offsets at the step's first pair: the lane's first code word (word 1 + 8 b + m; the
    # second: + H) and its block's scale word (A: word 0 = d_A | A0 A1, B: word 8 = A30 A31 | d_B)
    c_off = p_off + (1 + 8 * b + m)[:, None, None]
    s_off = p_off + (8 * b)[:, None, None]
    d_sh = (16 * b)[:, None, None]
    # the A lane holding word 8 (A30 A31 | d_B) takes A0 A1 from its scale word's high half
    splice = tl.where((b == 0) & (m == H - 1), -65536, 0)[:, None, None]
    # [L, G, 1] x words (pairs of values) of bytes 0-1 / 2-3 of code word m (+ H) of the block: A's codes start
    # at its byte 2, so its code word v holds codes 4 v + 2 .. 4 v + 5 (mod 32: the spliced word)
    xg = (tl.arange(0, G) * 32)[None, :, None]
    x0_off = (16 * b + (2 * m + 1 - b) % 16)[:, None, None] + xg
    x2_off = (16 * b + (2 * m + 2 - b) % 16)[:, None, None] + xg
    x4_off = (16 * b + (2 * (m + H) + 1 - b) % 16)[:, None, None] + xg
    x6_off = (16 * b + (2 * (m + H) + 2 - b) % 16)[:, None, None] + xg
    xw_ptr = x_ptr.to(tl.pointer_type(tl.int32))
    acc = tl.zeros([L, G, p_off.shape[2]], dtype=tl.float32)
    acc1, acc2, acc3 = acc, acc, acc  # rows 1-3 of x (MR > 1)
    if TAIL:  # the row's last, partial step: its first TAIL pairs, for the last split
        T0: tl.constexpr = N_UNITS // 16 - TAIL  # its first pair
        tail = tail_mask(tl.arange(0, G), TAIL, is_last)[None, :, None]
        w0_t, w1_t, sw_t = _step_words(w_ptr, c_off, s_off, T0 * PAIR_WORDS, H, WPL, tail)
    w0, w1, sw = _step_words(w_ptr, c_off, s_off, (j_lo // 16) * PAIR_WORDS, H, WPL)
    for j in range(j_lo, j_hi, UPS):
        w0_n, w1_n, sw_n = _step_words(w_ptr, c_off, s_off, (tl.minimum(j + UPS, j_hi - UPS) // 16) * PAIR_WORDS,
                                       H, WPL)
        if FENCE:  # keeps the loads above at the top of the loop body (ptxas moves no load across a barrier)
            tl.debug_barrier()
        acc, acc1, acc2, acc3 = _step_any(acc, acc1, acc2, acc3, w0, w1, sw, xw_ptr + 2 * j, stride_xw, x0_off,
                                          x2_off, x4_off, x6_off, splice, d_sh, c_lo, c_hi, WPL, MR, X_BF16)
        w0 = w0_n
        w1 = w1_n
        sw = sw_n
    if TAIL:
        acc, acc1, acc2, acc3 = _step_any(acc, acc1, acc2, acc3, w0_t, w1_t, sw_t, xw_ptr + 32 * T0, stride_xw, x0_off,
                                          x2_off, x4_off, x6_off, splice, d_sh, c_lo, c_hi, WPL, MR, X_BF16, tail)
    return acc, acc1, acc2, acc3


@triton.jit(do_not_specialize=["units_per_split", "c_lo", "c_hi"])
def q8_mv_kernel(
    x_ptr,  # [MR, K] activations, bf16 or fp16, row stride 2 stride_xw
    w_ptr,  # [N * K / 64 * 17] int32 words of the raw rows
    out_ptr,  # [MR, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, MR, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, stride_xw, units_per_split, c_lo, c_hi,
    STRIDE_W: tl.constexpr, N_UNITS: tl.constexpr, BN: tl.constexpr, UPS: tl.constexpr, WPL: tl.constexpr,
    FENCE: tl.constexpr, EVEN_N: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr,
    PDL: tl.constexpr = False, TAIL: tl.constexpr = 0, MR: tl.constexpr = 1,
):
    """Offsets are in 32-bit words: ``STRIDE_W`` per row, 17 per pair of blocks. Units are code words (4 codes):
    ``N_UNITS = K / 4``; ``UPS`` (units per step) and ``units_per_split`` are multiples of 16 (whole pairs) and
    ``units_per_split`` of ``UPS``. ``WPL``: code words per lane and pair (1 or 2). ``TAIL``: the row ends in a
    step of only ``TAIL`` pairs after the whole ones, run by the last K split (its loads go out with the first
    step's). ``MR`` (1-4) rows of x, ``stride_xw`` words apart (read only for ``MR > 1``)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    w_ptr, rows, row_ok, b, m, p_off = pair_lanes(w_ptr, pid_n, N, STRIDE_W, BN, EVEN_N, 16 // WPL, UPS // 16,
                                                  PAIR_WORDS)
    j_lo = tl.program_id(1) * units_per_split
    j_hi = tl.minimum(N_UNITS, j_lo + units_per_split)
    acc, acc1, acc2, acc3 = rows_loop(w_ptr, b, m, p_off, x_ptr, stride_xw, j_lo, j_hi, last_split(), c_lo, c_hi,
                                      N_UNITS, UPS, WPL, FENCE, TAIL, MR)
    leave_loop(PDL)  # PDL 3: the next launch may be scheduled from here
    store_rows(out_ptr, part_ptr, cnt_ptr + pid_n, acc, acc1, acc2, acc3, pid_n * BN + tl.arange(0, BN).to(tl.int64),
               row_ok, N, MR, SPLIT_K, FUSE, 2)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import StreamedMvLaunch, step_with_tail, x_row_stride_of  # noqa: E402

# First guesses, to be swept on the H100 (bench/gguf_mv_sweep.py knobs: Q8_BN, PROGRAMS_PER_SM). Q8_0 streams
# 1.06 bytes a value (Q4_0: 0.56) for fewer instructions a byte, so a step carries more bytes than q4_mv's:
# 16 pairs (1024 values, 1088 bytes a row) fill the 4 warps with the pairs (8 lanes x 4 pairs a warp) and
# leave the 8 rows in registers (95 registers with the fence, 5 programs per SM; 8.7 KB a program step
# in flight). Llama-3-8B's 4096-row matrices give 512 tiles, ~4 per SM (no split); smaller ones split K up to
# 2 programs per SM. Unlike Q4_0 / Q4_1, Q8_0 has no competitive fallback (the word-level kernel ran 104.7 us
# on K 4096 x N 14336, ~5x the bytes' floor), so small matrices are taken too (MIN_TILES_PER_SM = 0).
Q8_ID = 8
Q8_MAX_UPS = 256  # code words (4 codes) per row and loop step: 16 pairs of blocks
Q8_MIN_UPS = 64  # rows of no step of at least 4 pairs (8 blocks; tiling) stay on the word-level kernel
Q8_BN = 8  # rows per program
Q8_WPL = 2  # code words per lane and pair (1: 16 lanes a pair, each load instruction 64 contiguous bytes)
Q8_FENCE = True  # a CTA barrier after the prefetch loads (see the module docstring)
Q8_WARPS = 4
PROGRAMS_PER_SM = 2  # split K until about this many programs per SM
MIN_TILES_PER_SM = 0  # fewer row tiles than this per SM: left to the word-level kernel
C_LO = 0x4B000080  # fp32 bits of 2**23 with the sign of a byte at bits 0-7 flipped ...
C_HI = 0x4B008000  # ... at bits 8-15
# 2 to ROWS_MAX rows of x (a few tokens decoded at once) stream the weights once (``MR``): each code word decoded once,
# then 4 FMAs a word and ``acc += d a`` per row of x. H200 session 35 run 2 (bench/gguf_mv_sweep.py --types Q8_0
# --rows 1,2,3,4), us, K x N 4096 x 14336 / 14336 x 4096 / 4096 x 4096: one row 21.7 / 21.6 / 8.2; 2 rows 28.6 /
# 28.8 / 10.5 with 4-row tiles (8-row: 29.2 / 31.1 / 11.2), 3 rows 33.5 / 34.7 / 12.8, 4 rows 43.2 / 36.5 / 13.7
# (1.3 / 1.5-1.6 / 1.7-2.0x one row; offline sm_90 SASS 7.0 / 8.5 / 9.9 instructions a code against 5.55); the
# tiled decode kernel these calls took before: 65-71 / 24 us. 3-4 rows: 4-row tiles within -3 / +9%.
ROWS_MAX = 4
TWO_ROWS_BN = 4  # rows per program for 2 rows of x (Q8_BN for the others)


def tiling(k: int, n: int = 0, sms: int = 0, m: int = 1) -> tuple[int, int]:
    """``(code words per loop step, pairs of a last partial step)`` for ``n`` rows of ``k`` columns (whole pairs
    of blocks, ``k % 64 == 0``) on ``sms`` SMs and ``m`` rows of x (tiles of :func:`tile_rows`): the most whole
    pairs, up to Q8_MAX_UPS words and down to Q8_MIN_UPS, that divide the row, or steps of Q8_MAX_UPS words and a
    partial one where :func:`~mlx_native.ops.quant.affine_mv.step_with_tail` takes them (K = 11008: 10 steps of 16
    pairs, then one of 12; rows under Q8_MAX_UPS words take the largest step they hold: K = 576, 8 pairs and a
    partial step of 1); ``(0, 0)`` for rows of neither. H100 session 26 run 1: 4096 x 14336 with steps of 4 / 8 /
    16 pairs 32.4 / 27.2 / 26.8 us."""
    if k % 64:
        return 0, 0
    units, most = k // 4, Q8_MAX_UPS
    while most > max(units, Q8_MIN_UPS):  # rows under a whole step: the largest they hold (K = 576: 8 pairs + 1)
        most //= 2
    ups, tail = step_with_tail(units, most, Q8_MIN_UPS, lambda ups: triton.cdiv(n, tile_rows(m)),
                               PROGRAMS_PER_SM * sms)
    return ups, tail // 16


def tile_rows(m: int = 1) -> int:
    """Weight rows per program for ``m`` rows of x."""
    return TWO_ROWS_BN if m == 2 else Q8_BN


def supports(ggml_type: int, x_dtype: torch.dtype, m: int, n: int, k: int, raw_bytes: int, sms: int,
             x_row_stride: int = 0) -> bool:
    """1 to ``ROWS_MAX`` rows of bf16/fp16 x (an even row stride ``x_row_stride``: x is read in words of two values)
    against Q8_0 rows of whole pairs of blocks (so every pair is 4-byte aligned) that take a step (:func:`tiling`)
    and numerous enough for ``MIN_TILES_PER_SM`` row tiles per SM. ``MLX_NATIVE_GGUF_MV=0`` turns it off."""
    return (env.settings.gguf_mv and ggml_type == Q8_ID and 1 <= m <= ROWS_MAX and (m == 1 or x_row_stride % 2 == 0)
            and x_dtype in (torch.bfloat16, torch.float16) and tiling(k)[0] > 0
            and triton.cdiv(n, Q8_BN) >= MIN_TILES_PER_SM * sms and raw_bytes < 2**31)


class Q8MvLaunch(StreamedMvLaunch):
    """:func:`q8_mv_kernel` for ``(x [m, k], raw [n * k / 32 * 34] uint8, 16-byte aligned)`` -> ``[m, n]`` of
    ``out_dtype``; the raw rows are read as int32 words (``k % 64 == 0``: whole pairs of blocks), x as int32 words of
    two values: unit column stride, an even row stride ``x_row_stride`` (default ``k``; a plan-time constant, read
    only for ``m > 1``)."""

    def __init__(self, n: int, k: int, out_dtype: torch.dtype, device, m: int = 1, x_row_stride=None):
        stride_x = x_row_stride_of("q8_mv", m, k, x_row_stride, ROWS_MAX, words=True)
        ups, tail = tiling(k, n, device_info(device).sm_count, m)
        bn = tile_rows(m)
        super().__init__(q8_mv_kernel, n, triton.cdiv(n, bn), k // 4 // ups, ups,
                         PROGRAMS_PER_SM * device_info(device).sm_count, (n, stride_x // 2), dict(
                             STRIDE_W=k // 64 * 17, N_UNITS=k // 4, BN=bn, UPS=ups, WPL=Q8_WPL,
                             FENCE=Q8_FENCE, EVEN_N=n % bn == 0, TAIL=tail, MR=m), out_dtype, device,
                         tail_ints=(C_LO, C_HI), num_warps=Q8_WARPS, trigger="late", m=m)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(word_aligned(x), raw.view(torch.int32))
