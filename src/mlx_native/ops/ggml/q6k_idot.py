"""Decode mat-vec for GGUF Q6_K weights and one row of x, by integer dot products.

``out[n] = sum_b d_b sum_g sc_g sum_{k in g} (q[n, k] - 32) x[k]`` over the super-blocks ``b`` (256 values) and
their 16-value groups ``g`` (layout in ``q6k_mv.py``: bytes 0-127 low nibbles ``ql``, 128-191 high bit pairs
``qh``, 192-207 int8 scales, 208-209 fp16 ``d``; value ``128 h + 32 r + l`` of half ``h``, row ``r`` (0-3),
position ``l`` (0-31) takes its low nibble from ql byte ``64 h + l`` (rows 0, 2: low / high nibble) or ``64 h +
32 + l`` (rows 1, 3), its high pair from bits ``2 r`` of qh byte ``128 + 32 h + l``, and scale ``8 h + 2 r + l //
16``).

The integer dot of ``kernels/idot.py``, as in ``q4k_idot.py``: x is quantized per 16 values (one group) to int16
with a power-of-two scale, ``dp2a`` multiplies two codes by two x values. For four positions ``l .. l + 3`` the
words ``A`` (ql at ``l``), ``B`` (ql at ``32 + l``) and ``H`` (qh at ``l``) hold the codes of all four rows; their
6-bit code bytes are ``A & 0x0F0F0F0F | (H << 4) & 0x30303030`` (row 0), ``B & .. | (H << 2) & ..`` (row 1),
``(A >> 4) & .. | H & ..`` (row 2) and ``(B >> 4) & .. | (H >> 2) & ..`` (row 3): 9 instructions for 16 codes,
then two ``dp2a`` each against the x pairs of those positions. A group's int32 sum (at most ``16 * 63 * 2**14``)
becomes fp32 exactly; per group and weight row ``t += sc (scale * sum - 32 xsum)`` (``xsum`` the group's float sum
of x, which carries Inf / NaN of x), per super-block ``acc += d t``.

Alignment. Super-blocks are 210 bytes, so only every eighth one starts 16-byte aligned: super-block ``j`` of a run
of 8 aligned ones starts ``2 j`` bytes past byte ``208 j`` (a multiple of 16). Rows of a multiple of 8 super-blocks
(K a multiple of 2048) keep every row and every 8-super-block loop step 16-byte aligned, and the loop body runs
the step's 8 super-blocks one after the other with ``j`` a compile-time constant: a 16-byte run of a super-block
is read as the two aligned 16-byte words around it and its four words are fixed registers of those eight, taken
as they are (``j`` even) or joined from neighbours by one ``prmt`` each (``j`` odd, :func:`_shift16`).

Tiles are ``[16, 8, BN / 8]`` words (one warp): the four lanes of a weight row each own a quarter of every
super-block, quarter ``c = 2 h + s`` the positions ``16 s .. 16 s + 15`` of half ``h`` (its 16-byte runs of ``A``,
``B`` and ``H``, the four groups ``8 h + 2 r + s`` of rows ``r``), eight weight rows side by side on the lanes and
``BN / 8`` rows of each lane in registers; a lane quantizes the 64 x values of its quarter (x read as int32 words,
``[16, 8, 1]`` tiles laid out as the weights', no layout conversion) and reuses them for its rows. Per super-block,
quarter and row: six 16-byte loads (three at ``j = 0``), two more for the aligned bytes 192-223 that hold the
scales and ``d`` (a lane of half 1 takes its scale words 8 bytes on, one select a word), 32 ``dp2a``.
``PREFETCH``: the next super-block's tiles are loaded before this one is computed. Offline sm_90 SASS (Triton 3.6,
``scripts/sass_probe.py q6k_idot``): 4.5 instructions a code with 16-row tiles (128 registers), 3.2 with 32 (255,
no spills); x's quantization is about 2.5 of the 4.5. A K split is summed in the launch by the last split to arrive
(``qmm.store_result``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter
from ...kernels.idot import LOW_NIBBLES, chunk_scale, dp2a, pack_pair, round_int
from ...kernels.loads import pinned
from ...kernels.words import half_lo, x_pair
from ..quant.affine_idot import thread_words
from ..quant.affine_mv import store_row_tile

STEP_SBS = 8  # super-blocks per loop step: 1680 bytes, 16-byte aligned
STEP_WORDS = tl.constexpr(420)  # 32-bit words per step
PAIRS = tl.constexpr(0x30303030)  # the high pair's bits 4-5 of each code byte


@triton.jit
def _shift16(lo, hi, ASM: tl.constexpr):
    """The word of bytes 2-3 of ``lo`` and 0-1 of ``hi`` (one ``prmt``, ``ASM``; else integer ops)."""
    if ASM:
        return tl.inline_asm_elementwise("prmt.b32 $0, $1, $2, 0x5432;", "=r,r,r", [lo, hi], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:
        return ((lo >> 16) & 0xFFFF) | (hi << 16)


@triton.jit
def _pick(a0, a1, a2, a3, a4, a5, a6, a7, J: tl.constexpr, ASM: tl.constexpr):
    """Words 0-3 of the 16 bytes that start ``2 J`` bytes into the words ``a0 .. a7`` (``J // 2`` words in, then
    joined from neighbours for ``J`` odd)."""
    O: tl.constexpr = J // 2
    if O == 0:
        w0, w1, w2, w3, w4 = a0, a1, a2, a3, a4
    elif O == 1:
        w0, w1, w2, w3, w4 = a1, a2, a3, a4, a5
    elif O == 2:
        w0, w1, w2, w3, w4 = a2, a3, a4, a5, a6
    else:
        w0, w1, w2, w3, w4 = a3, a4, a5, a6, a7
    if J % 2:
        w0, w1, w2, w3 = _shift16(w0, w1, ASM), _shift16(w1, w2, ASM), _shift16(w2, w3, ASM), _shift16(w3, w4, ASM)
    return w0, w1, w2, w3


@triton.jit
def _run(v0, v1, J: tl.constexpr, ASM: tl.constexpr):
    """The four words ``[4, G, R]`` of each lane's 16-byte run of super-block ``J`` of a loop step from the aligned
    words ``v0`` (``[16, G, R]``, the run starts ``2 J`` bytes in) and ``v1`` (the next 16 bytes; unused for ``J =
    0``)."""
    a0, a1, a2, a3 = thread_words(v0)
    if J == 0:
        return a0, a1, a2, a3
    a4, a5, a6, a7 = thread_words(v1)
    return _pick(a0, a1, a2, a3, a4, a5, a6, a7, J, ASM)


@triton.jit
def _sb_tiles(p, a_off, h_off, t_off, J: tl.constexpr):
    """The raw ``[16, G, R]`` tiles of super-block ``J`` of the loop step whose words start at ``p``: ``(A, A + 16
    bytes, B, B + 16, H, H + 16, T, T + 16)`` at each lane's ql run ``a_off`` (``B``: 32 bytes on), qh run ``h_off``
    and the aligned bytes 192-223 of scales and ``d`` (``t_off``), in the aligned 16 bytes where the run starts
    (``J = 0``: the runs are aligned, the second words repeat the first)."""
    q = p + J * 52  # the aligned 16 bytes the super-block starts in (208 J bytes)
    va0 = tl.load(q + a_off)
    vb0 = tl.load(q + a_off + 8)
    vh0 = tl.load(q + h_off)
    if J == 0:
        va1, vb1, vh1 = va0, vb0, vh0
    else:
        va1 = tl.load(q + a_off + 4)
        vb1 = tl.load(q + a_off + 12)
        vh1 = tl.load(q + h_off + 4)
    return va0, va1, vb0, vb1, vh0, vh1, tl.load(q + t_off), tl.load(q + t_off + 4)


@triton.jit
def _scale(w, sh):
    """fp32 of the int8 at bit ``sh`` of ``w``."""
    return (w >> sh).to(tl.int8).to(tl.float32)


@triton.jit
def _tail(t0, t1, hi_half, sh, J: tl.constexpr):
    """``(sc0, sc1, sc2, sc3, d)`` ``[4, G, R]`` fp32 of super-block ``J`` of a loop step: the int8 scales of each
    lane's four groups and the block's ``d``, from the aligned 32 bytes ``t0, t1`` (``[16, G, R]``: bytes 192-223
    of the aligned super-block, scales from byte ``2 J``, ``d`` at ``16 + 2 J``). ``hi_half``: the lane's half is 1
    (its scales 8 bytes on), ``sh [4, 1, 1]``: ``8 s``, its scales' byte in their pair."""
    a0, a1, a2, a3 = thread_words(t0)
    a4, a5, a6, a7 = thread_words(t1)
    # the lane's 8 scale bytes start at byte 8 h + 2 J: words J // 2 .. J // 2 + 2 of the half's words
    b0 = tl.where(hi_half, a2, a0)
    b1 = tl.where(hi_half, a3, a1)
    b2 = tl.where(hi_half, a4, a2)
    b3 = tl.where(hi_half, a5, a3)
    b4 = tl.where(hi_half, a6, a4)
    b5 = tl.where(hi_half, a7, a5)
    w0, w1, w2, w3 = _pick(b0, b1, b2, b3, b4, b5, b5, b5, J, False)  # bytes 2 J .. 2 J + 7 (w2, w3 unused)
    d, w5, w6, w7 = _pick(a4, a5, a6, a7, a7, a7, a7, a7, J, False)  # d: bytes 16 + 2 J, 17 + 2 J
    return _scale(w0, sh), _scale(w0, sh + 16), _scale(w1, sh), _scale(w1, sh + 16), half_lo(d)


