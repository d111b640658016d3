"""Decode mat-vec for GGUF Q4_K and Q5_K weights and one row of x (Q5_K: up to four), streamed like
``quant/affine_mv.py``. One row of at least one integer-dot step (8 super-blocks) takes ``q4k_idot.py`` instead,
Q5_K's 2-4 rows of whole steps ``q4k_idot_rows.py`` (session 36); this kernel keeps the shorter rows and
``MLX_NATIVE_GGML_IDOT=0``.

A Q4_K super-block (144 bytes) holds 256 values: ``d, dmin`` (fp16), twelve bytes of 6-bit sub-block
scales and mins, and 128 bytes of nibbles in four 64-value chunks. Word ``w`` (32 bits) of chunk ``c``
holds, in byte ``b``, value ``64 c + 4 w + b`` in its low nibble and ``64 c + 32 + 4 w + b`` in its high
nibble; the low nibbles belong to sub-block ``2 c``, the high ones to ``2 c + 1``, and value
``= d * sc * q - dmin * m`` with ``(sc, m)`` the sub-block's 6-bit scale and min.

Tiles are ``[8 words of a chunk, G chunks, BN rows]``: one word per thread and row, rows in registers,
the words of a chunk on adjacent lanes; x comes as ``[8, G, 8]`` (the 4 + 4 values of each word, two
8-byte runs) split into planes in registers, as in the affine kernel. Per word and row: 8 nibble decodes
(one LOP3 + one FMA each), 8 FMAs for ``sum q x``, and ``acc += S0 a0 + S1 a1 - B0 xs0 - B1 xs1`` with
``S = d * sc``, ``B = dmin * m`` of the word's two sub-blocks, decoded from the super-block's header
words once per chunk, row and step. The next step's words are loaded before the current one is decoded
(register prefetch); a K split is summed in the same launch (``qmm.store_result``).

Q5_K (``Q5K``, 176-byte super-blocks: 44 words) is Q4_K with a fifth bit per value: after the header's 4 words,
8 words ``qh`` (bytes 16-47), then the 32 nibble words. Byte ``l`` of ``qh`` holds in bit ``j`` the fifth bit
of value ``32 j + l``, so fifth-bit word ``w`` serves nibble word ``w`` of every chunk: bits ``2 c`` and
``2 c + 1`` of its bytes belong to the low and high nibbles of chunk ``c``. It is loaded per nibble word
(same tile and offsets; the 4 chunks of a super-block read the same 32 bytes, L1 hits) and prefetched with
it. Per word and row, the chunk's bits go to bits 6 and 7 of each byte (``qh << (6 - 2 c)``, one shift), and
two words hold the 5-bit codes in bytes: ``lo`` (``w << 2``: low nibble at bits 2-5, the bit at 6) and ``hi``
(``w >> 1``: high nibble at bits 3-6, the bit at 7), two LOP3 each; the decode masks 5 bits instead of 4
(``code_f32`` of 5 bits). That is 9 integer ops per word above Q4_K's 1 (about 4.1 instructions per code for decode and dot
against 3.1); the whole loop of a 16-row, 128-word step compiles (offline sm_90 SASS, Triton 3.9) to 916
instructions per thread, 7.2 per code (Q4_K: 787, 6.2), about 10.4 per weight byte (Q4_K: 10.9).

Rows of x (``MR``, 2 to 4; Q5_K): each word's eight codes are decoded once, then each row of x costs its x planes,
the 8 FMAs of ``a0, a1`` and the 4 of the scales and mins, one ``[8, G, BN]`` accumulator per row; the results
are joined into one ``store_result`` (``affine_mv.store_rows``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter
from ...kernels.loads import last_split, load_or_zero, pinned, tail_mask
from ...kernels.words import half_lo
from ..quant.affine_mv import code_f32, row_tile, store_rows, word_planes

SB_WORDS = 36  # 32-bit words per super-block: d|dmin, 3 scale words, 32 words of nibbles
QS_WORDS = 32  # nibble words per super-block
Q5K_SB_WORDS = 44  # Q5_K: d|dmin, 3 scale words, 8 words of fifth bits, 32 words of nibbles


@triton.jit
def _chunk_scales(hdr, s0, s1, s2, c):
    """fp32 ``(S0, B0, S1, B1)``: ``d * sc`` and ``dmin * m`` of sub-blocks ``2 c`` and ``2 c + 1`` from a
    super-block's header word ``hdr`` (d | dmin << 16) and scale words ``s0 s1 s2`` (bytes 0-11)."""
    d = half_lo(hdr)
    dmin = half_lo(hdr >> 16)
    sh = (c & 1) * 16  # the two sub-blocks' bytes start at byte 2 (c & 1) of each scale word
    a = s0 >> sh
    b = s1 >> sh
    e = s2 >> sh
    low = c < 2  # sub-blocks 0-3: plain 6-bit bytes; 4-7: 4 bits + the top 2 bits of bytes 0-7
    sc0 = tl.where(low, a & 63, (e & 15) | ((a >> 2) & 48))
    m0 = tl.where(low, b & 63, ((e >> 4) & 15) | ((b >> 2) & 48))
    sc1 = tl.where(low, (a >> 8) & 63, ((e >> 8) & 15) | ((a >> 10) & 48))
    m1 = tl.where(low, (b >> 8) & 63, ((e >> 12) & 15) | ((b >> 10) & 48))
    return d * sc0.to(tl.float32), dmin * m0.to(tl.float32), d * sc1.to(tl.float32), dmin * m1.to(tl.float32)


