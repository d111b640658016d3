"""Decode mat-vec for GGUF Q6_K weights and 1-4 rows of x, by integer dot products.

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
``BN / 8`` rows of each lane in registers. x is quantized once per quarter and shared by the 8 row slots: the lane
of slot ``g`` reads (int32 words, ``[16, 8, 1]`` tiles laid out as the weights') and quantizes 8 of the quarter's 64
values (half ``g % 2`` of group ``g // 2``; the group's scale from the max of the two lanes, one ``shfl``), then
each lane takes the 32 pairs, 4 scales and 4 sums of its quarter from the others by ``shfl`` (:func:`_from_lane`,
lane ``c + 4 g`` in this layout; a gather under the interpreter) and reuses them for its rows. Per super-block,
quarter and row: six 16-byte loads (three at ``j = 0``), two more for the aligned bytes 192-223 that hold the
scales and ``d`` (a lane of half 1 takes its scale words 8 bytes on, one select a word), 32 ``dp2a``.
``PREFETCH``: the next super-block's tiles are loaded before this one is computed. Offline sm_90 SASS (Triton 3.6,
``scripts/sass_probe.py q6k_idot``): 2.75 instructions a code with 16-row tiles (79 registers, 42 ``shfl`` a
super-block); each lane quantizing its quarter's 64 values itself took 4.5 (128 registers), ~2.5 of them x's
quantization. 32-row tiles spill (2.4 a code). ``MR`` rows of x (2-4, a few tokens decoded at once): the weights
stream once and each super-block's code bytes are decoded once, then each row of x has its own shared quantization,
``dp2a`` and accumulator (:func:`_x_dot`). A K split is summed in the launch by the last split to arrive
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
from ..quant.affine_mv import store_rows

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
def _from_lane(v, quarter, G: tl.constexpr, ASM: tl.constexpr):
    """``v [4, 8, 1]`` (32-bit) of the lanes of row slot ``G`` (axis 1), on every lane of the same quarter. ``ASM``:
    one ``shfl`` from lane ``quarter + 4 G`` (a lane's slot ``g`` and quarter ``c`` are lane ``c + 4 g`` in the
    weights' layout, which these tiles keep); else a gather (the interpreter)."""
    if ASM:
        w = tl.inline_asm_elementwise("shfl.sync.idx.b32 $0, $1, $2, 0x1f, 0xffffffff;", "=r,r,r",
                                      [v.to(tl.int32, bitcast=True), quarter + 4 * G], dtype=tl.int32, is_pure=True,
                                      pack=1)
        return w.to(v.dtype, bitcast=True)
    else:
        return tl.gather(v, tl.full(v.shape, G, tl.int32), axis=1)


@triton.jit
def _from_partner(v, ASM: tl.constexpr):
    """``v [4, 8, 1]`` (fp32) of the other lane of each pair of row slots ``2 r, 2 r + 1`` (lane ``^ 4``)."""
    if ASM:
        w = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 4, 0x1f, 0xffffffff;", "=r,r",
                                      [v.to(tl.int32, bitcast=True)], dtype=tl.int32, is_pure=True, pack=1)
        return w.to(tl.float32, bitcast=True)
    else:
        G: tl.constexpr = v.shape[1]
        return tl.gather(v, tl.broadcast_to((tl.arange(0, G) ^ 1)[None, :, None], v.shape), axis=1)


@triton.jit
def _group_pairs(p0, p1, p2, p3, quarter, R: tl.constexpr, ASM: tl.constexpr):
    """The 8 x pairs of group ``R`` of each lane's quarter (values ``2 i, 2 i + 1``, ``[4, 8, 1]`` each): 0-3 from row
    slot ``2 R``, 4-7 from ``2 R + 1`` (:func:`_x_eighth`)."""
    return (_from_lane(p0, quarter, 2 * R, ASM), _from_lane(p1, quarter, 2 * R, ASM),
            _from_lane(p2, quarter, 2 * R, ASM), _from_lane(p3, quarter, 2 * R, ASM),
            _from_lane(p0, quarter, 2 * R + 1, ASM), _from_lane(p1, quarter, 2 * R + 1, ASM),
            _from_lane(p2, quarter, 2 * R + 1, ASM), _from_lane(p3, quarter, 2 * R + 1, ASM))