@triton.jit
def _x_group(xw_ptr, x_off, X_BF16: tl.constexpr, ASM: tl.constexpr):
    """Each lane's 16 x values at words ``xw_ptr + x_off`` and ``+ 4`` (``x_off [16, G, 1]``) as 8 int16 pairs of
    consecutive values (``[4, G, 1]`` each), with their scale and float sum."""
    w0, w1, w2, w3 = thread_words(tl.load(xw_ptr + x_off))
    w4, w5, w6, w7 = thread_words(tl.load(xw_ptr + x_off + 4))
    e0, o0 = x_pair(w0, X_BF16)
    e1, o1 = x_pair(w1, X_BF16)
    e2, o2 = x_pair(w2, X_BF16)
    e3, o3 = x_pair(w3, X_BF16)
    e4, o4 = x_pair(w4, X_BF16)
    e5, o5 = x_pair(w5, X_BF16)
    e6, o6 = x_pair(w6, X_BF16)
    e7, o7 = x_pair(w7, X_BF16)
    m = tl.maximum(tl.maximum(tl.maximum(tl.abs(e0), tl.abs(o0)), tl.maximum(tl.abs(e1), tl.abs(o1))),
                   tl.maximum(tl.maximum(tl.abs(e2), tl.abs(o2)), tl.maximum(tl.abs(e3), tl.abs(o3))))
    m = tl.maximum(m, tl.maximum(tl.maximum(tl.maximum(tl.abs(e4), tl.abs(o4)), tl.maximum(tl.abs(e5), tl.abs(o5))),
                                 tl.maximum(tl.maximum(tl.abs(e6), tl.abs(o6)), tl.maximum(tl.abs(e7), tl.abs(o7)))))
    xsum = (((e0 + o0) + (e1 + o1)) + ((e2 + o2) + (e3 + o3))) + (((e4 + o4) + (e5 + o5)) + ((e6 + o6) + (e7 + o7)))
    inv, scale = chunk_scale(m)
    p0 = pack_pair(round_int(e0, inv), round_int(o0, inv), ASM)
    p1 = pack_pair(round_int(e1, inv), round_int(o1, inv), ASM)
    p2 = pack_pair(round_int(e2, inv), round_int(o2, inv), ASM)
    p3 = pack_pair(round_int(e3, inv), round_int(o3, inv), ASM)
    p4 = pack_pair(round_int(e4, inv), round_int(o4, inv), ASM)
    p5 = pack_pair(round_int(e5, inv), round_int(o5, inv), ASM)
    p6 = pack_pair(round_int(e6, inv), round_int(o6, inv), ASM)
    p7 = pack_pair(round_int(e7, inv), round_int(o7, inv), ASM)
    return p0, p1, p2, p3, p4, p5, p6, p7, scale, xsum