@triton.jit
def _word_dots(w, x0, x1, x2, x3, x4, x5, x6, x7, magic):
    """``[8, G, BN]`` ``(sum of low nibbles * x0..x3, sum of high nibbles * x4..x7)`` per word (one row of x: each
    code used as it is decoded; :func:`_word_codes` decodes them all first, for several rows)."""
    hi = w >> 16
    a0 = code_f32(w, 0, magic) * x0[:, :, None]
    a0 = tl.fma(code_f32(w, 8, magic), x1[:, :, None], a0)
    a0 = tl.fma(code_f32(w, 16, magic), x2[:, :, None], a0)
    a0 = tl.fma(code_f32(hi, 8, magic), x3[:, :, None], a0)
    a1 = code_f32(w, 4, magic) * x4[:, :, None]
    a1 = tl.fma(code_f32(w, 12, magic), x5[:, :, None], a1)
    a1 = tl.fma(code_f32(hi, 4, magic), x6[:, :, None], a1)
    a1 = tl.fma(code_f32(hi, 12, magic), x7[:, :, None], a1)
    return a0, a1


@triton.jit
def _q5_words(w, t):
    """The 5-bit codes of a Q5_K word ``w`` whose fifth bits ``t`` are aligned to bit 6 (low nibble's) and bit 7
    (high nibble's) of each byte: bits ``[8 b + 2, 8 b + 7)`` of ``lo`` (``w << 2``, bits 6-7 of each byte from
    ``t``) and bits ``[8 b + 3, 8 b + 8)`` of ``hi`` (``w >> 1``, bit 7 from ``t``); the bits around each field are
    left over and masked by the decode. Returns ``(lo, hi, lo >> 16, hi >> 16)``."""
    lo = ((w << 2) & 0x3F3F3F3F) | (t & -0x3F3F3F40)  # -0x3F3F3F40: 0xC0C0C0C0 as an int32
    hi = ((w >> 1) & 0x7F7F7F7F) | (t & -0x7F7F7F80)  # 0x80808080
    return lo, hi, lo >> 16, hi >> 16