@triton.jit
def _x_eighth(xw_ptr, x_off, X_BF16: tl.constexpr, ASM: tl.constexpr):
    """Each lane's 8 x values at words ``xw_ptr + x_off`` (``[16, 8, 1]``: the lanes of row slots ``2 r`` and ``2 r +
    1`` hold the two halves of group ``r`` of their quarter) as 4 int16 pairs of consecutive values (``[4, 8, 1]``
    each), quantized with the scale of the whole group (the max of the two lanes), with that scale and the group's
    float sum."""
    w0, w1, w2, w3 = thread_words(tl.load(xw_ptr + x_off))
    e0, o0 = x_pair(w0, X_BF16)
    e1, o1 = x_pair(w1, X_BF16)
    e2, o2 = x_pair(w2, X_BF16)
    e3, o3 = x_pair(w3, X_BF16)
    m = tl.maximum(tl.maximum(tl.maximum(tl.abs(e0), tl.abs(o0)), tl.maximum(tl.abs(e1), tl.abs(o1))),
                   tl.maximum(tl.maximum(tl.abs(e2), tl.abs(o2)), tl.maximum(tl.abs(e3), tl.abs(o3))))
    xsum = ((e0 + o0) + (e1 + o1)) + ((e2 + o2) + (e3 + o3))
    m = tl.maximum(m, _from_partner(m, ASM))
    xsum = xsum + _from_partner(xsum, ASM)  # (commutes: both lanes get the same sum)
    inv, scale = chunk_scale(m)
    p0 = pack_pair(round_int(e0, inv), round_int(o0, inv), ASM)
    p1 = pack_pair(round_int(e1, inv), round_int(o1, inv), ASM)
    p2 = pack_pair(round_int(e2, inv), round_int(o2, inv), ASM)
    p3 = pack_pair(round_int(e3, inv), round_int(o3, inv), ASM)
    return p0, p1, p2, p3, scale, xsum


@triton.jit
def _codes(a, b, h):
    """The code bytes of four positions ``l .. l + 3`` of rows 0-3 of a half (``[4, G, R]`` each) from the words
    ``a`` = ql at ``l``, ``b`` = ql at ``32 + l``, ``h`` = qh at ``l``."""
    c0 = (a & LOW_NIBBLES) | ((h << 4) & PAIRS)
    c1 = (b & LOW_NIBBLES) | ((h << 2) & PAIRS)
    c2 = ((a >> 4) & LOW_NIBBLES) | (h & PAIRS)
    c3 = ((b >> 4) & LOW_NIBBLES) | ((h >> 2) & PAIRS)
    return c0, c1, c2, c3


@triton.jit
def _dots(c0, c1, c2, c3, pl0, ph0, pl1, ph1, pl2, ph2, pl3, ph3, s0, s1, s2, s3, ASM: tl.constexpr):
    """The group sums ``s_r`` + the integer dots of the code bytes ``c_r`` (:func:`_codes`) of row ``r`` with its x
    pairs ``pl_r`` (positions ``l, l + 1``) and ``ph_r`` (``l + 2, l + 3``)."""
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
def _x_dot(acc, c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33, sc0, sc1, sc2, sc3, d,
           xw_ptr, x_off, quarter, X_BF16: tl.constexpr, ASM: tl.constexpr):
    """``acc [4, G, R]`` + one super-block's products with one row of x at word ``xw_ptr`` + ``x_off [16, G, 1]``:
    ``c_ur`` the code bytes of quad ``u``, row ``r`` of each lane's quarter, ``sc_r`` its groups' scales, ``d``."""
    p0, p1, p2, p3, scale, xsum = _x_eighth(xw_ptr, x_off, X_BF16, ASM)
    x00, x01, x02, x03, x04, x05, x06, x07 = _group_pairs(p0, p1, p2, p3, quarter, 0, ASM)
    x10, x11, x12, x13, x14, x15, x16, x17 = _group_pairs(p0, p1, p2, p3, quarter, 1, ASM)
    x20, x21, x22, x23, x24, x25, x26, x27 = _group_pairs(p0, p1, p2, p3, quarter, 2, ASM)
    x30, x31, x32, x33, x34, x35, x36, x37 = _group_pairs(p0, p1, p2, p3, quarter, 3, ASM)
    z = tl.zeros(acc.shape, dtype=tl.int32)
    s0, s1, s2, s3 = _dots(c00, c01, c02, c03, x00, x01, x10, x11, x20, x21, x30, x31, z, z, z, z, ASM)
    s0, s1, s2, s3 = _dots(c10, c11, c12, c13, x02, x03, x12, x13, x22, x23, x32, x33, s0, s1, s2, s3, ASM)
    s0, s1, s2, s3 = _dots(c20, c21, c22, c23, x04, x05, x14, x15, x24, x25, x34, x35, s0, s1, s2, s3, ASM)
    s0, s1, s2, s3 = _dots(c30, c31, c32, c33, x06, x07, x16, x17, x26, x27, x36, x37, s0, s1, s2, s3, ASM)
    t = _group(tl.zeros(acc.shape, dtype=tl.float32), s0, sc0, _from_lane(scale, quarter, 0, ASM),
               _from_lane(xsum, quarter, 0, ASM))
    t = _group(t, s1, sc1, _from_lane(scale, quarter, 2, ASM), _from_lane(xsum, quarter, 2, ASM))
    t = _group(t, s2, sc2, _from_lane(scale, quarter, 4, ASM), _from_lane(xsum, quarter, 4, ASM))
    t = _group(t, s3, sc3, _from_lane(scale, quarter, 6, ASM), _from_lane(xsum, quarter, 6, ASM))
    return tl.fma(d, t, acc)