@triton.jit
def _quad(a, b, h, pl0, ph0, pl1, ph1, pl2, ph2, pl3, ph3, s0, s1, s2, s3, ASM: tl.constexpr):
    """The group sums ``s_r`` of rows 0-3 + the integer dots of four positions' codes (words ``a`` = ql at ``l``,
    ``b`` = ql at ``32 + l``, ``h`` = qh at ``l``) with x pairs ``pl_r`` (positions ``l, l + 1`` of row ``r``) and
    ``ph_r`` (``l + 2, l + 3``)."""
    c0 = (a & LOW_NIBBLES) | ((h << 4) & PAIRS)
    c1 = (b & LOW_NIBBLES) | ((h << 2) & PAIRS)
    c2 = ((a >> 4) & LOW_NIBBLES) | (h & PAIRS)
    c3 = ((b >> 4) & LOW_NIBBLES) | ((h >> 2) & PAIRS)
    s0 = dp2a(ph0, c0, dp2a(pl0, c0, s0, False, ASM), True, ASM)
    s1 = dp2a(ph1, c1, dp2a(pl1, c1, s1, False, ASM), True, ASM)
    s2 = dp2a(ph2, c2, dp2a(pl2, c2, s2, False, ASM), True, ASM)
    s3 = dp2a(ph3, c3, dp2a(pl3, c3, s3, False, ASM), True, ASM)
    return s0, s1, s2, s3