@triton.jit
def _word_dots5(w, t, x0, x1, x2, x3, x4, x5, x6, x7, magic):
    """:func:`_word_dots` of a Q5_K word ``w`` and its fifth bits ``t`` (:func:`_q5_words`)."""
    lo, hi, lo3, hi2 = _q5_words(w, t)
    a0 = code_f32(lo, 2, magic, 5) * x0[:, :, None]
    a0 = tl.fma(code_f32(lo, 10, magic, 5), x1[:, :, None], a0)
    a0 = tl.fma(code_f32(lo, 18, magic, 5), x2[:, :, None], a0)
    a0 = tl.fma(code_f32(lo3, 10, magic, 5), x3[:, :, None], a0)
    a1 = code_f32(hi, 3, magic, 5) * x4[:, :, None]
    a1 = tl.fma(code_f32(hi, 11, magic, 5), x5[:, :, None], a1)
    a1 = tl.fma(code_f32(hi2, 3, magic, 5), x6[:, :, None], a1)
    a1 = tl.fma(code_f32(hi2, 11, magic, 5), x7[:, :, None], a1)
    return a0, a1


@triton.jit
def _word_codes(w, t, magic, Q5K: tl.constexpr):
    """fp32 codes ``[8, G, BN]`` of the nibble words ``w`` (Q5K: with their fifth bits ``t``, :func:`_q5_words`):
    the low nibbles of bytes 0-3, then the high ones, all decoded before use (for several rows of x)."""
    if Q5K:
        lo, hi, lo3, hi2 = _q5_words(w, t)
        return (code_f32(lo, 2, magic, 5), code_f32(lo, 10, magic, 5), code_f32(lo, 18, magic, 5),
                code_f32(lo3, 10, magic, 5), code_f32(hi, 3, magic, 5), code_f32(hi, 11, magic, 5),
                code_f32(hi2, 3, magic, 5), code_f32(hi2, 11, magic, 5))
    else:
        hi = w >> 16
        return (code_f32(w, 0, magic), code_f32(w, 8, magic), code_f32(w, 16, magic), code_f32(hi, 8, magic),
                code_f32(w, 4, magic), code_f32(w, 12, magic), code_f32(hi, 4, magic), code_f32(hi, 12, magic))


@triton.jit
def _codes_dots(q0, q1, q2, q3, q4, q5, q6, q7, x0, x1, x2, x3, x4, x5, x6, x7):
    """``[8, G, BN]`` ``(sum of low nibbles q0..q3 * x0..x3, sum of high nibbles q4..q7 * x4..x7)`` per word (x
    planes ``[8, G]``)."""
    a0 = q0 * x0[:, :, None]
    a0 = tl.fma(q1, x1[:, :, None], a0)
    a0 = tl.fma(q2, x2[:, :, None], a0)
    a0 = tl.fma(q3, x3[:, :, None], a0)
    a1 = q4 * x4[:, :, None]
    a1 = tl.fma(q5, x5[:, :, None], a1)
    a1 = tl.fma(q6, x6[:, :, None], a1)
    a1 = tl.fma(q7, x7[:, :, None], a1)
    return a0, a1


@triton.jit
def _x_sums(xp, x_off, mask=None):
    """One row of x of a step (``[8, G, 8]`` at ``xp + x_off``, 0 where ``mask [G]`` is False) as its 8 fp32 planes
    ``[8, G]`` and the sums of the low and high nibbles' planes."""
    x0, x1, x2, x3, x4, x5, x6, x7 = word_planes(
        load_or_zero(xp + x_off, None if mask is None else mask[None, :, None]).to(tl.float32))
    return x0, x1, x2, x3, x4, x5, x6, x7, (x0 + x1) + (x2 + x3), (x4 + x5) + (x6 + x7)