@triton.jit
def _super_block(acc0, acc1, acc2, acc3, va0, va1, vb0, vb1, vh0, vh1, t0, t1, hi_half, sh, xw_ptr, stride_xw, x_off,
                 quarter, J: tl.constexpr, MR: tl.constexpr, X_BF16: tl.constexpr, ASM: tl.constexpr):
    """The accumulators ``[4, G, R]`` of ``MR`` rows of x (``stride_xw`` words apart) + super-block ``J`` of a loop
    step from its tiles (:func:`_sb_tiles`), its codes decoded once; x of the step's row 0 at word ``xw_ptr`` +
    ``x_off [16, G, 1]`` (each lane's x word)."""
    a0, a1, a2, a3 = _run(va0, va1, J, ASM)
    b0, b1, b2, b3 = _run(vb0, vb1, J, ASM)
    h0, h1, h2, h3 = _run(vh0, vh1, J, ASM)
    sc0, sc1, sc2, sc3, d = _tail(t0, t1, hi_half, sh, J)
    c00, c01, c02, c03 = _codes(a0, b0, h0)
    c10, c11, c12, c13 = _codes(a1, b1, h1)
    c20, c21, c22, c23 = _codes(a2, b2, h2)
    c30, c31, c32, c33 = _codes(a3, b3, h3)
    xp = xw_ptr + J * 128
    acc0 = _x_dot(acc0, c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33, sc0, sc1,
                  sc2, sc3, d, xp, x_off, quarter, X_BF16, ASM)
    if MR > 1:
        acc1 = _x_dot(acc1, c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33, sc0, sc1,
                      sc2, sc3, d, xp + stride_xw, x_off, quarter, X_BF16, ASM)
    if MR > 2:
        acc2 = _x_dot(acc2, c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33, sc0, sc1,
                      sc2, sc3, d, xp + 2 * stride_xw, x_off, quarter, X_BF16, ASM)
    if MR > 3:
        acc3 = _x_dot(acc3, c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33, sc0, sc1,
                      sc2, sc3, d, xp + 3 * stride_xw, x_off, quarter, X_BF16, ASM)
    return acc0, acc1, acc2, acc3


@triton.jit
def _tile_rows(acc):
    """``[4, 8, R]`` -> the ``[8 R, 1, 1]`` sums over the quarters, row ``g + 8 r`` at ``8 r + g`` (as
    ``store_rows`` takes them)."""
    R: tl.constexpr = acc.shape[2]
    return tl.reshape(tl.permute(tl.sum(acc, axis=0), (1, 0)), (8 * R, 1, 1))