@triton.jit
def _group(t, s, sc, scale, xsum):
    """``t + sc (scale s - 32 xsum)``: a group's integer sum ``s`` with its scale ``sc`` (fp32 ``[4, G, R]``) and
    x's scale and float sum (``[4, G, 1]``)."""
    return tl.fma(sc, tl.fma(scale, s.to(tl.float32), -32.0 * xsum), t)


@triton.jit
def _super_block(acc, va0, va1, vb0, vb1, vh0, vh1, t0, t1, hi_half, sh, xw_ptr, x_off, J: tl.constexpr,
                 X_BF16: tl.constexpr, ASM: tl.constexpr):
    """``acc [4, G, R]`` + super-block ``J`` of a loop step from its tiles (:func:`_sb_tiles`) and x of the step at
    word ``xw_ptr`` + ``x_off [16, G, 1]`` (each lane's first x word)."""
    a0, a1, a2, a3 = _run(va0, va1, J, ASM)
    b0, b1, b2, b3 = _run(vb0, vb1, J, ASM)
    h0, h1, h2, h3 = _run(vh0, vh1, J, ASM)
    sc0, sc1, sc2, sc3, d = _tail(t0, t1, hi_half, sh, J)
    xp = xw_ptr + J * 128
    x00, x01, x02, x03, x04, x05, x06, x07, scale0, xsum0 = _x_group(xp, x_off, X_BF16, ASM)  # row 0 of the half
    x10, x11, x12, x13, x14, x15, x16, x17, scale1, xsum1 = _x_group(xp + 16, x_off, X_BF16, ASM)
    x20, x21, x22, x23, x24, x25, x26, x27, scale2, xsum2 = _x_group(xp + 32, x_off, X_BF16, ASM)
    x30, x31, x32, x33, x34, x35, x36, x37, scale3, xsum3 = _x_group(xp + 48, x_off, X_BF16, ASM)
    z = tl.zeros(acc.shape, dtype=tl.int32)
    s0, s1, s2, s3 = _quad(a0, b0, h0, x00, x01, x10, x11, x20, x21, x30, x31, z, z, z, z, ASM)
    s0, s1, s2, s3 = _quad(a1, b1, h1, x02, x03, x12, x13, x22, x23, x32, x33, s0, s1, s2, s3, ASM)
    s0, s1, s2, s3 = _quad(a2, b2, h2, x04, x05, x14, x15, x24, x25, x34, x35, s0, s1, s2, s3, ASM)
    s0, s1, s2, s3 = _quad(a3, b3, h3, x06, x07, x16, x17, x26, x27, x36, x37, s0, s1, s2, s3, ASM)
    t = _group(tl.zeros(acc.shape, dtype=tl.float32), s0, sc0, scale0, xsum0)
    t = _group(t, s1, sc1, scale1, xsum1)
    t = _group(t, s2, sc2, scale2, xsum2)
    t = _group(t, s3, sc3, scale3, xsum3)
    return tl.fma(d, t, acc)


