"""Decode mat-vec for GGUF Q4_0 / Q4_1 weights and one row of x, by integer dot products.

A block holds 32 values: ``d`` (fp16; Q4_1 also ``m``, fp16) and 16 bytes of nibbles, byte ``i`` holding value ``i``
in its low and ``i + 16`` in its high nibble; value ``= d (q - 8)`` (Q4_0) or ``d q + m`` (Q4_1), so ``out[n] =
sum_blocks d (sum q x) - 8 d sum(x)`` (Q4_0) or ``d (sum q x) + m sum(x)`` (Q4_1).

The integer dot of ``q4k_idot.py`` (``kernels/idot.py``): in a code word ``w`` (4 code bytes) ``w & 0x0F0F0F0F`` are
four values ``v .. v + 3`` of a block and ``w & 0xF0F0F0F0`` (16 x the codes) the values ``v + 16 .. v + 19``; x is
quantized to int16 with a power-of-two scale and ``dp2a`` multiplies two codes by two x values per instruction, so a
word costs 2 mask LOP3s and 4 ``dp2a`` into two int32 sums.

Words: rows of an even number of blocks (``K % 64 == 0``) are read as 32-bit words by pairs of blocks (A, B), as
``q8_mv.py`` does. Q4_0's 18-byte blocks make a pair 9 words: word 0 = ``d_A`` | A's code bytes 0-1 (high half), words
1-3 = A's bytes 2-13, word 4 = A's bytes 14-15 | ``d_B`` (high half), words 5-8 = B's bytes 0-15. Code word ``c``
(0-3) of A is pair word ``1 + c`` and holds A's bytes ``4 c + 2 .. 4 c + 5`` (mod 16: word 4 takes bytes 0-1 from word
0's high half in place of ``d_B``, one bit select), B's is word ``5 + c`` with bytes ``4 c .. 4 c + 3``; the scale
word is word 0 (A, ``d`` in its low half) or 4 (B, high half). Q4_1's 20-byte blocks make a pair 10 aligned words:
word ``5 b`` = ``d | m << 16``, words ``5 b + 1 + c`` the code bytes ``4 c .. 4 c + 3`` (no splice, no rotation).

Tiles are ``[L lanes, G pairs, BN rows]`` as in ``q8_mv.py`` (whose docstring explains why this axis order keeps one
layout, without conversions in the loop, under Triton 3.6): ``L = 8 / WPL`` lanes a pair, the first half on block A,
the second on B, lane ``m`` of a block taking its code words ``m + i L / 2`` (``i < WPL``) and its block's scale word;
the ``G`` pairs of a loop step (one per thread) lie on the lanes and warps, the rows in registers. Each thread loads
the x values of its own code words (two int32 words of x pairs per code word and nibble half: the pairs are
consecutive values; Q4_0's A words start one pair later), quantizes its ``8 WPL`` values with one power-of-two scale
of its own (at most ``2**-14`` of their largest magnitude, finer than the 32-value chunks of ``q4k_idot``: no
reduction across lanes) and reuses them for its ``BN`` rows. Per lane, pair and row: ``WPL`` words of 6 instructions,
the splice (Q4_0), ``dot = 16 even + odd16`` and its conversion, ``d`` from the scale word (a shift and a conversion)
and ``acc += d (scale dot - 8 xs)`` (Q4_0, 2 FMAs) or ``acc += d scale dot + m xs`` (Q4_1, 3), ``xs`` the lane's float
sum of x (which carries Inf / NaN of x: the integers cannot): about ``(6 WPL + 7) / 8 WPL`` instructions a code and
row. x's quantization (about 40 instructions per code word and lane: loads, conversion, largest magnitude, sum,
rounding, packing) is shared by the ``BN`` rows. Optional register prefetch of the next step's words (with FENCE, a
CTA barrier after those loads, without which ptxas sinks them to the end of the loop body: see ``q8_mv.py``); a K
split is summed in the launch by the last split to arrive (``qmm.store_result``).

Offline sm_90 SASS (Triton 3.6, ptxas 12.8, K 4096, bf16 x; loop instructions per thread over its codes, no shared
memory in the loop but the fence's barrier, no layout conversion in the loop, no spills): with the default 8-row
tiles, 2 code words per lane, prefetch and fence 2.46 a code (93 registers; Q4_1 2.45, fp16 x 2.52, a ragged last tile
2.59 with 127), 2.33 without prefetch (63), 2.37 without the fence (72, but the prefetch loads sink to the end of the
loop body); 4 code words per lane 2.07 (148), 1.90 without prefetch (72); 16-row tiles 2.12 (165), with 4 code words
1.70 (241); 4-row tiles 3.44 / 3.01 (2 / 4 code words); one code word per lane 3.28. Of the default's 315 a step: 64
``dp2a``, 40 mask / splice LOP3s, per row ``d`` (a shift, half a PRMT, an HADD2), the dot's LEA + I2F and 2 FFMA, x's
quantization about 86 (shared by the 8 rows) and about 25 register moves of the prefetched words. ``q4_mv`` takes 4.5+
a code.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter, leave_loop
from ...kernels.idot import chunk_scale, pack_pair, round_int, word_idot
from ...kernels.loads import load_or_zero, pinned
from ...kernels.norm_handoff import handoff_rstd
from ..quant.affine_mv import store_row_tile
from ...kernels.words import bit_select, half_lo, word_aligned, x_pair
from .q8_mv import pair_lanes


@triton.jit
def _slot_x(xp, oa, ob, X_BF16: tl.constexpr, mask=None):
    """fp32 x values of one code word of each lane: ``(a0 a1 a2 a3, h0 h1 h2 h3)`` for its bytes 0-3' low
    nibbles (x words ``oa``, ``ob``: values ``v, v + 1`` and ``v + 2, v + 3``) and high nibbles (the same + 16
    values = 8 words), ``[L, G, 1]`` each, with their largest magnitude and their sum (0 where ``mask`` is
    False)."""
    a0, a1 = x_pair(load_or_zero(xp + oa, mask), X_BF16)
    a2, a3 = x_pair(load_or_zero(xp + ob, mask), X_BF16)
    h0, h1 = x_pair(load_or_zero(xp + oa + 8, mask), X_BF16)
    h2, h3 = x_pair(load_or_zero(xp + ob + 8, mask), X_BF16)
    amax = tl.maximum(tl.maximum(tl.maximum(tl.abs(a0), tl.abs(a1)), tl.maximum(tl.abs(a2), tl.abs(a3))),
                      tl.maximum(tl.maximum(tl.abs(h0), tl.abs(h1)), tl.maximum(tl.abs(h2), tl.abs(h3))))
    xs = ((a0 + a1) + (a2 + a3)) + ((h0 + h1) + (h2 + h3))
    return a0, a1, a2, a3, h0, h1, h2, h3, amax, xs


@triton.jit
def _slot_dot(w, a0, a1, a2, a3, h0, h1, h2, h3, inv, even, odd16, ASM: tl.constexpr):
    """``(even, odd16)`` + the integer dot of code words ``w [L, G, BN]`` with their x values (quantized here with
    ``inv``; int16 pairs of consecutive values, as the dp2a byte pairs 0-1 / 2-3 of a word take them)."""
    p0 = pack_pair(round_int(a0, inv), round_int(a1, inv), ASM)
    p1 = pack_pair(round_int(a2, inv), round_int(a3, inv), ASM)
    p2 = pack_pair(round_int(h0, inv), round_int(h1, inv), ASM)
    p3 = pack_pair(round_int(h2, inv), round_int(h3, inv), ASM)
    return word_idot(w, p0, p1, p2, p3, even, odd16, ASM)


@triton.jit
def _step(acc, w0, w1, w2, w3, sw, xp, oa0, ob0, oa1, ob1, oa2, ob2, oa3, ob3, d_sh,
          Q4_1: tl.constexpr, WPL: tl.constexpr, X_BF16: tl.constexpr, ASM: tl.constexpr, x_mask=None):
    """``acc [L, G, BN]`` + one loop step: code words ``w0 .. w{WPL - 1}`` and scale words ``sw`` ``[L, G, BN]``
    (Q4_0's splice done), x words at ``xp`` + ``oa_i`` / ``ob_i`` (``[L, G, 1]``) for code word ``i`` (``x_mask
    [1, G, 1]``: the pairs to load, 0 elsewhere)."""
    a0, a1, a2, a3, h0, h1, h2, h3, amax, xs = _slot_x(xp, oa0, ob0, X_BF16, x_mask)
    if WPL > 1:
        b0, b1, b2, b3, i0, i1, i2, i3, amax1, xs1 = _slot_x(xp, oa1, ob1, X_BF16, x_mask)
        amax = tl.maximum(amax, amax1)
        xs = xs + xs1
    if WPL > 2:
        c0, c1, c2, c3, j0, j1, j2, j3, amax2, xs2 = _slot_x(xp, oa2, ob2, X_BF16, x_mask)
        e0, e1, e2, e3, k0, k1, k2, k3, amax3, xs3 = _slot_x(xp, oa3, ob3, X_BF16, x_mask)
        amax = tl.maximum(amax, tl.maximum(amax2, amax3))
        xs = xs + (xs2 + xs3)
    inv, scale = chunk_scale(amax)
    zero = tl.zeros(acc.shape, dtype=tl.int32)
    even, odd16 = _slot_dot(w0, a0, a1, a2, a3, h0, h1, h2, h3, inv, zero, zero, ASM)
    if WPL > 1:
        even, odd16 = _slot_dot(w1, b0, b1, b2, b3, i0, i1, i2, i3, inv, even, odd16, ASM)
    if WPL > 2:
        even, odd16 = _slot_dot(w2, c0, c1, c2, c3, j0, j1, j2, j3, inv, even, odd16, ASM)
        even, odd16 = _slot_dot(w3, e0, e1, e2, e3, k0, k1, k2, k3, inv, even, odd16, ASM)
    dot = (even * 16 + odd16).to(tl.float32)  # 16 x the lane's integer dot
    s16 = scale * 0.0625
    if Q4_1:
        acc = tl.fma(half_lo(sw), dot * s16, acc)
        return tl.fma(half_lo(sw >> 16), xs, acc)
    else:
        return tl.fma(half_lo(sw >> d_sh), tl.fma(dot, s16, xs * -8.0), acc)


@triton.jit
def _words(w_ptr, c_off, s_off, base, H: tl.constexpr, WPL: tl.constexpr, mask=None):
    """One step's code words ``(w0, w1, w2, w3)`` (those past ``WPL`` repeat ``w0``) and scale words, at pair
    word ``base`` (0 where ``mask`` is False)."""
    w0 = load_or_zero(w_ptr + c_off + base, mask)
    w1 = w0
    w2 = w0
    w3 = w0
    if WPL > 1:
        w1 = load_or_zero(w_ptr + c_off + (base + H), mask)
    if WPL > 2:
        w2 = load_or_zero(w_ptr + c_off + (base + 2 * H), mask)
        w3 = load_or_zero(w_ptr + c_off + (base + 3 * H), mask)
    sw = load_or_zero(w_ptr + s_off + base, mask)
    return w0, w1, w2, w3, sw


@triton.jit
def _spliced(w0, w1, w2, w3, sw, splice, Q4_1: tl.constexpr, WPL: tl.constexpr):
    """Q4_0: the last code word of block A's last lane (pair word 4: A's bytes 14-15 | ``d_B``) takes A's bytes
    0-1 from the scale word's (word 0's) high half: one bit select, ``splice`` = 0 on the other lanes."""
    if not Q4_1:
        if WPL == 1:
            w0 = bit_select(splice, sw, w0)
        elif WPL == 2:
            w1 = bit_select(splice, sw, w1)
        else:
            w3 = bit_select(splice, sw, w3)
    return w0, w1, w2, w3


@triton.jit
def _x_offsets(b, m, i: tl.constexpr, rot, xg, H: tl.constexpr):
    """``[L, G, 1]`` x word offsets (pairs of values, from the step's first value) of bytes 0-1 / 2-3 of each
    lane's code word ``i`` (block byte ``4 (m + i H) + 2 rot``, mod 16, of block ``b`` of each pair)."""
    c = m + i * H
    oa = (16 * b + (2 * c + rot) % 8)[:, None, None] + xg
    ob = (16 * b + (2 * c + rot + 1) % 8)[:, None, None] + xg
    return oa, ob


@triton.jit(do_not_specialize=["units_per_split"])
def q4_idot_kernel(
    x_ptr,  # [K] activations, bf16 or fp16
    w_ptr,  # [N * K / 64 * TW] int32 words of the raw rows (TW = 9 Q4_0, 10 Q4_1)
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, units_per_split,
    res_ptr, nw_ptr, scaled_ptr,  # NORM_OUT: [N] residual, [N] norm weight, [N] h * (weight + w_offset)
    parts_ptr,  # NORM_OUT: [tiles] fp32 sums of h^2 (written); NORM_IN: [NPARTS] (read)
    eps, w_offset,  # NORM_IN / NORM_OUT
    Q4_1: tl.constexpr, STRIDE_W: tl.constexpr, BN: tl.constexpr, G: tl.constexpr, WPL: tl.constexpr,
    EVEN_N: tl.constexpr, PREFETCH: tl.constexpr, FENCE: tl.constexpr, SPLIT_K: tl.constexpr,
    FUSE: tl.constexpr, ASM: tl.constexpr,
    NORM_OUT: tl.constexpr = False,  # hand off a norm: out = h = out + residual, normed = h * w, parts of sum(h^2)
    NORM_IN: tl.constexpr = False, PARTS: tl.constexpr = 1, NPARTS: tl.constexpr = 1,  # x is a handed-off h * w
    GLU: tl.constexpr = False, ACT: tl.constexpr = 0,  # w is a [2 N, K] gate/up pair: out = act(gate) * up
    UP_ROWS: tl.constexpr = 0,  # GLU: N
    PDL: tl.constexpr = False, TAIL: tl.constexpr = 0,
):
    """Offsets are in 32-bit words: ``STRIDE_W`` per row, ``TW`` per pair of blocks. Units are pairs of blocks:
    a loop step takes ``G = 4 WPL x warps`` of each row (one per thread), ``units_per_split`` is a multiple of
    ``G``. ``WPL``: code words per lane and block (1, 2 or 4: 8, 4 or 2 lanes a pair). ``NORM_OUT`` / ``NORM_IN``:
    the norm handoff of ``affine_idot_kernel`` (``kernels/norm_handoff.py``). ``GLU`` (no K split): ``BN // 2``
    outputs a program (``affine_mv.glu_row_tile``; ``ACT`` a code of ``qmm.ACT_CODES``). ``TAIL`` (unsplit K, no
    ``GLU``): after the whole steps one of only its first ``TAIL`` pairs, loaded with the first step's."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    X_BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    TW: tl.constexpr = 10 if Q4_1 else 9  # words per pair
    BW: tl.constexpr = 5 if Q4_1 else 4  # block B's scale word
    L: tl.constexpr = 8 // WPL  # lanes per pair: the first half on block A, the second on B
    H: tl.constexpr = L // 2
    pid_n = tl.program_id(0)
    w_ptr, rows, row_ok, b, m, p_off = pair_lanes(w_ptr, pid_n, N, STRIDE_W, BN, EVEN_N, L, G, TW, UP_ROWS)
    # [L, G, BN] word offsets at the step's first pair: the lane's first code word (its others: + i H) and its
    # block's scale word
    c_off = p_off + (1 + BW * b + m)[:, None, None]
    s_off = p_off + (BW * b)[:, None, None]
    if Q4_1:
        rot = b * 0
        splice = 0  # (unused)
    else:  # A's code words start at its byte 2 (one x word); A's last code word takes bytes 0-1 from word 0
        rot = 1 - b
        splice = tl.where((b == 0) & (m == H - 1), -65536, 0)[:, None, None]
    d_sh = (16 * b)[:, None, None]  # Q4_0: d_A in the low half of word 0, d_B in the high half of word 4
    xg = (tl.arange(0, G) * 32)[None, :, None]  # 32 x words (64 values) a pair
    oa0, ob0 = _x_offsets(b, m, 0, rot, xg, H)
    oa1, ob1 = oa0, ob0
    oa2, ob2 = oa0, ob0
    oa3, ob3 = oa0, ob0
    if WPL > 1:
        oa1, ob1 = _x_offsets(b, m, 1, rot, xg, H)
    if WPL > 2:
        oa2, ob2 = _x_offsets(b, m, 2, rot, xg, H)
        oa3, ob3 = _x_offsets(b, m, 3, rot, xg, H)
    xw_ptr = x_ptr.to(tl.pointer_type(tl.int32))
    j_lo = tl.program_id(1) * units_per_split
    j_hi = j_lo + units_per_split
    acc = tl.zeros([L, G, BN], dtype=tl.float32)
    if TAIL:  # the row's last, partial step, in flight with the first step's words
        tail = (tl.arange(0, G) < TAIL)[None, :, None]
        w0_t, w1_t, w2_t, w3_t, sw_t = _words(w_ptr, c_off, s_off, j_hi * TW, H, WPL, tail)
    if NORM_IN:  # read before the loop: its loads go out with the first weights'
        rstd = handoff_rstd(parts_ptr, STRIDE_W // TW * 64, eps, PARTS, NPARTS)
    if PREFETCH:
        w0, w1, w2, w3, sw = _words(w_ptr, c_off, s_off, j_lo * TW, H, WPL)
        for j in range(j_lo, j_hi, G):  # this step's words taken at its top (kernels.loads.pinned)
            c0, c1, c2, c3, cs = pinned(w0, ASM), pinned(w1, ASM), pinned(w2, ASM), pinned(w3, ASM), pinned(sw, ASM)
            nxt = tl.minimum(j + G, j_hi - G) * TW  # the last step reloads itself
            w0, w1, w2, w3, sw = _words(w_ptr, c_off, s_off, nxt, H, WPL)
            if FENCE:  # keeps the loads above at the top of the loop body (ptxas moves no load across a barrier)
                tl.debug_barrier()
            c0, c1, c2, c3 = _spliced(c0, c1, c2, c3, cs, splice, Q4_1, WPL)
            acc = _step(acc, c0, c1, c2, c3, cs, xw_ptr + 32 * j, oa0, ob0, oa1, ob1, oa2, ob2, oa3, ob3, d_sh,
                        Q4_1, WPL, X_BF16, ASM)
    else:
        for j in range(j_lo, j_hi, G):
            w0, w1, w2, w3, sw = _words(w_ptr, c_off, s_off, j * TW, H, WPL)
            w0, w1, w2, w3 = _spliced(w0, w1, w2, w3, sw, splice, Q4_1, WPL)
            acc = _step(acc, w0, w1, w2, w3, sw, xw_ptr + 32 * j, oa0, ob0, oa1, ob1, oa2, ob2, oa3, ob3, d_sh,
                        Q4_1, WPL, X_BF16, ASM)
    if TAIL:
        w0_t, w1_t, w2_t, w3_t = _spliced(w0_t, w1_t, w2_t, w3_t, sw_t, splice, Q4_1, WPL)
        acc = _step(acc, w0_t, w1_t, w2_t, w3_t, sw_t, xw_ptr + 32 * j_hi, oa0, ob0, oa1, ob1, oa2, ob2, oa3, ob3,
                    d_sh, Q4_1, WPL, X_BF16, ASM, tail)
    leave_loop(PDL)  # PDL 3: the next launch may be scheduled from here
    res = tl.sum(tl.sum(acc, axis=0), axis=0)
    if NORM_IN:  # the norm's 1 / rms is a factor of the whole (linear) product
        res = res * rstd
    store_row_tile(out_ptr, part_ptr, cnt_ptr, res, row_ok, N, res_ptr, nw_ptr, scaled_ptr, parts_ptr, w_offset, BN,
                   SPLIT_K, FUSE, NORM_OUT, GLU, ACT)


# ----------------------------------------------------------------------------- launch plans

from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import NO_NORM_ARGS, HandoffMvLaunch, split_count  # noqa: E402
from ...kernels import idot  # noqa: E402

# From the H100 sweep (bench/gguf_mv_sweep.py --types Q4_0,Q4_1, bench/results/2026-11-25-h100-session17/run4;
# 16 variants of tile rows, code words per lane, warps and the few-tiles rule): the defaults are within 1-2% of
# the best on every Llama-3-8B shape, or 7% on 4096 x 4096 (6.68 us with 16-row tiles, 4 words a lane, 4 warps).
# Q4_0 4096 x 14336 / 14336 x 4096 / 4096 x 4096: 16.9 / 15.8 / 7.2 us (65 / 70 / 44% of copy) against 22.4 /
# 22.9 / 10.0 for q4_mv; Q4_1 17.4 / 16.6 / 7.3 against 21.9 / 23.0 / 9.0. The rules: 8-row tiles (x's
# quantization shared by 8 rows), 2 code words per lane and block (4 lanes a pair, 8 pairs = 512 values of a row
# per warp and step), register prefetch from PREFETCH_MIN_STEPS steps per program with the fence, K split only below
# one program per SM. Warps: the most, up to 8, whose step divides the row (a K = 4096 row is one step of 8 warps;
# session 25 run 6, 16 variants, us, against 2 warps and 4 below 8 tiles per SM before: Q4_0 4096 x 14336 16.60 ->
# 14.44, 4096 x 4096 6.76 -> 5.93, 14336 x 4096 (4 warps) 15.42 -> 15.30, 4096 x 128256 107.4 -> 106.7).
Q4_IDS = {2: 9, 3: 10}  # Q4_0, Q4_1 -> 32-bit words per pair of blocks
Q4I_BN = 8  # rows per program
Q4I_WPL = 2  # code words per lane and block (1, 2, 4); rows that take no step with it try fewer
Q4I_MAX_WARPS = 8  # a loop step is 4 WPL pairs of blocks of each row per warp
Q4I_GLU_MAX_WARPS = 2  # gate/up pairs (act): 8B-shaped Q4_0 decode 2535-2541 tok/s with 8, 2653-2655 with 2 (run 7)
PARTIAL_MAX_WARPS = 2  # rows of no whole step of Q4I_WPL code words: whole steps of up to this many warps, then
# a partial one. H100 session 26 run 1 (us, 1-word 1-warp steps -> this): Q4_0 11008 x 4096 29.95 -> 14.40,
# 5376 x 4096 15.52 -> 8.60; Q4_1 31.64 -> 14.72, 16.46 -> 8.72
Q4I_FENCE = True  # a CTA barrier after the prefetch loads
PROGRAMS_PER_SM = 1  # split K only below this many programs per SM
PREFETCH_MIN_STEPS = 2  # register prefetch from this many loop steps per program (after the split)


def tiling(k: int, wpl: int = 0, warps: int = 0) -> tuple[int, int]:
    """``(code words per lane, warps)`` for rows of ``k`` columns: ``wpl`` (default Q4I_WPL, else the next
    smaller that gives a step) and the most warps, up to ``warps`` (default Q4I_MAX_WARPS), whose step of ``4
    wpl`` pairs of blocks per warp divides the row's pairs; ``(0, 0)`` when none does (or ``k % 64``)."""
    if k % 64:
        return 0, 0
    for w in [wpl] if wpl else [w for w in (4, 2, 1) if w <= Q4I_WPL]:
        n_warps = idot.step_warps(k // 64, 4 * w, warps or Q4I_MAX_WARPS)
        if n_warps:
            return w, n_warps
    return 0, 0


def partial_tiling(k: int) -> tuple[int, int, int]:
    """``(code words per lane, warps, pairs of the partial step)`` for rows of ``k`` columns whose pairs take no
    whole step of ``Q4I_WPL`` code words a lane but at least one: up to ``PARTIAL_MAX_WARPS`` warps of whole steps,
    then a partial one; ``(0, 0, 0)`` for other rows."""
    pairs, unit = k // 64, 4 * Q4I_WPL
    if k % 64 or pairs < unit or pairs % unit == 0:
        return 0, 0, 0
    warps = min(PARTIAL_MAX_WARPS, pairs // unit)
    return Q4I_WPL, warps, pairs % (unit * warps)


def supports(ggml_type: int, x_dtype: torch.dtype, out_dtype: torch.dtype, m: int, n: int, k: int, raw_bytes: int,
             sms: int, pairs: bool = False) -> bool:
    """One row of bf16/fp16 x against Q4_0/Q4_1 rows of at least one step (whole steps, or :func:`partial_tiling`'s
    partial one; only whole steps for gate/up pairs, ``pairs``), with a bf16/fp16 result (x's int16 quantization is
    within their error bar, not fp32's). ``MLX_NATIVE_GGML_IDOT=0`` or ``MLX_NATIVE_GGUF_MV=0`` turn it off.
    (``n`` and ``sms``: the signature of ``q4_mv.supports``; no row count is refused.)"""
    steps = tiling(k)[0] > 0 or not pairs and partial_tiling(k)[0] > 0
    return (env.settings.ggml_idot and env.settings.gguf_mv and ggml_type in Q4_IDS and m == 1
            and x_dtype in (torch.bfloat16, torch.float16) and out_dtype in (torch.bfloat16, torch.float16)
            and steps and raw_bytes < 2**31)


class Q4IdotLaunch(HandoffMvLaunch):
    """:func:`q4_idot_kernel` for ``(x [1, k], raw [n * k / 32 * block_bytes] uint8, 4-byte aligned)``; the raw
    rows are read as int32 words (``k % 64 == 0``: whole pairs of blocks). Knobs for the sweep (0 / None: the
    module's defaults): ``bn`` rows per program, ``warps`` (at most: the most up to it whose step divides the
    row), ``wpl`` code words per lane and block (1, 2, 4),
    ``programs_per_sm`` (the K split's target), ``prefetch`` and ``fence``. ``hand_off``: the producer of a norm
    handoff (:meth:`hand_off`, one program per row tile); ``take_parts``: a consumer of one with this many parts
    (:meth:`take`); ``act`` (a code of ``qmm.ACT_CODES``): ``raw`` holds ``2 n`` rows, gate then up, and calls
    return ``act(x G^T) * (x U^T)`` (``n`` outputs; no K split)."""

    def __init__(self, ggml_type: int, n: int, k: int, out_dtype: torch.dtype, device, bn: int = 0, warps: int = 0,
                 wpl: int = 0, programs_per_sm: int = 0, prefetch: Optional[bool] = None,
                 fence: Optional[bool] = None, hand_off: bool = False, take_parts: int = 0,
                 act: Optional[int] = None):
        bn = bn or Q4I_BN
        sms = device_info(device).sm_count
        outs = bn if act is None else bn // 2  # outputs a program
        tiles = triton.cdiv(n, outs)
        p_wpl, p_warps, tail = partial_tiling(k) if act is None and not (wpl or warps) else (0, 0, 0)
        if p_wpl:  # no whole step of Q4I_WPL code words: a partial last step
            wpl, warps = p_wpl, p_warps
        else:
            wpl, warps = tiling(k, wpl, warps or (Q4I_GLU_MAX_WARPS if act is not None else 0))
            tail = 0
        if not wpl:
            raise ValueError(f"q4_idot: rows of {k} columns take no whole step")
        g = 4 * wpl * warps  # pairs of blocks per step
        steps = k // 64 // g
        target = 1 if hand_off or act is not None or tail else (programs_per_sm or PROGRAMS_PER_SM) * sms
        if prefetch is None:  # from PREFETCH_MIN_STEPS steps per program, after the split StreamedMvLaunch takes
            prefetch = steps // split_count(steps, tiles, target) >= PREFETCH_MIN_STEPS
        constexprs = dict(Q4_1=ggml_type == 3, STRIDE_W=k // 64 * Q4_IDS[ggml_type], BN=bn, G=g, WPL=wpl,
                          EVEN_N=n % outs == 0, PREFETCH=prefetch, FENCE=Q4I_FENCE if fence is None else fence,
                          ASM=not env.settings.triton_interpret, GLU=act is not None,
                          UP_ROWS=n if act is not None else 0, TAIL=tail,
                          **self.role_constexprs(hand_off, take_parts, act))
        self.tiles = tiles
        super().__init__(q4_idot_kernel, n, tiles, steps, g, target, (n,), constexprs, out_dtype, device,
                         tail_ints=NO_NORM_ARGS, num_warps=warps, trigger="late")

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(word_aligned(x), raw.view(torch.int32))

    def hand_off(self, x, raw, residual, norm_weight,
                 weight_offset: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The producer of a norm handoff: see :meth:`~mlx_native.ops.quant.affine_mv.HandoffMvLaunch.run_hand_off`."""
        return self.run_hand_off((word_aligned(x), raw.view(torch.int32)), residual, norm_weight, weight_offset)

    def take(self, scaled, parts, eps: float, raw) -> torch.Tensor:
        """The consumer of a norm handoff: ``rms_norm(h) * weight @ W^T`` from ``scaled = h * weight`` and ``h``'s
        parts."""
        return self.run_take(scaled, parts, eps, (raw.view(torch.int32),))