@triton.jit(do_not_specialize=["steps_per_split"])
def q6k_idot_kernel(
    x_ptr,  # [K] activations, bf16 or fp16 (read as int32 words of two values)
    w_ptr,  # [N, K / 256 * 52.5] int32 words of the raw Q6_K rows (K a multiple of 2048)
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, stride_xw, steps_per_split,
    STRIDE_W: tl.constexpr, BN: tl.constexpr, EVEN_N: tl.constexpr, PREFETCH: tl.constexpr, SPLIT_K: tl.constexpr,
    FUSE: tl.constexpr, ASM: tl.constexpr, PDL: tl.constexpr = False, MR: tl.constexpr = 1,
):
    """Loop steps of 8 super-blocks (``STEP_WORDS`` words of each row), ``steps_per_split`` of them a program. Tiles
    are ``[16, 8, BN / 8]``: word ``i % 4`` of lane quarter ``i // 4``, 8 rows side by side on the lanes, the rest
    in registers (one warp). ``PREFETCH``: each super-block's weight tiles are loaded while the one before is
    computed (the step's last loads the next step's first; the last step reloads its own). ``MR`` (1-4) rows of x,
    ``stride_xw`` words apart (read only for ``MR > 1``): the weights stream once, their codes decoded once."""
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
    # [16, 8, 1]: x word 64 h + 8 s (values 128 h + 16 s, group 0 of the quarter) + 16 r + 4 v at row slot 2 r + v
    x_off = (64 * half + 8 * ((i // 4) % 2) + i % 4)[:, None, None] + (16 * (g // 2) + 4 * (g % 2))[None, :, None]
    quarter = tl.broadcast_to(c, (4, 8, 1))  # each lane's quarter, the lane of row slot 0 of its x
    xw_ptr = x_ptr.to(tl.pointer_type(tl.int32))
    acc0 = tl.zeros([4, 8, R], dtype=tl.float32)
    acc1, acc2, acc3 = acc0, acc0, acc0  # rows 1-3 of x (MR > 1)
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
                acc0, acc1, acc2, acc3 = _super_block(acc0, acc1, acc2, acc3, c0, c1, c2, c3, c4, c5, c6, c7, hi_half,
                                                      sh, xp, stride_xw, x_off, quarter, J, MR, X_BF16, ASM)
                c0, c1, c2, c3, c4, c5, c6, c7 = n0, n1, n2, n3, n4, n5, n6, n7
    else:
        for st in range(i_lo, i_hi):
            p = w_ptr + st * STEP_WORDS
            xp = xw_ptr + st * 1024
            for J in tl.static_range(8):
                c0, c1, c2, c3, c4, c5, c6, c7 = _sb_tiles(p, a_off, h_off, t_off, J)
                acc0, acc1, acc2, acc3 = _super_block(acc0, acc1, acc2, acc3, c0, c1, c2, c3, c4, c5, c6, c7, hi_half,
                                                      sh, xp, stride_xw, x_off, quarter, J, MR, X_BF16, ASM)
    store_rows(out_ptr, part_ptr, cnt_ptr + tl.program_id(0), _tile_rows(acc0), _tile_rows(acc1), _tile_rows(acc2),
               _tile_rows(acc3), tl.program_id(0) * BN + tl.arange(0, BN).to(tl.int64), row_ok, N, MR, SPLIT_K, FUSE,
               0)


# ----------------------------------------------------------------------------- launch plans

from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import StreamedMvLaunch, x_row_stride_of  # noqa: E402
from ...kernels.words import word_aligned  # noqa: E402
from .q6k_mv import Q6K_ID  # noqa: E402

# One warp a program: with two, Triton lays x's [16, 8, 1] tiles out apart from the weights' and converts them
# through shared memory in the loop (offline sm_90 SASS, Triton 3.6). Session 37 (H200, one row of bf16 x, us,
# q6k_mv -> each lane quantizing its own x, 16-row tiles, 8 programs per SM, prefetch): 4096 x 14336 (K x N) 23.9 ->
# 20.1, 14336 x 4096 22.3 -> 20.6, the 128256-row head 170.9 -> 137.4; without prefetch a program's warp waits on
# each super-block's loads. Session 38 runs 5-6, x shared through shfl: each program runs a long serial chain, so the
# tiles follow the programs a matrix gives. 16-row tiles where they alone fill PROGRAMS_PER_SM programs per SM (the
# head: 133.3, 8-row tiles 139.7), else 8-row tiles split over K up to that many (4096 x 14336 20.05, 16-row tiles
# split in 1792 programs 22.9; 14336 x 4096 20.9 against 24.7). Small matrices still lose (4096 x 4096 12.1, q6k_mv
# 8.4; 4096 x 1024 10.8 against 4.7): the kernel takes matrices of at least MIN_VALUES weights.
IDOT_BN = 16  # weight rows a program where cdiv(n, IDOT_BN) >= PROGRAMS_PER_SM * SMs, else IDOT_SMALL_BN
IDOT_SMALL_BN = 8
PROGRAMS_PER_SM = 16  # split K until about this many programs per SM
PREFETCH = True
MIN_VALUES = 2**25  # between 4096 x 4096 (slower) and 4096 x 14336 (faster)
ROWS_MAX = 4  # rows of x
# 2-4 rows of x (offline sm_90 SASS, Triton 3.6, SASS instructions a weight code): 16-row tiles 4.1 (2 rows, 251
# registers) / 6.9 (4 rows, 255, a few spills), 8-row tiles 5.5 (78) / 9.7 (219); q6k_mv's MR rows take 8.4 / 11.0.
# Session 38 run 6 (H200, 2 rows, us, 4096 x 14336 / 14336 x 4096): q6k_mv 28.2 / 26.8; 16-row tiles at 4 programs
# per SM 21.9 / 25.3 (at 8, 4096 x 14336 splits in two: 24.6), 8-row tiles 34.8 / 31.1, 32-row 32.1 / 33.1.
ROWS_BN = 16  # weight rows a program for 2-4 rows of x
ROWS_PROGRAMS_PER_SM = 4


def supports(ggml_type: int, x_dtype: torch.dtype, out_dtype: torch.dtype, m: int, n: int, k: int,
             raw_bytes: int, x_row_stride: int = 0) -> bool:
    """1 to ``ROWS_MAX`` rows of bf16/fp16 x (several at an even row stride ``x_row_stride``: x is read in words of
    two values) against ``n`` Q6_K rows of a multiple of 2048 values (whole 8-super-block steps, 16-byte aligned), at
    least ``MIN_VALUES`` weights, and a bf16/fp16 result (x's quantization is within their error bar, not fp32's);
    int32 offsets (``raw_bytes < 2**31``). ``MLX_NATIVE_GGML_IDOT=0`` or ``MLX_NATIVE_GGUF_MV=0`` turns it off."""
    return (env.settings.ggml_idot and env.settings.gguf_mv and ggml_type == Q6K_ID and 1 <= m <= ROWS_MAX
            and (m == 1 or x_row_stride % 2 == 0) and x_dtype in (torch.bfloat16, torch.float16)
            and out_dtype != torch.float32 and k > 0 and k % (256 * STEP_SBS) == 0 and n * k >= MIN_VALUES
            and raw_bytes < 2**31)


class Q6kIdotLaunch(StreamedMvLaunch):
    """:func:`q6k_idot_kernel` for ``(x [m, k], raw [n * k / 256 * 210] uint8)``: the raw rows read as int32 words
    (16-byte aligned steps: ``k`` a multiple of 2048), x as int32 words of two values (unit column stride, an even
    row stride ``x_row_stride``, default ``k``); ``bn`` rows a program (a power of two from 8; default: one row
    ``IDOT_BN`` or ``IDOT_SMALL_BN``, more ``ROWS_BN``), K split until about ``programs_per_sm`` programs per SM
    (default ``PROGRAMS_PER_SM``, ``ROWS_PROGRAMS_PER_SM``)."""

    def __init__(self, n: int, k: int, out_dtype: torch.dtype, device, bn: int = 0, programs_per_sm: int = 0,
                 prefetch: Optional[bool] = None, m: int = 1, x_row_stride=None):
        sms = device_info(device).sm_count
        if not bn:
            bn = ROWS_BN if m > 1 else IDOT_BN if triton.cdiv(n, IDOT_BN) >= PROGRAMS_PER_SM * sms else IDOT_SMALL_BN
        if k % (256 * STEP_SBS) or bn % 8 or bn & (bn - 1):
            raise ValueError(f"q6k_idot: rows of {k} values in steps of {256 * STEP_SBS}, {bn}-row tiles "
                             "(a power of two from 8)")
        stride_x = x_row_stride_of("q6k_idot", m, k, x_row_stride, ROWS_MAX, words=True)
        super().__init__(q6k_idot_kernel, n, triton.cdiv(n, bn), k // (256 * STEP_SBS), 1,
                         (programs_per_sm or (PROGRAMS_PER_SM if m == 1 else ROWS_PROGRAMS_PER_SM)) * sms,
                         (n, stride_x // 2),
                         dict(STRIDE_W=k // 256 * 105 // 2, BN=bn, EVEN_N=n % bn == 0,
                              PREFETCH=PREFETCH if prefetch is None else prefetch,
                              ASM=not env.settings.triton_interpret, MR=m), out_dtype, device, tail_ints=(),
                         num_warps=1, trigger=True, m=m)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(word_aligned(x), raw.view(torch.int32))