@triton.jit(do_not_specialize=["steps_per_split"])
def q6k_idot_kernel(
    x_ptr,  # [K] activations, bf16 or fp16 (read as int32 words of two values)
    w_ptr,  # [N, K / 256 * 52.5] int32 words of the raw Q6_K rows (K a multiple of 2048)
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, steps_per_split,
    STRIDE_W: tl.constexpr, BN: tl.constexpr, EVEN_N: tl.constexpr, PREFETCH: tl.constexpr, SPLIT_K: tl.constexpr,
    FUSE: tl.constexpr, ASM: tl.constexpr, PDL: tl.constexpr = False,
):
    """Loop steps of 8 super-blocks (``STEP_WORDS`` words of each row), ``steps_per_split`` of them a program. Tiles
    are ``[16, 8, BN / 8]``: word ``i % 4`` of lane quarter ``i // 4``, 8 rows side by side on the lanes, the rest
    in registers (one warp). ``PREFETCH``: each super-block's weight tiles are loaded while the one before is
    computed (the step's last loads the next step's first; the last step reloads its own)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    X_BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    R: tl.constexpr = BN // 8
    g = tl.arange(0, 8)
    rows3 = tl.program_id(0) * BN + g[:, None] + 8 * tl.arange(0, R)[None, :]  # [8, R]
    row_ok = tl.reshape(tl.permute(rows3, (1, 0)), (BN,)) < N  # the order of tl.sum's [BN] below
    if not EVEN_N:
        rows3 = tl.where(rows3 < N, rows3, 0)
    i = tl.arange(0, 16)  # word i % 4 of lane quarter c = i // 4 = 2 h + s
    half = i // 8
    run = 4 * ((i // 4) % 2) + i % 4  # words of quarter s in 32 bytes
    row_w = (rows3 * STRIDE_W)[None, :, :]
    a_off = (16 * half + run)[:, None, None] + row_w  # ql at 64 h + 16 s (+ 32: the B run, 8 words on)
    h_off = (32 + 8 * half + run)[:, None, None] + row_w  # qh at 128 + 32 h + 16 s
    t_off = (48 + i % 4)[:, None, None] + row_w  # scales and d: aligned bytes 192-223
    c = tl.arange(0, 4)[:, None, None]
    hi_half = c >= 2
    sh = 8 * (c % 2)
    x_off = (64 * half + 8 * ((i // 4) % 2) + i % 4)[:, None, None] + 0 * g[None, :, None]  # [16, 8, 1]: x word
    # 64 h + 8 s (values 128 h + 16 s, row 0 of the lane's groups)
    xw_ptr = x_ptr.to(tl.pointer_type(tl.int32))
    acc = tl.zeros([4, 8, R], dtype=tl.float32)
    i_lo = tl.program_id(1) * steps_per_split
    i_hi = i_lo + steps_per_split
    if PREFETCH:
        c0, c1, c2, c3, c4, c5, c6, c7 = _sb_tiles(w_ptr + i_lo * STEP_WORDS, a_off, h_off, t_off, 0)
        for st in range(i_lo, i_hi):
            p = w_ptr + st * STEP_WORDS
            xp = xw_ptr + st * 1024
            c0, c1, c2, c3 = pinned(c0, ASM), pinned(c1, ASM), pinned(c2, ASM), pinned(c3, ASM)
            c4, c5, c6, c7 = pinned(c4, ASM), pinned(c5, ASM), pinned(c6, ASM), pinned(c7, ASM)
            for J in tl.static_range(8):
                if J < 7:
                    n0, n1, n2, n3, n4, n5, n6, n7 = _sb_tiles(p, a_off, h_off, t_off, J + 1)
                else:
                    n0, n1, n2, n3, n4, n5, n6, n7 = _sb_tiles(w_ptr + tl.minimum(st + 1, i_hi - 1) * STEP_WORDS,
                                                               a_off, h_off, t_off, 0)
                acc = _super_block(acc, c0, c1, c2, c3, c4, c5, c6, c7, hi_half, sh, xp, x_off, J, X_BF16, ASM)
                c0, c1, c2, c3, c4, c5, c6, c7 = n0, n1, n2, n3, n4, n5, n6, n7
    else:
        for st in range(i_lo, i_hi):
            p = w_ptr + st * STEP_WORDS
            xp = xw_ptr + st * 1024
            for J in tl.static_range(8):
                c0, c1, c2, c3, c4, c5, c6, c7 = _sb_tiles(p, a_off, h_off, t_off, J)
                acc = _super_block(acc, c0, c1, c2, c3, c4, c5, c6, c7, hi_half, sh, xp, x_off, J, X_BF16, ASM)
    res = tl.reshape(tl.permute(tl.sum(acc, axis=0), (1, 0)), (BN,))  # row g + 8 r at 8 r + g
    store_row_tile(out_ptr, part_ptr, cnt_ptr, res, row_ok, N, 0, 0, 0, 0, 0.0, BN, SPLIT_K, FUSE, False, False, 0)


# ----------------------------------------------------------------------------- launch plans

from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import StreamedMvLaunch  # noqa: E402
from ...kernels.words import word_aligned  # noqa: E402
from .q6k_mv import Q6K_ID  # noqa: E402

# One warp a program: with two, Triton lays x's [16, 8, 1] tiles out apart from the weights' and converts them
# through shared memory in the loop (offline sm_90 SASS, Triton 3.6). Session 37 runs 1-3 (H200, one row of bf16 x,
# us, q6k_mv -> this kernel): without prefetch 4096 x 14336 (K x N) took 22.9 at best (95 at 2 programs per SM: a
# program's warp waits on each super-block's loads); with it, 16-row tiles and 8 programs per SM, 4096 x 14336 23.9
# -> 20.1, 14336 x 4096 22.3 -> 20.6, the 128256-row head 170.9 -> 137.4 (76% of copy); 32-row tiles (255
# registers) within 5%. Each program's warp runs a long serial chain (x's quantization alone is ~2500 instructions a
# step, whatever the rows), so small matrices lose: 4096 x 4096 8.4 -> 11.9, 4096 x 1024 4.7 -> 11.3; the kernel
# takes matrices of at least MIN_VALUES weights.
IDOT_BN = 16  # weight rows a program: 8 side by side on the lanes, BN / 8 of each lane in registers
PROGRAMS_PER_SM = 8  # split K until about this many programs per SM
PREFETCH = True
MIN_VALUES = 2**25  # between 4096 x 4096 (slower) and 4096 x 14336 (faster)


def supports(ggml_type: int, x_dtype: torch.dtype, out_dtype: torch.dtype, m: int, n: int, k: int,
             raw_bytes: int) -> bool:
    """One row of bf16/fp16 x against ``n`` Q6_K rows of a multiple of 2048 values (whole 8-super-block steps,
    16-byte aligned), at least ``MIN_VALUES`` weights, and a bf16/fp16 result (x's quantization is within their error
    bar, not fp32's); int32 offsets (``raw_bytes < 2**31``). ``MLX_NATIVE_GGML_IDOT=0`` or ``MLX_NATIVE_GGUF_MV=0``
    turns it off."""
    return (env.settings.ggml_idot and env.settings.gguf_mv and ggml_type == Q6K_ID and m == 1
            and x_dtype in (torch.bfloat16, torch.float16) and out_dtype != torch.float32 and k > 0
            and k % (256 * STEP_SBS) == 0 and n * k >= MIN_VALUES and raw_bytes < 2**31)


class Q6kIdotLaunch(StreamedMvLaunch):
    """:func:`q6k_idot_kernel` for ``(x [1, k], raw [n * k / 256 * 210] uint8)``: the raw rows read as int32 words
    (16-byte aligned steps: ``k`` a multiple of 2048), x as int32 words of two values; ``bn`` rows a program (a
    multiple of 8), K split until about ``programs_per_sm`` programs per SM."""

    def __init__(self, n: int, k: int, out_dtype: torch.dtype, device, bn: int = 0, programs_per_sm: int = 0,
                 prefetch: Optional[bool] = None):
        bn = bn or IDOT_BN
        if k % (256 * STEP_SBS) or bn % 8 or bn & (bn - 1):
            raise ValueError(f"q6k_idot: rows of {k} values in steps of {256 * STEP_SBS}, {bn}-row tiles "
                             "(a power of two from 8)")
        sms = device_info(device).sm_count
        super().__init__(q6k_idot_kernel, n, triton.cdiv(n, bn), k // (256 * STEP_SBS), 1,
                         (programs_per_sm or PROGRAMS_PER_SM) * sms, (n,),
                         dict(STRIDE_W=k // 256 * 105 // 2, BN=bn, EVEN_N=n % bn == 0,
                              PREFETCH=PREFETCH if prefetch is None else prefetch,
                              ASM=not env.settings.triton_interpret), out_dtype, device, tail_ints=(), num_warps=1,
                         trigger=True)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(word_aligned(x), raw.view(torch.int32))