@triton.jit
def _scaled(acc, a0, a1, S0, B0, S1, B1, xs0, xs1):
    """``acc + S0 a0 + S1 a1 - B0 xs0 - B1 xs1`` (``[8, G, BN]``; ``S, B``: ``[G, BN]``, ``xs``: ``[8, G]``)."""
    acc = tl.fma(S0[None, :, :], a0, acc)
    acc = tl.fma(S1[None, :, :], a1, acc)
    acc = tl.fma(-B0[None, :, :], xs0[:, :, None], acc)
    return tl.fma(-B1[None, :, :], xs1[:, :, None], acc)


@triton.jit
def _row_acc(acc, q0, q1, q2, q3, q4, q5, q6, q7, S0, B0, S1, B1, xp, x_off, mask=None):
    """:func:`_scaled` of the row of x whose step is at ``xp`` (loaded here) against the decoded codes ``q``
    (:func:`_word_codes`)."""
    x0, x1, x2, x3, x4, x5, x6, x7, xs0, xs1 = _x_sums(xp, x_off, mask)
    a0, a1 = _codes_dots(q0, q1, q2, q3, q4, q5, q6, q7, x0, x1, x2, x3, x4, x5, x6, x7)
    return _scaled(acc, a0, a1, S0, B0, S1, B1, xs0, xs1)


@triton.jit
def _step(acc0, acc1, acc2, acc3, w, qh, w_ptr, h_off, base, xp, stride_x, x_off, c, q_sh, magic, Q5K: tl.constexpr,
          MR: tl.constexpr, mask=None):
    """``acc_r [8, G, BN]`` of rows ``r < MR`` of x (``stride_x`` apart) + one step: nibble words ``w`` (Q5K:
    fifth-bit words ``qh``) of the super-blocks at word ``base``, their headers loaded here, x at ``xp + x_off``
    (headers and x 0 where ``mask [G]`` is False). One row uses each code as it is decoded, in the order of x
    loads, scales, dots and x sums that keeps the Q5_K loop of 16-row tiles at 168 registers (the orders of the
    rows branch took 255, offline sm_90 SASS); several rows decode the codes once for all of them."""
    h_mask = None if mask is None else mask[:, None]
    hdr = load_or_zero(w_ptr + h_off + base, h_mask)
    s0 = load_or_zero(w_ptr + h_off + base + 1, h_mask)
    s1 = load_or_zero(w_ptr + h_off + base + 2, h_mask)
    s2 = load_or_zero(w_ptr + h_off + base + 3, h_mask)
    if MR == 1:
        x0, x1, x2, x3, x4, x5, x6, x7 = word_planes(
            load_or_zero(xp + x_off, None if mask is None else mask[None, :, None]).to(tl.float32))
        S0, B0, S1, B1 = _chunk_scales(hdr, s0, s1, s2, c[:, None])
        if Q5K:
            a0, a1 = _word_dots5(w, qh << q_sh, x0, x1, x2, x3, x4, x5, x6, x7, magic)
        else:
            a0, a1 = _word_dots(w, x0, x1, x2, x3, x4, x5, x6, x7, magic)
        acc0 = _scaled(acc0, a0, a1, S0, B0, S1, B1, (x0 + x1) + (x2 + x3), (x4 + x5) + (x6 + x7))
    else:
        S0, B0, S1, B1 = _chunk_scales(hdr, s0, s1, s2, c[:, None])
        q0, q1, q2, q3, q4, q5, q6, q7 = _word_codes(w, qh << q_sh, magic, Q5K)
        acc0 = _row_acc(acc0, q0, q1, q2, q3, q4, q5, q6, q7, S0, B0, S1, B1, xp, x_off, mask)
        acc1 = _row_acc(acc1, q0, q1, q2, q3, q4, q5, q6, q7, S0, B0, S1, B1, xp + stride_x, x_off, mask)
        if MR > 2:
            acc2 = _row_acc(acc2, q0, q1, q2, q3, q4, q5, q6, q7, S0, B0, S1, B1, xp + 2 * stride_x, x_off, mask)
        if MR > 3:
            acc3 = _row_acc(acc3, q0, q1, q2, q3, q4, q5, q6, q7, S0, B0, S1, B1, xp + 3 * stride_x, x_off, mask)
    return acc0, acc1, acc2, acc3


