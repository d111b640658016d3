"""Decode mat-vec for GGUF Q4_K and Q5_K weights and one row of x, by integer dot products.

``out[n] = sum_j d sc_j sum_{k in j} q[n, k] x[k] - dmin m_j sum_{k in j} x[k]`` over the 32-value sub-blocks ``j``
of each 256-value super-block (layout in ``q4k_mv.py``: header word ``d | dmin << 16``, three words of 6-bit scales
and mins, then four 64-value chunks of 8 nibble words; byte ``b`` of word ``w`` of chunk ``c`` holds value
``64 c + 4 w + b`` in its low nibble, sub-block ``2 c``, and value ``64 c + 32 + 4 w + b`` in its high nibble,
sub-block ``2 c + 1``).

The integer dot of ``affine_idot.py`` (``kernels/idot.py``): x is quantized per 32 values to int16 with a
power-of-two scale and ``dp2a`` multiplies two codes by two x values per instruction. Here a word's low nibbles
(``w & 0x0F0F0F0F``) are four consecutive values of one sub-block and its high nibbles (``w & 0xF0F0F0F0``, 16 x
the codes) four consecutive values of the next, so the x pairs are consecutive values and each sub-block's 32 x
values form one quantization chunk of their own.

Tiles are two ``[4 * CH, BN]`` words (words 0-3 and 4-7 of a chunk) plus the ``[4 * CH, BN]`` headers: each
thread owns one 64-value chunk (two 16-byte loads, two whole sub-blocks) of every one of the program's ``BN`` rows
and the 16-byte header of that chunk's super-block; the ``CH`` chunks of a loop step (``CH / 4`` super-blocks) lie
on consecutive lanes. A thread quantizes its own 64 x values (``x[64 t, 64 t + 64)``, two chunks of 32, no
reduction across lanes) and reuses them for its ``BN`` rows: bf16 becomes fp32 by a shift of its bits, one FMA
rounds a value to int16 and one ``prmt`` packs a pair. Per chunk and row: 16 mask LOP3s and 32 ``dp2a`` into two
int32 sums, the two sub-blocks' ``d sc`` / ``dmin m`` from the header (about 20 instructions, branch-free with
per-thread shifts and masks, :func:`_scales`), then four FMAs in fp32 (the chunks' float sums carry Inf / NaN of
x). Optional register prefetch of the next step's words and headers; a K split is summed in the launch by the last
split to arrive (``qmm.store_result``). Offline sm_90 SASS (Triton 3.6, ``scripts/sass_probe.py q4k_idot``): 2.6
instructions per code with 4-row tiles, 2.0 with 8, 1.7 with 16 (240 registers), no shared memory in the loop, no
spills; ``q4k_mv`` takes 5.6 with its 16-row tiles.

Q5_K (``Q5K``; 176-byte super-blocks, 44 words: the header's 4, then 8 words of fifth bits, then the same 32 nibble
words, so every chunk stays 16-byte aligned): byte ``l`` of the fifth-bit words holds in bit ``j`` the fifth bit of
value ``32 j + l``, so fifth-bit word ``w`` serves nibble word ``w`` of every chunk (bits ``2 c``, ``2 c + 1`` of
its bytes: chunk ``c``'s low and high nibbles). Each thread loads the 8 fifth-bit words of its super-block beside its
chunk's nibble words (two more 16-byte loads; a super-block's 4 chunks read the same 32 bytes, L1 hits), shifts them
by ``6 - 2 c`` (its chunk's bits to bits 6 and 7 of each byte) and builds two words of code bytes per nibble word:
the low nibbles' codes times 4 (``w << 2``: bits 2-5, the bit at 6) and the high nibbles' times 8 (``w >> 1``: bits
3-6, the bit at 7), a shift and two LOP3s each (:func:`codes`). The ``dp2a`` are those of Q4_K, the sums carry
the factors 4 and 8 (below ``2**27`` as Q4_K's) and the scales divide them out. Offline sm_90 SASS (Triton 3.6):
3.3 instructions per code with 4-row tiles (Q4_K 2.7), 2.7 with 8 (255 registers with the prefetch, no spills);
``q4k_mv``'s Q5_K loop takes 7.2. The Q4_K kernels compile exactly as before (same SASS, 7 configurations).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter, leave_loop
from ...kernels.idot import HIGH_NIBBLES, LOW_NIBBLES, chunk_scale, code_idot, pack_pair, round_int
from ...kernels.loads import load_or_zero, pinned
from ...kernels.norm_handoff import handoff_rstd
from ...kernels.words import half_lo
from ..quant.affine_idot import thread_words
from ..quant.affine_mv import glu_row_tile, row_tile, store_row_tile
from .q4k_mv import Q5K_SB_WORDS, SB_WORDS

SBW = tl.constexpr(SB_WORDS)  # 32-bit words per super-block
Q5K_SBW = tl.constexpr(Q5K_SB_WORDS)  # Q5_K


@triton.jit
def _x_pairs(x_ptr, x_off, mask=None):
    """``(even, odd)``, ``[..., 4]`` fp32 each: values ``2 j`` and ``2 j + 1`` of the 8 x values at
    ``x_ptr + x_off`` (``[..., 8]``: ``[CH, 8]`` here, ``[R, CH, 8]`` in ``q4k_idot_rows.py``; one 16-byte load
    per thread and row; 0 where ``mask`` is False)."""
    v = load_or_zero(x_ptr + x_off, mask)
    if x_ptr.dtype.element_ty == tl.bfloat16:  # bf16 -> fp32 is a shift of the bits
        e, o = tl.split(tl.reshape(v.to(tl.uint16, bitcast=True).to(tl.int32), v.shape[:-1] + [4, 2]))
        return (e << 16).to(tl.float32, bitcast=True), (o << 16).to(tl.float32, bitcast=True)
    else:
        return tl.split(tl.reshape(v.to(tl.float32), v.shape[:-1] + [4, 2]))


@triton.jit
def x_chunk(x_ptr, x_off, ASM: tl.constexpr, mask=None):
    """The 32 x values of each thread's sub-block at ``x_ptr + x_off + [0, 32)`` (``x_off [..., 8]``) as int16
    pairs of consecutive values, ``[..., 4]`` per 8 values (``p_u``: values ``8 u .. 8 u + 7``), with their scale
    and float sum (``[...]``; ``mask``: chunks to load, 0 elsewhere)."""
    e0, o0 = _x_pairs(x_ptr, x_off, mask)
    e1, o1 = _x_pairs(x_ptr, x_off + 8, mask)
    e2, o2 = _x_pairs(x_ptr, x_off + 16, mask)
    e3, o3 = _x_pairs(x_ptr, x_off + 24, mask)
    amax = tl.maximum(tl.maximum(tl.maximum(tl.max(tl.abs(e0), axis=-1), tl.max(tl.abs(o0), axis=-1)),
                                 tl.maximum(tl.max(tl.abs(e1), axis=-1), tl.max(tl.abs(o1), axis=-1))),
                      tl.maximum(tl.maximum(tl.max(tl.abs(e2), axis=-1), tl.max(tl.abs(o2), axis=-1)),
                                 tl.maximum(tl.max(tl.abs(e3), axis=-1), tl.max(tl.abs(o3), axis=-1))))
    xsum = (((tl.sum(e0, axis=-1) + tl.sum(o0, axis=-1)) + (tl.sum(e1, axis=-1) + tl.sum(o1, axis=-1)))
            + ((tl.sum(e2, axis=-1) + tl.sum(o2, axis=-1)) + (tl.sum(e3, axis=-1) + tl.sum(o3, axis=-1))))
    inv, scale = chunk_scale(amax)
    inv = tl.expand_dims(inv, len(inv.shape))
    p0 = pack_pair(round_int(e0, inv), round_int(o0, inv), ASM)
    p1 = pack_pair(round_int(e1, inv), round_int(o1, inv), ASM)
    p2 = pack_pair(round_int(e2, inv), round_int(o2, inv), ASM)
    p3 = pack_pair(round_int(e3, inv), round_int(o3, inv), ASM)
    return p0, p1, p2, p3, scale, xsum


@triton.jit
def _cols(p):
    """``[C, 4]`` -> its 4 columns, ``[C, 1]`` each (broadcast over a tile's rows)."""
    C: tl.constexpr = p.shape[0]
    a, b = tl.split(tl.reshape(p, (C, 2, 2)))  # columns 0 2 / 1 3
    p0, p2 = tl.split(a)
    p1, p3 = tl.split(b)
    return p0[:, None], p1[:, None], p2[:, None], p3[:, None]


@triton.jit
def codes(w, t, HI: tl.constexpr, Q5K: tl.constexpr):
    """The code bytes of nibble word ``w`` for ``dp2a``: Q4_K the low nibbles (``w & 0x0F0F0F0F``) or, ``HI``, the
    high ones (16 x the codes, ``w & 0xF0F0F0F0``, no shift); ``Q5K`` with their fifth bits at bits 6 (low nibbles)
    / 7 (high) of each byte of ``t``: the low nibbles' codes times 4 (nibble at bits 2-5, the bit at 6) or, ``HI``,
    the high nibbles' times 8 (bits 3-6, the bit at 7), a shift and two LOP3s."""
    if Q5K:
        if HI:
            return ((w >> 1) & 0x78787878) | (t & -0x7F7F7F80)  # 0x80808080 as an int32
        return ((w << 2) & 0x3C3C3C3C) | (t & 0x40404040)
    return w & (HIGH_NIBBLES if HI else LOW_NIBBLES)


@triton.jit
def _word_pair(wa, wb, ta, tb, pl, ph, lo, hi, Q5K: tl.constexpr, ASM: tl.constexpr):
    """``(lo, hi)`` + the integer dots of nibble words ``2 u, 2 u + 1`` (``wa wb [CH, BN]``; Q5K: fifth bits ``ta
    tb``) of each chunk: the low-nibble codes (:func:`codes`) with the x pairs ``pl [CH, 4]`` (values ``8 u .. 8 u +
    7`` of the first 32), the high-nibble codes with ``ph`` (the same of the next 32)."""
    l0, l1, l2, l3 = _cols(pl)
    h0, h1, h2, h3 = _cols(ph)
    lo, hi = code_idot(codes(wa, ta, False, Q5K), codes(wa, ta, True, Q5K), l0, l1, h0, h1, lo, hi, ASM)
    return code_idot(codes(wb, tb, False, Q5K), codes(wb, tb, True, Q5K), l2, l3, h2, h3, lo, hi, ASM)


@triton.jit
def _scales(h, sa, sh, keep, magic):
    """``(S0, -B0, S1, -B1)`` ``[CH, BN]`` fp32: ``d sc`` and ``-dmin m`` of sub-blocks ``2 c, 2 c + 1`` from the
    super-block headers ``h [4 * CH, BN]`` (words ``d | dmin << 16`` and 12 bytes of scales ``q[0..11]``).

    Sub-block ``j < 4`` has ``sc = q[j] & 63``, ``m = q[j + 4] & 63``; ``j >= 4`` has ``sc = q[j + 4] & 15 |
    (q[j - 4] >> 6) << 4`` and ``m = q[j + 4] >> 4 | (q[j] >> 6) << 4``. Per thread (chunk ``c``): ``sa`` = 0
    (``c < 2``) or 2, ``keep`` = all bits or ``0xF0F0F0F0``, ``sh = 16 (c & 1)``; byte ``j % 4`` of
    ``(w0 >> sa) & keep | w2 & ~keep`` then holds ``sc`` in its 6 low bits, and of ``(w1 >> sa) & keep |
    (w2 >> 4) & ~keep`` ``m``; ``magic`` (0x4B000000, a runtime value) makes ``byte & 63 | magic`` the fp32
    ``2**23 + byte & 63`` in one LOP3, and one FMA with ``d``, ``-d 2**23`` is ``d sc``."""
    hdr, w0, w1, w2 = thread_words(h)
    sa = sa[:, None]
    sh = sh[:, None]
    keep = keep[:, None]
    t_sc = ((w0 >> sa) & keep) | (w2 & ~keep)
    t_m = ((w1 >> sa) & keep) | ((w2 >> 4) & ~keep)
    d = half_lo(hdr)
    dmin = half_lo(hdr >> 16)
    d_off = d * -8388608.0
    m_off = dmin * 8388608.0
    S0 = tl.fma(d, (((t_sc >> sh) & 63) | magic).to(tl.float32, bitcast=True), d_off)
    S1 = tl.fma(d, (((t_sc >> (sh + 8)) & 63) | magic).to(tl.float32, bitcast=True), d_off)
    nB0 = tl.fma(-dmin, (((t_m >> sh) & 63) | magic).to(tl.float32, bitcast=True), m_off)
    nB1 = tl.fma(-dmin, (((t_m >> (sh + 8)) & 63) | magic).to(tl.float32, bitcast=True), m_off)
    return S0, nB0, S1, nB1


@triton.jit
def _step(acc, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr, x_off, Q5K: tl.constexpr, ASM: tl.constexpr,
          x_mask=None):
    """``acc [CH, BN]`` + one loop step: words 0-3 / 4-7 of each thread's chunk ``wa wb [4 * CH, BN]``, headers
    ``h [4 * CH, BN]`` of their super-blocks (``sa sh keep``: see :func:`_scales`), x at ``x_ptr + x_off``
    (``[CH, 8]``: value 0 of each thread's chunk; ``x_mask [CH, 1]``: chunks to load, 0 elsewhere). ``Q5K``:
    ``qa qb`` are the fifth-bit words 0-3 / 4-7 of the super-blocks (bits ``2 c``, ``2 c + 1`` of each byte: the
    thread's chunk ``c``), moved to bits 6 / 7 by ``<< q_sh`` (``[CH, 1]``, ``6 - 2 c``) where they are used."""
    l0, l1, l2, l3, scale_l, sum_l = x_chunk(x_ptr, x_off, ASM, x_mask)  # values 0-31: sub-block 2 c
    h0, h1, h2, h3, scale_h, sum_h = x_chunk(x_ptr + 32, x_off, ASM, x_mask)  # values 32-63: sub-block 2 c + 1
    S0, nB0, S1, nB1 = _scales(h, sa, sh, keep, magic)
    w0, w1, w2, w3 = thread_words(wa)
    w4, w5, w6, w7 = thread_words(wb)
    t0, t1, t2, t3 = thread_words(qa)  # Q4_K: unused, compiled away
    t4, t5, t6, t7 = thread_words(qb)
    zero = tl.zeros(acc.shape, dtype=tl.int32)
    lo, hi = _word_pair(w0, w1, t0 << q_sh, t1 << q_sh, l0, h0, zero, zero, Q5K, ASM)
    lo, hi = _word_pair(w2, w3, t2 << q_sh, t3 << q_sh, l1, h1, lo, hi, Q5K, ASM)
    lo, hi = _word_pair(w4, w5, t4 << q_sh, t5 << q_sh, l2, h2, lo, hi, Q5K, ASM)
    lo, hi = _word_pair(w6, w7, t6 << q_sh, t7 << q_sh, l3, h3, lo, hi, Q5K, ASM)
    if Q5K:  # the code bytes are 4 x / 8 x the codes (Q4_K: 1 x / 16 x)
        scale_l = scale_l * 0.25
    acc = tl.fma(S0 * scale_l[:, None], lo.to(tl.float32), acc)
    acc = tl.fma(S1 * (scale_h * (0.125 if Q5K else 0.0625))[:, None], hi.to(tl.float32), acc)
    acc = tl.fma(nB0, sum_l[:, None], acc)
    return tl.fma(nB1, sum_h[:, None], acc)


@triton.jit
def tile_offsets(rows, STRIDE_W: tl.constexpr, CH: tl.constexpr, Q5K: tl.constexpr = False):
    """Per-thread constants of :func:`_scales` (``sa, sh, keep`` ``[CH]``) and of Q5_K's fifth bits (``q_sh [CH,
    1]``), and the offsets of a loop step's tiles for weight rows ``rows [BN]``: ``h_off, w_off [4 * CH, BN]`` (words
    of the headers / of words 0-3 of each chunk) and ``x_off [CH, 8]`` (value 0 of each chunk). ``Q5K``: 44-word
    super-blocks, the nibble words after 8 words of fifth bits (at ``h_off + 4``)."""
    c = tl.arange(0, CH) % 4  # each thread's chunk in its super-block
    sa = tl.where(c < 2, 0, 2)
    sh = (c & 1) * 16
    keep = tl.where(c < 2, -1, -0x0F0F0F10)  # 0xF0F0F0F0 as an int32
    # [4 * CH, BN]: element i is word i % 4 of chunk t = i // 4, i.e. of chunk t % 4 of super-block t // 4; each
    # thread's 4 words are one 16-byte load (runs of 4 words at multiples of 4), rows last (in registers)
    i = tl.arange(0, 4 * CH)
    h_off = ((i // 16) * (Q5K_SBW if Q5K else SBW) + i % 4)[:, None] + rows[None, :] * STRIDE_W
    w_off = h_off + ((12 if Q5K else 4) + ((i // 4) % 4) * 8)[:, None]
    x_off = tl.arange(0, CH)[:, None] * 64 + tl.arange(0, 8)[None, :]  # [CH, 8]: value 0 of each chunk
    q_sh = (6 - 2 * c)[:, None]  # Q5_K: a chunk's fifth bits to bits 6 / 7
    return sa, sh, keep, q_sh, h_off, w_off, x_off


@triton.jit
def step_tiles(w_ptr, w_off, h_off, base, mask=None):
    """A loop step's tiles at word ``base`` past the offsets of :func:`tile_offsets`: words 0-3 and 4-7 of each
    chunk and the headers of their super-blocks, ``(wa, wb, h)`` (0 where ``mask [4 * CH, 1]`` is False)."""
    return (load_or_zero(w_ptr + w_off + base, mask), load_or_zero(w_ptr + w_off + base + 4, mask),
            load_or_zero(w_ptr + h_off + base, mask))


@triton.jit
def _tiles(w_ptr, w_off, h_off, base, Q5K: tl.constexpr, mask=None):
    """:func:`step_tiles` and, ``Q5K``, the fifth-bit words 0-3 / 4-7 of each super-block: ``(wa, wb, h, qa,
    qb)`` (Q4_K: ``qa, qb`` are ``h``, unused)."""
    wa, wb, h = step_tiles(w_ptr, w_off, h_off, base, mask)
    if Q5K:
        return wa, wb, h, load_or_zero(w_ptr + h_off + base + 4, mask), load_or_zero(w_ptr + h_off + base + 8, mask)
    return wa, wb, h, h, h


@triton.jit(do_not_specialize=["steps_per_split", "magic"])
def q4k_idot_kernel(
    x_ptr,  # [K] activations, bf16 or fp16
    w_ptr,  # [N, K / 256 * 36] int32 words of the raw Q4_K rows
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, steps_per_split, magic,
    res_ptr, nw_ptr, scaled_ptr,  # NORM_OUT: [N] residual, [N] norm weight, [N] h * (weight + w_offset)
    parts_ptr,  # NORM_OUT: [tiles] fp32 sums of h^2 (written); NORM_IN: [NPARTS] (read)
    eps, w_offset,  # NORM_IN / NORM_OUT
    STRIDE_W: tl.constexpr, BN: tl.constexpr, CH: tl.constexpr, EVEN_N: tl.constexpr, PREFETCH: tl.constexpr,
    SPLIT_K: tl.constexpr, FUSE: tl.constexpr, ASM: tl.constexpr,
    NORM_OUT: tl.constexpr = False,  # hand off a norm: out = h = out + residual, normed = h * w, parts of sum(h^2)
    NORM_IN: tl.constexpr = False, PARTS: tl.constexpr = 1, NPARTS: tl.constexpr = 1,  # x is a handed-off h * w
    GLU: tl.constexpr = False, ACT: tl.constexpr = 0,  # w is a [2 N, K] gate/up pair: out = act(gate) * up
    PDL: tl.constexpr = False, TAIL: tl.constexpr = 0, Q5K: tl.constexpr = False,
):
    """Steps of ``CH`` chunks (``CH / 4`` super-blocks, ``64 * CH`` values of x): ``steps_per_split`` whole ones,
    then (``TAIL``, unsplit K, no ``GLU``) one of only its first ``TAIL`` chunks, loaded with the first step's.
    ``NORM_OUT`` / ``NORM_IN``: the norm handoff of ``affine_idot_kernel`` (``kernels/norm_handoff.py``). ``GLU``
    (no K split): ``BN // 2`` outputs a program (``affine_mv.glu_row_tile``; ``ACT`` a code of ``qmm.ACT_CODES``).
    ``Q5K``: the rows are Q5_K (``w_ptr``: ``[N, K / 256 * 44]`` words).
    """
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_k = tl.program_id(1)
    SB_W: tl.constexpr = Q5K_SBW if Q5K else SBW  # words per super-block
    STEP_W: tl.constexpr = CH // 4 * SB_W  # words of a row per loop step
    if GLU:
        rows, row_ok = glu_row_tile(N, BN, EVEN_N)
    else:
        rows, row_ok = row_tile(N, BN, EVEN_N)
    sa, sh, keep, q_sh, h_off, w_off, x_off = tile_offsets(rows, STRIDE_W, CH, Q5K)
    i_lo = pid_k * steps_per_split
    i_hi = i_lo + steps_per_split
    acc = tl.zeros([CH, BN], dtype=tl.float32)
    wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, i_lo * STEP_W, Q5K)
    if TAIL:  # the row's last, partial step, in flight with the first step's tiles
        wa_t, wb_t, h_t, qa_t, qb_t = _tiles(w_ptr, w_off, h_off, i_hi * STEP_W, Q5K,
                                             (tl.arange(0, 4 * CH) // 4 < TAIL)[:, None])
    if NORM_IN:  # read while the first weights are in flight
        rstd = handoff_rstd(parts_ptr, STRIDE_W // SB_W * 256, eps, PARTS, NPARTS)
    if PREFETCH:
        for s in range(i_lo, i_hi):  # this step's tiles taken at its top (kernels.loads.pinned)
            wa_s, wb_s, h_s = pinned(wa, ASM), pinned(wb, ASM), pinned(h, ASM)
            qa_s, qb_s = pinned(qa, ASM), pinned(qb, ASM)  # Q4_K: unused
            nxt = tl.minimum(s + 1, i_hi - 1)  # the last step reloads itself
            wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, nxt * STEP_W, Q5K)
            acc = _step(acc, wa_s, wb_s, h_s, qa_s, qb_s, sa, sh, keep, q_sh, magic, x_ptr + s * (CH * 64), x_off, Q5K,
                        ASM)
    else:
        acc = _step(acc, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr + i_lo * (CH * 64), x_off, Q5K, ASM)
        for s in range(i_lo + 1, i_hi):
            wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, s * STEP_W, Q5K)
            acc = _step(acc, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr + s * (CH * 64), x_off, Q5K, ASM)
    if TAIL:
        acc = _step(acc, wa_t, wb_t, h_t, qa_t, qb_t, sa, sh, keep, q_sh, magic, x_ptr + i_hi * (CH * 64), x_off,
                    Q5K, ASM, (tl.arange(0, CH) < TAIL)[:, None])
    leave_loop(PDL)  # PDL 3: the next launch may be scheduled from here
    res = tl.sum(acc, axis=0)
    if NORM_IN:  # the norm's 1 / rms is a factor of the whole (linear) product
        res = res * rstd
    store_row_tile(out_ptr, part_ptr, cnt_ptr, res, row_ok, N, res_ptr, nw_ptr, scaled_ptr, parts_ptr, w_offset, BN,
                   SPLIT_K, FUSE, NORM_OUT, GLU, ACT)


# ----------------------------------------------------------------------------- launch plans

from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import MAGIC, NO_NORM_ARGS, HandoffMvLaunch, split_count  # noqa: E402
from . import q4k_mv  # noqa: E402
from ...kernels import idot  # noqa: E402

# From the H100 sweep (bench/affine_mv_sweep.py --kernel q4k_idot, bench/results/2026-11-22-h100-session9/):
# 4-row tiles, 8-row tiles from BIG_TILES_PER_SM 8-row tiles per SM (Llama-3 head 4096 x 128256: 101.2 us against
# 117.4 with 4 rows); register prefetch from PREFETCH_MIN_STEPS loop steps per program (14336 x 4096, one warp,
# 7 steps: 18.5 us against 19.8; with one step it only reloads); 2 warps where K allows (on small grids also with a
# partial last step: TWO_WARPS_BELOW_TILES_PER_SM), no K split.
IDOT_BN = 4  # rows per program
BIG_BN = 8
BIG_TILES_PER_SM = 32
IDOT_MAX_WARPS = 2  # a loop step is 8 super-blocks of each row per warp
PROGRAMS_PER_SM = 1  # split K only below one program per SM
PREFETCH_MIN_STEPS = 4
# Plain calls on rows of whole 1-warp steps only (K / 256 an odd multiple of 8) take 2-warp steps and a partial last
# one where the grid holds fewer than TWO_WARPS_BELOW_TILES_PER_SM row tiles per SM (session 31 runs 6-7, H100, us,
# 1 -> 2 warps): 14336 x 1024 12.21 -> 8.42, 14336 x 2048 14.71 -> 11.00, 10240 x 2048 11.02 -> 8.52, 6144 x 1024
# 6.48 -> 4.58, 6144 x 2048 7.47 -> 5.92 (<= 3.9 tiles per SM); with more, one warp stays ahead: 14336 x 3072 (5.8)
# 15.30 against 18.44, 14336 x 4096 (7.8) 17.52 against 18.63. The norm handoff roles were not measured: they keep
# one warp.
TWO_WARPS_BELOW_TILES_PER_SM = 4
# Q5_K (session 36 run 1, H200, us, 4 -> 8-row tiles): rows of one whole step take 8-row tiles (4096 x 4096 8.65 ->
# 6.77, 4096 x 14336 19.63 -> 19.51); longer rows keep 4 (14336 x 4096 18.33 -> 23.86, 11008 x 4096 16.29 -> 19.49).


def step_warps(k: int) -> int:
    """Warps for rows of ``k`` columns (``kernels.idot.step_warps``; 8 super-blocks of a row per warp and step)."""
    return idot.step_warps(k // 256, 8, IDOT_MAX_WARPS)


def partial_warps(k: int) -> int:
    """Warps for rows of ``k`` columns of no whole number of steps: up to ``IDOT_MAX_WARPS`` whole ones, then a
    partial one (0 under one step of one warp, 8 super-blocks)."""
    return min(IDOT_MAX_WARPS, k // 256 // 8)


def supports(ggml_type: int, x_dtype: torch.dtype, out_dtype: torch.dtype, m: int, k: int, raw_bytes: int,
             pairs: bool = False) -> bool:
    """What ``q4k_mv`` takes with one row of bf16/fp16 x (Q4_K or Q5_K rows) and a bf16/fp16 result (x's quantization is
    within their error bar, not fp32's) and rows of at least one step (8 super-blocks; a partial last step after
    the whole ones, session 25 run 14), of whole steps for gate/up pairs (``pairs``) and the multi-row kernel;
    ``MLX_NATIVE_GGML_IDOT=0`` turns it off."""
    steps = step_warps(k) > 0 or not pairs and partial_warps(k) > 0
    return (env.settings.ggml_idot and ggml_type in (q4k_mv.Q4K_ID, q4k_mv.Q5K_ID) and m == 1
            and out_dtype != torch.float32 and steps and q4k_mv.supports(ggml_type, x_dtype, m, k, raw_bytes))


class Q4kIdotLaunch(HandoffMvLaunch):
    """:func:`q4k_idot_kernel` for ``(x [1, k], raw [n * k / 256 * 144] uint8)``; the raw rows are read as int32
    words (144-byte blocks keep each chunk's words 16-byte aligned). ``hand_off``: the producer of a norm handoff
    (:meth:`hand_off`, one program per row tile); ``take_parts``: a consumer of one with this many parts
    (:meth:`take`); ``act`` (a code of ``qmm.ACT_CODES``): ``raw`` holds ``2 n`` rows, gate then up, and calls
    return ``act(x G^T) * (x U^T)`` (``n`` outputs; no K split)."""

    q5k = False  # Q5_K rows (:class:`Q5kIdotLaunch`)

    def __init__(self, n: int, k: int, out_dtype: torch.dtype, device, bn: int = 0, warps: int = 0,
                 programs_per_sm: int = 0, prefetch: Optional[bool] = None, hand_off: bool = False,
                 take_parts: int = 0, act: Optional[int] = None):
        sms = device_info(device).sm_count
        rows = n if act is None else 2 * n
        plain = act is None and not hand_off and not take_parts  # (the norm handoff roles: not measured)
        big = triton.cdiv(rows, BIG_BN) >= BIG_TILES_PER_SM * sms
        one_step = k // 256 == 8 * step_warps(k)  # the whole row is one step
        bn = bn or (BIG_BN if big or self.q5k and plain and one_step else IDOT_BN)
        outs = bn if act is None else bn // 2  # outputs a program
        tiles = triton.cdiv(n, outs)
        if not warps:
            warps = step_warps(k) or partial_warps(k)
            if plain and tiles < TWO_WARPS_BELOW_TILES_PER_SM * sms:
                warps = max(warps, partial_warps(k))
        tail = k // 256 % (8 * warps) * 4  # chunks of a last, partial step (then K is not split)
        if tail and (act is not None or k // 256 < 8 * warps):
            raise ValueError(f"q4k_idot: {warps}-warp steps of a {k}-column row leave a partial step")
        steps = k // 256 // (8 * warps)
        target = 1 if hand_off or act is not None or tail else (programs_per_sm or PROGRAMS_PER_SM) * sms
        if prefetch is None:  # from PREFETCH_MIN_STEPS steps per program, after the split StreamedMvLaunch takes
            prefetch = steps // split_count(steps, tiles, target) >= PREFETCH_MIN_STEPS
        constexprs = dict(STRIDE_W=k // 256 * (Q5K_SB_WORDS if self.q5k else SB_WORDS), BN=bn, CH=32 * warps,
                          EVEN_N=n % outs == 0, PREFETCH=prefetch, ASM=not env.settings.triton_interpret,
                          GLU=act is not None, TAIL=tail, Q5K=self.q5k,
                          **self.role_constexprs(hand_off, take_parts, act))
        self.tiles = tiles
        super().__init__(q4k_idot_kernel, n, tiles, steps, 1, target, (n,), constexprs, out_dtype, device,
                         tail_ints=(MAGIC, *NO_NORM_ARGS), num_warps=warps, trigger="late")

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(x, raw.view(torch.int32))

    def hand_off(self, x, raw, residual, norm_weight,
                 weight_offset: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The producer of a norm handoff: see :meth:`~mlx_native.ops.quant.affine_mv.HandoffMvLaunch.run_hand_off`."""
        return self.run_hand_off((x, raw.view(torch.int32)), residual, norm_weight, weight_offset)

    def take(self, scaled, parts, eps: float, raw) -> torch.Tensor:
        """The consumer of a norm handoff: ``rms_norm(h) * weight @ W^T`` from ``scaled = h * weight`` and ``h``'s
        parts."""
        return self.run_take(scaled, parts, eps, (raw.view(torch.int32),))


class Q5kIdotLaunch(Q4kIdotLaunch):
    """:class:`Q4kIdotLaunch` for Q5_K rows (``raw [n * k / 256 * 176] uint8``, 176-byte blocks: 16-byte aligned
    chunks and fifth-bit words), with the same roles, tiles and rules."""

    q5k = True