@triton.jit(do_not_specialize=["words_per_split", "magic"])
def q4k_mv_kernel(
    x_ptr,  # [MR, K] activations, bf16 or fp16, row stride stride_x
    w_ptr,  # [N, K / 256 * 36] int32 words of the raw Q4_K rows ([N, K / 256 * 44]: Q5_K)
    out_ptr,  # [MR, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, MR, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, stride_x, words_per_split, magic,
    STRIDE_W: tl.constexpr, N_QS: tl.constexpr, BN: tl.constexpr, WPS: tl.constexpr, EVEN_N: tl.constexpr,
    SPLIT_K: tl.constexpr, FUSE: tl.constexpr, Q5K: tl.constexpr = False,
    PDL: tl.constexpr = False, TAIL: tl.constexpr = 0, ASM: tl.constexpr = True, MR: tl.constexpr = 1,
):
    """Words are counted in nibble words (32 per super-block): ``N_QS = K / 8``; ``WPS`` and
    ``words_per_split`` are multiples of 32 (whole super-blocks) and ``words_per_split`` of ``WPS``. ``Q5K``:
    Q5_K super-blocks (44 words: the header's 4, 8 fifth-bit words, then the nibble words). ``TAIL``: the row
    ends in a step of only ``TAIL`` chunks (whole super-blocks) after the whole ones, run by the last K split (its
    words go out with the first step's). ``MR`` (1-4) rows of x (``stride_x`` read only for ``MR > 1``)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    SBW: tl.constexpr = 44 if Q5K else 36  # words per super-block
    QS0: tl.constexpr = 12 if Q5K else 4  # its first nibble word
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    G: tl.constexpr = WPS // 8  # chunks per step
    rows, row_ok = row_tile(N, BN, EVEN_N)
    wi = tl.arange(0, 8)
    gi = tl.arange(0, G)
    c = gi % 4
    # offsets at super-block 0 of the step: [8, G, BN] nibble words, [G, BN] header words of each chunk's block
    h_off = ((gi // 4) * SBW)[:, None] + rows[None, :] * STRIDE_W
    w_off = (QS0 + c * 8)[None, :, None] + wi[:, None, None] + h_off[None, :, :]
    q_sh = 0
    if Q5K:  # fifth-bit word of each nibble word (word w of every chunk: values 4 w .. 4 w + 3 of the chunk)
        q_off = (4 + wi)[:, None, None] + h_off[None, :, :]
        q_sh = (6 - 2 * c)[None, :, None]  # chunk c's fifth bits (bits 2 c, 2 c + 1 of each byte) to bits 6, 7
    p = tl.arange(0, 8)
    x_off = (gi * 64)[None, :, None] + (wi * 4)[:, None, None] + ((p // 4) * 32 + p % 4)[None, None, :]
    j_lo = pid_k * words_per_split
    j_hi = tl.minimum(N_QS, j_lo + words_per_split)
    acc = tl.zeros([8, G, BN], dtype=tl.float32)
    acc1, acc2, acc3 = acc, acc, acc  # rows 1-3 of x (MR > 1)
    if TAIL:  # the row's last, partial step: its first TAIL chunks, for the last split
        T0: tl.constexpr = N_QS // 32 - TAIL // 4  # its first super-block
        tail = tail_mask(gi, TAIL, last_split())
        w_t = load_or_zero(w_ptr + w_off + T0 * SBW, tail[None, :, None])
        qh_t = 0
        if Q5K:
            qh_t = load_or_zero(w_ptr + q_off + T0 * SBW, tail[None, :, None])
    base = (j_lo // 32) * SBW
    w = tl.load(w_ptr + w_off + base)
    qh = 0
    if Q5K:
        qh = tl.load(w_ptr + q_off + base)
    for j in range(j_lo, j_hi, WPS):  # this step's words taken at its top (kernels.loads.pinned)
        base = (j // 32) * SBW
        jn = tl.minimum(j + WPS, j_hi - WPS)
        w_j = pinned(w, ASM)
        qh_j = qh
        if Q5K:
            qh_j = pinned(qh, ASM)
            qh = tl.load(w_ptr + q_off + (jn // 32) * SBW)
        w = tl.load(w_ptr + w_off + (jn // 32) * SBW)
        acc, acc1, acc2, acc3 = _step(acc, acc1, acc2, acc3, w_j, qh_j, w_ptr, h_off, base, x_ptr + 8 * j, stride_x,
                                      x_off, c, q_sh, magic, Q5K, MR)
    if TAIL:
        acc, acc1, acc2, acc3 = _step(acc, acc1, acc2, acc3, w_t, qh_t, w_ptr, h_off, T0 * SBW, x_ptr + 256 * T0,
                                      stride_x, x_off, c, q_sh, magic, Q5K, MR, tail)
    store_rows(out_ptr, part_ptr, cnt_ptr + pid_n, acc, acc1, acc2, acc3, pid_n * BN + tl.arange(0, BN).to(tl.int64),
               row_ok, N, MR, SPLIT_K, FUSE, 2)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import StreamedMvLaunch, step_with_tail, x_row_stride_of  # noqa: E402

# From the H100 sweep (bench/gguf_mv_sweep.py, bench/results/2026-11-22-h100-session5/q4k_sweep.log): 16-row
# tiles beat 8-row ones on every Llama-3-8B shape (4096 x 28672: 37.5 against 44.0 us; the word-level kernel
# 96.1), and a K split only lost (14336 x 4096: 21.2 us unsplit, 25.0 at 2 programs per SM).
Q4K_ID = 12
Q5K_ID = 13
Q4K_MAX_WPS = 128  # nibble words per loop step (4 super-blocks; a partial last one where tiling says)
Q4K_BN = 16  # rows per program
PROGRAMS_PER_SM = 1  # split K until about this many programs per SM
# Q5_K: Q4_K's tiling, not swept on a GPU yet (offline sm_90 SASS, Triton 3.9: 16-row tiles use 255 registers
# without spills, 8-row ones 168)
Q5K_MAX_WPS = 128
Q5K_BN = 16
Q5K_PROGRAMS_PER_SM = 1
# Q5_K with 2 to ROWS_MAX rows of x (a few tokens decoded at once) streams the weights once (``MR``), each word's
# codes decoded once for all rows, in tiles of ROWS_BN rows (the one-row tiles of 16 would not fit the registers).
# H200 session 35 run 3 (bench/gguf_mv_sweep.py --types Q5_K --rows 1,2,3,4), us, K x N 4096 x 14336 / 14336 x
# 4096 / 4096 x 4096: one row 23.1 / 23.2 / 8.7; 2 rows 42.6 / 53.0 / 17.2, 3 rows 61.8 / 67.1 / 21.1, 4 rows 75.9 /
# 81.2 / 25.4; the tiled decode kernel these calls took before: 100 / 89 / 31 at every row count. 4-row tiles were
# 6-62% slower; the K split target made no difference. The loop is issue-bound (offline sm_90 SASS, 8-row tiles:
# 10.6 / 16.6 instructions a code for 2 / 4 rows, one row 6.75 in 16-row tiles).
ROWS_MAX = 4
ROWS_BN = 8


def supports(ggml_type: int, x_dtype: torch.dtype, m: int, k: int, raw_bytes: int) -> bool:
    """One row of bf16/fp16 x against Q4_K or Q5_K rows, or 2 to ``ROWS_MAX`` rows against Q5_K
    (``MLX_NATIVE_GGUF_MV=0`` turns it off)."""
    return (env.settings.gguf_mv and (ggml_type in (Q4K_ID, Q5K_ID) and m == 1
                                      or ggml_type == Q5K_ID and 1 <= m <= ROWS_MAX)
            and x_dtype in (torch.bfloat16, torch.float16) and k % 256 == 0 and raw_bytes < 2**31)


def tiling(k: int, max_wps: int = Q4K_MAX_WPS, tiles: int = 0, target: int = 0) -> tuple[int, int]:
    """``(nibble words per loop step, chunks of a last partial step)`` for rows of ``k`` columns in ``tiles`` row
    tiles, K split for ``target`` programs: the most whole super-blocks, up to ``max_wps`` words, that divide the
    row, or steps of ``max_wps`` words and a partial one where
    :func:`~mlx_native.ops.quant.affine_mv.step_with_tail` takes them (K = 11008: 10 steps of 4 super-blocks, then
    one of 3). H100 session 26 run 1, Q5_K on 4096 x 14336: steps of 1 / 2 / 4 super-blocks 32.5 / 26.3 / 25.6
    us."""
    wps, tail = step_with_tail(k // 8, max_wps, 1, lambda wps: tiles, target)
    return wps, tail // 8


class Q4kMvLaunch(StreamedMvLaunch):
    """:func:`q4k_mv_kernel` for ``(x [1, k], raw [n * k / 256 * 144] uint8)``; the raw rows are read as int32
    words (144-byte blocks keep them 4-byte aligned)."""

    def __init__(self, n: int, k: int, out_dtype: torch.dtype, device):
        wps, tail = tiling(k, Q4K_MAX_WPS, triton.cdiv(n, Q4K_BN), PROGRAMS_PER_SM * device_info(device).sm_count)
        super().__init__(q4k_mv_kernel, n, triton.cdiv(n, Q4K_BN), k // 8 // wps, wps,
                         PROGRAMS_PER_SM * device_info(device).sm_count, (n, k), dict(
                             STRIDE_W=k // 256 * SB_WORDS, N_QS=k // 8, BN=Q4K_BN, WPS=wps, EVEN_N=n % Q4K_BN == 0,
                             Q5K=False, TAIL=tail, ASM=not env.settings.triton_interpret, MR=1), out_dtype, device)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(x, raw.view(torch.int32))


class Q5kMvLaunch(StreamedMvLaunch):
    """:func:`q4k_mv_kernel` with ``Q5K`` for ``(x [m, k], raw [n * k / 256 * 176] uint8)`` -> ``[m, n]``; the raw
    rows are read as int32 words (176-byte blocks keep them 4-byte aligned, 16-byte aligned where the buffer is). x:
    unit column stride, row stride ``x_row_stride`` (default ``k``; a plan-time constant, read only for ``m > 1``)."""

    def __init__(self, n: int, k: int, out_dtype: torch.dtype, device, m: int = 1, x_row_stride=None):
        stride_x = x_row_stride_of("q4k_mv", m, k, x_row_stride, ROWS_MAX)
        bn = Q5K_BN if m == 1 else ROWS_BN
        sms = device_info(device).sm_count
        wps, tail = tiling(k, Q5K_MAX_WPS, triton.cdiv(n, bn), Q5K_PROGRAMS_PER_SM * sms)
        super().__init__(q4k_mv_kernel, n, triton.cdiv(n, bn), k // 8 // wps, wps, Q5K_PROGRAMS_PER_SM * sms,
                         (n, stride_x), dict(STRIDE_W=k // 256 * Q5K_SB_WORDS, N_QS=k // 8, BN=bn, WPS=wps,
                                             EVEN_N=n % bn == 0, Q5K=True, TAIL=tail, MR=m,
                                             ASM=not env.settings.triton_interpret), out_dtype, device, m=m)

    __call__ = Q4kMvLaunch.__call__
