"""Decode matmul on tensor cores for 4-bit weights with one scale and offset per 32-128 codes:
MLX affine and GGUF Q4_0 / Q4_1 / Q4_K, 1 to 16 rows of x (and 17-128 where ``MID_ROWS_MAX`` says), one kernel
(``FMT`` picks the layout).

``out[m, n] = sum_k x[m, k] * (S[n, g] * q[n, k] + B[n, g])`` for groups ``g`` of ``GS`` codes:

* MLX affine (``transpose=True``): ``W [N, K / 8]`` int32 words, nibble ``p`` of word ``j`` is
  column ``8 j + p``; ``S, B`` from ``[N, K / GS]`` scales / biases; ``GS`` = 32, 64 or 128.
* GGUF (``raw``: each row ``K / 32`` or ``K / 256`` blocks of llama.cpp's layout, ``GS`` = 32):
  Q4_0 (18 B: fp16 d, 16 B codes; ``S, B = d, -8 d``), Q4_1 (20 B: fp16 d, fp16 m, 16 B codes;
  ``S, B = d, m``), Q4_K (144 B super-blocks: fp16 d, fp16 dmin, 12 B of 6-bit scales / mins,
  128 B codes; sub-block ``j``: ``S, B = d sc_j, -dmin m_j``). Code byte ``l`` of a Q4_0/Q4_1
  block holds values ``l`` and ``l + 16``; byte ``l`` of the 32-byte chunk ``c`` of a Q4_K
  super-block holds value ``l`` of sub-blocks ``2 c`` (low nibble) and ``2 c + 1`` (high).

Why tensor cores for a mat-vec: the multiply-adds are free there, so the cost per code is
only its decoding, and 16 rows of x cost what one row costs. Per 32-bit word of codes the
decoding is three shifts and four LOP3s: ``((w >> 4 i) & 0x000F000F) | MAGIC`` is a pair of
16-bit floats ``OFF + q`` (the nibbles ``i`` and ``i + 4`` of the word) exactly (bf16:
``0x4300`` = 128, fp16: ``0x6400`` = 1024), which is already a register pair of the MMA's A
operand. The dot runs on the raw ``OFF + q`` codes, one group at a time, and the group's scale
is applied to the fp32 result; the bias and the offset, which need only the group sums of x,
are one more (fp32) dot after the loop::

    acc = sum_g S_g * dot(OFF + q_g, x_g)  +  (B - OFF * S) @ [sum_{k in g} x_k]_g

Packed tiles (``PACKED``, from 2 rows of x): MLX affine with scales and biases in x's dtype (which a 16-bit result
implies), GGUF Q4_K, GGUF Q4_1 rows of an even number of blocks (2 or 4 blocks a step, their codes as word loads inside
each 20-byte block; 8 in wide steps, below) and GGUF Q4_0 rows of a multiple of 8 blocks (wide steps). The pair
``OFF + q`` minus ``OFF`` is ``q`` exactly and ``fma(q, S, B)`` rounds once, both as ``bf16x2`` / ``f16x2`` FMAs (two
codes an instruction, PTX through ``inline_asm_elementwise``; the interpreter runs the same math in fp32). A loop step
is ``MMV_STEP_ROWS`` codes of each MLX row (whole groups) or half a Q4_K super-block, one contiguous load of 16-byte
pieces and one dot, and x of the next step is loaded before this step's dot (registers; as int32 words, and MLX scales /
biases too, unpacked at the top of the next step: carried as 16-bit values they were moved into the loop's registers at
the end of the step, which waited there for their loads; session 29 run 5: MLX 4096 x 14336 M2-16 0-1.5% faster, Q4_K
1-3.5%). Offline sm_90 SASS (triton 3.6, 64-row tiles, 128 codes a step): 286 instructions a step against 508 with the
fp32 dequantization. H100 (bench/results/2026-11-25-h100-session19, runs 1-3): MLX 4096 x 14336 at 2 / 4 / 8 / 16 rows
25.6 / 25.6 / 26.1 / 27.1 us (the fp32 prescaled tiles: 40-47 in the same run; cuBLAS bf16 42-43); flat in M, so the
cost is the weights' stream, not the rows. Each row's x of a step is loaded in code order (16-byte pieces) and reordered
in registers (:func:`_x_step`; session 21 run 1: MLX 3-16 rows 9-15% faster, 4096 x 14336 M16 26.1 -> 22.7 us; Q4_K
11-19%). Accuracy: MLX tiles round once, as the dequantized weight does; Q4_K's ``S = d sc`` and ``B = -dmin m`` are
rounded to x's dtype once per sub-block, so each weight is rounded twice (on random blocks, in the interpreter's form of
the same math, the max error was 0.75-1.95x that of a bf16 / fp16 dequantize-then-matmul in 24 cases: inside DESIGN.md's
2x bar, with little room).

Column order: the dequantized group tile is permuted so that each thread's register pairs
come straight from its own words (:func:`_tile`), and ``x`` is reordered the same way, so the dot is
unchanged (:func:`_x_step`; the unpacked Q4_K tiles gather x through :func:`_q4k_columns`). The formats
differ only in which code a nibble is: MLX puts the nibbles of a word in column order, GGUF interleaves
two bytes' low and high nibbles; a Q4_K word mixes two sub-blocks (even / odd shifts), so its tiles take
two of the four shifts.

Loads: every code word is an aligned int32 load, so the software pipeline streams the weights
with ``cp.async`` (which needs 4-byte pieces). MLX words, Q4_1 codes (20-byte blocks) and Q4_K
super-blocks (144 bytes, 16-byte aligned) are aligned as stored. Q4_0's 18-byte blocks are
2-byte aligned: in a row of an even number of blocks (a 4-byte aligned row) the odd block's
codes are aligned, and the even block's codes sit at 2 mod 4, so its code word ``j`` is the
high half of aligned word ``j`` of the block and the low half of word ``j + 1`` (one funnel
shift per word). Q4_0 steps are therefore two blocks, even then odd; rows of an odd number of
blocks are not taken. (Loading the codes as 16-bit halves instead makes them synchronous loads
with a shared-memory layout conversion: 202 SASS instructions per loop step against 194 for
one row of x, 201 against 179 for more, compiled for sm_90.)

Wide steps, packed Q4_0 / Q4_1 tiles (rows of a multiple of 8 blocks): a step is 8 blocks, 144 / 160 bytes,
16-byte aligned, loaded as words 0-31 and 32-35 / 32-39 (two tiles of 16-byte pieces) and dequantized word by
word whatever each word holds: every word takes the ``d`` (Q4_1: ``d, m``) of the block its codes belong to
(:func:`_q40_wide_step`, :func:`_q41_wide_step` find them among the step's own words with ``tl.gather``), and
the halves or words that hold scales instead of codes meet x = 0. x is rewritten once per call in that column
order (:func:`wide_x_kernel`, a small launch before the mat-vec, 288 / 320 columns per 256 codes), so the mat-vec
loads x of a step as contiguous pieces through the same pipeline as the weights. Q4_0's weights are ``(q - 8) d``
(no ``-8 d`` term, which fp16 overflows from ``|d| > 8188``); ``d`` (and Q4_1's ``m``) are rounded to x's dtype
first, so with bf16 x each weight is rounded twice, as Q4_K's. Session 28 (H100, 4096 x 14336,
5-16 rows): Q4_0 28.7-30.2 us, against 71-75 for the same tiles with x and the scales gathered per element
(uncoalesced: 79% excessive sectors, 255 registers) and 58-62 for the route before; Q4_1 32.0-32.1 against 60
for 4-block steps of 4-byte loads; with one step of x per program of ``wide_x_kernel`` (run 14) 1-1.5 us less.

Loop steps: one or two groups (``GPS``); for Q4_K a super-block (``GPS = 8``: its header is
one 16-byte load); packed tiles: ``MMV_STEP_ROWS`` codes of MLX groups, half a Q4_K super-block. The x
pointers of a step are computed once, each group's x at a constant offset from them.

Grid: axis 0 = tiles of ``BN`` output features, axis 1 = K split. x rows are padded to ``MP`` = 16 (8 for
packed Q4_K tiles of up to 8 rows, ``Q4K_MP8``); rows ``>= M`` are masked loads and never stored. With a K split
each program stores its fp32 partial tile ``[BN, M]``; the splits of a tile are summed in the same launch
(``FUSE``): each program counts in on its tile's arrival counter and the last to arrive sums the
tile's partials (``qmm.splitk_sum``, one split per loop step), stores the output and rearms the
counter (``qmm.SplitK``: the counters belong to the plan, so one plan must not run on two streams
at once). Without it (``qmm.FUSED_SPLITK = False``, or a plan built during CUDA-graph capture) a
second launch (``qmm.splitk_reduce_kernel``) sums them: on the H100 that launch cost 1.6-2.8 us
per mat-vec at decode (SmolLM2-135M: 90 of them per token).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter
from ...kernels.loads import load_or_zero, pinned
from ...kernels.words import half16, word_aligned
from .gemv import AFFINE, Q4_0, Q4_1, Q4_K
from .qmm import store_result


@triton.jit
def _q4k_columns(GS: tl.constexpr):
    """``[GS]`` offset within its Q4_K sub-block of the code held by each column of an unpacked Q4_K tile of
    :func:`_tile` (two shifts a word, ``F`` words per thread and row): shift ``2 i + parity`` of word ``w`` is
    byte ``4 w + i`` (``+ 2`` for the high half). The other tiles meet x reordered in registers (:func:`_x_step`)."""
    F: tl.constexpr = GS // 16
    col = tl.arange(0, GS)
    return 4 * (((col // 2) % 4) * F + (col // 8) % F) + col // (8 * F) + 2 * (col % 2)


@triton.jit
def _magic_pairs(w, shifts, X_F16: tl.constexpr):
    """``[BN, NW]`` int32 words, ``[NI]`` shifts -> ``[BN, NW, NI, 2]`` 16-bit floats ``OFF + q``:
    half ``e`` of ``(w >> shift) & 0x000F000F``."""
    if X_F16:
        t = ((w[:, :, None] >> shifts[None, None, :]) & 0x000F000F) | 0x64006400
        lo = t.to(tl.int16).to(tl.float16, bitcast=True)
        hi = (t >> 16).to(tl.int16).to(tl.float16, bitcast=True)
    else:
        t = ((w[:, :, None] >> shifts[None, None, :]) & 0x000F000F) | 0x43004300
        lo = t.to(tl.int16).to(tl.bfloat16, bitcast=True)
        hi = (t >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    return tl.join(lo, hi)


@triton.jit
def _tile(d, BN: tl.constexpr, GS: tl.constexpr):
    """``[BN, NW, NI, 2]`` pairs of :func:`_magic_pairs` -> ``[BN, GS]`` tile, word ``c F + f``, shift ``i``,
    half ``e`` in column ``((i F + f) 4 + c) 2 + e`` (each thread's register pairs come from its own words)."""
    NI: tl.constexpr = d.shape[2]
    F: tl.constexpr = d.shape[1] // 4
    d = tl.reshape(d, (BN, 4, F, NI, 2))
    d = tl.permute(d, (0, 3, 2, 1, 4))  # [BN, i, f, c, e]
    return tl.reshape(d, (BN, GS))


@triton.jit
def _f16(w_ptr, off, mask):
    """fp16 at byte offset ``off`` (2-byte aligned) of the raw blocks, as fp32."""
    return load_or_zero((w_ptr + off).to(tl.pointer_type(tl.uint16)), mask).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _word(w_ptr, word, mask):
    """int32 word ``word`` of the raw blocks. Indexed by words, not by byte offsets cast to an int32 pointer:
    only then does the compiler see the words of a row as contiguous, give them adjacent lanes and vector loads;
    through byte offsets it put 32 rows on a warp's lanes, one 4-byte piece each (32 cache lines an instruction,
    offline TTGIR of session 21)."""
    return load_or_zero(w_ptr.to(tl.pointer_type(tl.int32)) + word, mask)


@triton.jit
def _k_scale_min(s1, s2, s3, j):
    """Q4_K six-bit scale and min of sub-block ``j`` (0-7, constexpr or tensor) from the 12 scale
    bytes as three int32 words (llama.cpp's ``get_scale_min_k4``)."""
    sh = 8 * (j % 4)
    low = j < 4
    sc = tl.where(low, (s1 >> sh) & 63, ((s3 >> sh) & 15) | (((s1 >> (sh + 6)) & 3) << 4))
    mn = tl.where(low, (s2 >> sh) & 63, ((s3 >> (sh + 4)) & 15) | (((s2 >> (sh + 6)) & 3) << 4))
    return sc, mn


@triton.jit
def _q4k_header(w_ptr, word, mask):
    """Q4_K super-block headers at words ``word [BN, NB]`` (multiples of 4: one 16-byte load each) ->
    ``(d, dmin)`` fp32 and the three words ``s1, s2, s3`` of the 12 scale bytes, ``[BN, NB]``."""
    m3 = None if mask is None else mask[:, :, None]
    h = _word(w_ptr, tl.multiple_of(word, (4, 4))[:, :, None] + tl.arange(0, 4)[None, None, :], m3)
    even, odd = tl.split(tl.reshape(h, (h.shape[0], h.shape[1], 2, 2)))  # words 0, 2 and 1, 3
    dd, s2 = tl.split(even)
    s1, s3 = tl.split(odd)
    d = (dd & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    dmin = (dd >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return d, dmin, s1, s2, s3


@triton.jit
def _group_words(w_ptr, s_ptr, rows, g, stride_wn, stride_sn, FMT: tl.constexpr, GS: tl.constexpr,
                 ODD: tl.constexpr):
    """Codes and scale of group ``g`` (not Q4_K): ``([BN, GS / 8] int32 words, [BN] fp32 S)``.
    ``ODD``: ``g`` is odd (Q4_0: rows of an even number of 18-byte blocks, 4-byte aligned)."""
    WPG: tl.constexpr = GS // 8
    wj = tl.arange(0, WPG)
    if FMT == AFFINE:
        w = tl.load(w_ptr + rows[:, None] * stride_wn + (g * WPG + wj)[None, :])
        S = tl.load(s_ptr + rows * stride_sn + g).to(tl.float32)
    else:
        base = rows * stride_wn + g * (20 if FMT == Q4_1 else 18)
        S = _f16(w_ptr, base, None)
        row_w = rows * (stride_wn // 4)  # a row is a whole number of words (Q4_0: an even number of blocks)
        if FMT == Q4_1:  # block g: words 5 g (d, m) and 5 g + 1 .. 5 g + 4 (codes)
            w = _word(w_ptr, (row_w + 5 * g + 1)[:, None] + wj[None, :], None)
        elif ODD:  # Q4_0 codes at a 4-byte boundary: words 5-8 of the pair (g - 1, g), 9 words from 9 (g // 2)
            w = _word(w_ptr, (row_w + 9 * (g // 2) + 5)[:, None] + wj[None, :], None)
        else:  # Q4_0 codes at 2 mod 4: word j = high half of aligned word j, low half of word j + 1
            lo = _word(w_ptr, (row_w + 9 * (g // 2))[:, None] + wj[None, :], None)
            hi = _word(w_ptr, (row_w + 9 * (g // 2) + 1)[:, None] + wj[None, :], None)
            w = ((lo >> 16) & 0xFFFF) | (hi << 16)
    return w, S


@triton.jit
def _x_ptrs(x_ptr, m, kcol, g, stride_xm, GS: tl.constexpr):
    """``[GS, MP]`` pointers to x of group ``g`` in column order ``kcol``; group ``g + j`` is at
    ``+ j GS`` (a constant offset, folded into the loads' addresses)."""
    return x_ptr + m[None, :] * stride_xm + (g * GS + kcol)[:, None]


@triton.jit
def _x_group(xp, m, M):
    """x at the pointers ``xp [GS, MP]`` of :func:`_x_ptrs` (rows ``>= M``: 0)."""
    return tl.load(xp, mask=(m < M)[None, :], other=0.0)


@triton.jit
def _x_load(x_ptr, m, g, stride_xm, M, GS: tl.constexpr, KS: tl.constexpr):
    """x of the ``KS`` codes from group ``g`` as loaded: ``[MP, KS / 2]`` int32 words, two 16-bit values each in code
    order (rows ``>= M``: 0; x 4-byte aligned, ``stride_xm`` even). Words, not 16-bit values: a loop can carry them to
    the next step in the registers they were loaded into, where 16-bit halves were moved at the end of the step,
    waiting there for the load; :func:`_x_order` unpacks and reorders them."""
    return _x_load_rows(x_ptr, m, m < M, g, stride_xm, GS, KS)


@triton.jit
def _x_load_rows(x_ptr, xr, ok, g, stride_xm, GS: tl.constexpr, KS: tl.constexpr):
    """:func:`_x_load` of the x rows ``xr [MP]`` (gathered: ``ops/moe/grouped.py``), 0 where ``ok [MP]`` is
    False."""
    xw = x_ptr.to(tl.pointer_type(tl.int32))
    return tl.load(xw + xr[:, None] * (stride_xm // 2) + (g * (GS // 2) + tl.arange(0, KS // 2))[None, :],
                   mask=ok[:, None], other=0)


@triton.jit
def _x_order(xn, KS: tl.constexpr, FMT: tl.constexpr, DT: tl.constexpr):
    """:func:`_x_load`'s ``[MP, KS / 2]`` words -> ``[KS, MP]`` 16-bit floats of type ``DT`` in a tile's column order
    (:func:`_x_order16`)."""
    MP: tl.constexpr = xn.shape[0]
    return _x_order16(tl.reshape(tl.join(half16(xn, 0, DT), half16(xn, 16, DT)), (MP, KS)), KS, FMT)


@triton.jit
def _x_order16(xn, KS: tl.constexpr, FMT: tl.constexpr):
    """x ``[MP, KS]`` in code order -> ``[KS, MP]`` in the column order of the tiles that meet it, reordered in
    registers (``c = 2 c1 + c0``, ``i = 2 i1 + i0``; every order maps code -> column ``((i F + f) 4 + c) 2 + e``):
    MLX: code ``8 (c F + f) + 4 e + i`` (the nibbles of a word in order);
    Q4_0 / Q4_1, ``F = KS / 32`` blocks of words ``4 b + j`` (one block: :func:`_group_step`, ``j = c``; 2 or 4:
    :func:`_q41_packed_step`; byte ``l`` of a block holds codes ``l``, ``l + 16``): code ``32 b + 4 j + 16 i0 + 2 e +
    i1``, with ``c F + f = 4 b + j``;
    Q4_K (the 128-code tiles of :func:`_q4k_packed_step`): code ``64 c1 + 32 i0 + 16 c0 + 4 f + 2 e + i1``."""
    F: tl.constexpr = KS // 32
    MP: tl.constexpr = xn.shape[0]
    if FMT == AFFINE:  # [m, c, f, e, i] -> [i, f, c, e, m]
        xt = tl.permute(tl.reshape(xn, (MP, 4, F, 2, 4)), (4, 2, 1, 3, 0))
    elif FMT == Q4_K:  # [m, c1, i0, c0, f, e, i1] -> [i1, i0, f, c1, c0, e, m]
        xt = tl.permute(tl.reshape(xn, (MP, 2, 2, 2, F, 2, 2)), (6, 2, 4, 1, 3, 5, 0))
    elif F == 1:  # [m, i0, c, e, i1] -> [i1, i0, c, e, m]
        xt = tl.permute(tl.reshape(xn, (MP, 2, 4, 2, 2)), (4, 1, 2, 3, 0))
    elif F == 2:  # c = 2 b + j1, f = j0: [m, b, i0, j1, j0, e, i1] -> [i1, i0, j0, b, j1, e, m]
        xt = tl.permute(tl.reshape(xn, (MP, 2, 2, 2, 2, 2, 2)), (6, 2, 4, 1, 3, 5, 0))
    else:  # F = 4: c = b, f = j: [m, b, i0, j, e, i1] -> [i1, i0, j, b, e, m]
        xt = tl.permute(tl.reshape(xn, (MP, 4, 2, 4, 2, 2)), (5, 2, 3, 1, 4, 0))
    return tl.reshape(xt, (KS, MP))


@triton.jit
def _x_step(x_ptr, m, g, stride_xm, M, GS: tl.constexpr, KS: tl.constexpr, FMT: tl.constexpr):
    """x of the ``KS`` codes from group ``g`` as ``[KS, MP]`` in the column order of the tiles that meet it (rows
    ``>= M``: 0): loaded in code order (8- or 16-byte pieces), reordered by :func:`_x_order16`."""
    xn = tl.load(x_ptr + m[:, None] * stride_xm + (g * GS + tl.arange(0, KS))[None, :], mask=(m < M)[:, None],
                 other=0.0)
    return _x_order16(xn, KS, FMT)


@triton.jit
def _dequantized(t, S, B, X_F16: tl.constexpr):
    """``[BN, GS]`` tile of ``OFF + q`` (16-bit floats) -> ``S q + B`` in x's dtype (``S, B``: ``[BN]`` fp32;
    ``q`` is exact after the subtraction, the FMA rounds once, as a dequantized bf16/fp16 weight)."""
    OFF: tl.constexpr = 1024.0 if X_F16 else 128.0
    return tl.fma(t.to(tl.float32) - OFF, S[:, None], B[:, None]).to(tl.float16 if X_F16 else tl.bfloat16)


# Two codes per instruction: ``(w >> shift) & 0x000F000F | MAGIC`` is a pair ``OFF + q``, ``OFF + q - OFF`` is ``q``
# exactly, and ``fma(q, S, B)`` rounds once: the pair of dequantized weights of ``_dequantized``, with 16-bit S, B.
_PAIRS_BF16 = tl.constexpr("""{ .reg .b32 t, one, off;
 mov.b32 one, 0x3F803F80; mov.b32 off, 0xC300C300;
 lop3.b32 t, $1, 0x000F000F, 0x43004300, 0xEA;
 fma.rn.bf16x2 t, t, one, off;
 fma.rn.bf16x2 $0, t, $2, $3; }""")
_PAIRS_F16 = tl.constexpr("""{ .reg .b32 t, one, off;
 mov.b32 one, 0x3C003C00; mov.b32 off, 0xE400E400;
 lop3.b32 t, $1, 0x000F000F, 0x64006400, 0xEA;
 fma.rn.f16x2 t, t, one, off;
 fma.rn.f16x2 $0, t, $2, $3; }""")


@triton.jit
def _pair16(v):
    """``[BN]`` 16-bit floats -> ``[BN]`` int32 holding ``v`` in both halves (an operand of the packed FMAs)."""
    bits = v.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    return bits | (bits << 16)


@triton.jit
def _packed_pairs(w, shifts, S2, B2, X_F16: tl.constexpr, ASM: tl.constexpr):
    """``[BN, NW]`` int32 words, ``[NI]`` shifts, ``S2, B2``: :func:`_pair16` of the scale and bias of each word
    ``[BN, NW, 1]`` or each word and shift ``[BN, NW, NI]`` -> ``[BN, NW, NI, 2]`` dequantized weights ``S q + B``
    in x's dtype, half ``e`` of the pair of shift ``i`` as in :func:`_magic_pairs`. ``ASM``: the packed PTX; else
    the same math in fp32 (the interpreter)."""
    wide = w[:, :, None] >> shifts[None, None, :]
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    if ASM:
        d = tl.inline_asm_elementwise(_PAIRS_F16 if X_F16 else _PAIRS_BF16, "=r,r,r,r",
                                      [wide, S2, B2], dtype=tl.int32, is_pure=True, pack=1)
        return tl.join(d.to(tl.int16).to(dt, bitcast=True), (d >> 16).to(tl.int16).to(dt, bitcast=True))
    q = wide & 0x000F000F
    S = S2.to(tl.int16).to(dt, bitcast=True).to(tl.float32)
    B = B2.to(tl.int16).to(dt, bitcast=True).to(tl.float32)
    return tl.join(tl.fma((q & 0xF).to(tl.float32), S, B).to(dt), tl.fma((q >> 16).to(tl.float32), S, B).to(dt))


@triton.jit
def _group_bias(w_ptr, b_ptr, rows, g, S, stride_wn, stride_sn, FMT: tl.constexpr):
    """``B [BN]`` fp32 of group ``g`` (not Q4_K; ``S``: its scales)."""
    if FMT == AFFINE:
        return tl.load(b_ptr + rows * stride_sn + g).to(tl.float32)
    elif FMT == Q4_1:
        return _f16(w_ptr, rows * stride_wn + g * 20 + 2, None)
    else:
        return -8.0 * S


@triton.jit
def _group_step(xg, w_ptr, s_ptr, b_ptr, rows, g, stride_wn, stride_sn, acc, FMT: tl.constexpr,
                BN: tl.constexpr, GS: tl.constexpr, X_F16: tl.constexpr, J: tl.constexpr, PRESCALE: tl.constexpr):
    """``acc [BN, MP] += S * dot(OFF + q, x)`` of group ``g + J`` of a loop step (MLX, Q4_0, Q4_1);
    ``g`` is even when the step has two groups, ``xg [GS, MP]``: x of group ``g + J``. ``PRESCALE``:
    ``acc += dot(S q + B, x)`` instead (the tile dequantized in registers, the dot accumulates)."""
    w, S = _group_words(w_ptr, s_ptr, rows, g + J, stride_wn, stride_sn, FMT, GS, J == 1)
    t = _tile(_magic_pairs(w, 4 * tl.arange(0, 4), X_F16), BN, GS)
    if PRESCALE:
        B = _group_bias(w_ptr, b_ptr, rows, g + J, S, stride_wn, stride_sn, FMT)
        return tl.dot(_dequantized(t, S, B, X_F16), xg, acc)
    return acc + S[:, None] * tl.dot(t, xg)


@triton.jit
def _q41_scales(w_ptr, rows, g, g_hi, stride_wn, NB: tl.constexpr, X_F16: tl.constexpr):
    """GGUF Q4_1 ``d, m [BN, NB]`` in x's dtype of the ``NB`` blocks from ``g`` (0 from ``g_hi`` on): 2-byte loads,
    which ``cp.async`` cannot take, so the loop makes them a step ahead."""
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    j = g + tl.arange(0, NB)
    off = rows[:, None] * stride_wn + j[None, :] * 20
    ok = (j < g_hi)[None, :]
    return _f16(w_ptr, off, ok).to(dt), _f16(w_ptr, off + 2, ok).to(dt)


@triton.jit
def _q41_packed_step(xs, S, B, w_ptr, rows, g, stride_wn, acc, NB: tl.constexpr, BN: tl.constexpr,
                     X_F16: tl.constexpr, ASM: tl.constexpr):
    """``acc [BN, MP] += dot(d q + m, x)`` over the ``NB`` (2 or 4) Q4_1 blocks from ``g`` of each row as one tile
    of words ``4 b + j`` (``xs [32 NB, MP]``: :func:`_x_step`; ``S, B [BN, NB]``: :func:`_q41_scales`). A 20-byte
    block holds its codes in words 1-4, which these word loads stay inside. (Q4_0's 18-byte blocks put half of
    them at 2 mod 4, and a word-aligned form reads past its pair; session 22 run 1 faulted on it.)"""
    j = tl.arange(0, 4)[None, None, :]
    row_w = (rows * (stride_wn // 4))[:, None, None]  # words (a row is a whole number of them)
    w = _word(w_ptr, row_w + 5 * g + 5 * tl.arange(0, NB)[None, :, None] + 1 + j, None)
    w = tl.reshape(w, (BN, 4 * NB))
    S2 = tl.reshape(tl.broadcast_to(_pair16(S)[:, :, None], (BN, NB, 4)), (BN, 4 * NB))
    B2 = tl.reshape(tl.broadcast_to(_pair16(B)[:, :, None], (BN, NB, 4)), (BN, 4 * NB))
    return tl.dot(_tile(_packed_pairs(w, 4 * tl.arange(0, 4), S2[:, :, None], B2[:, :, None], X_F16, ASM), BN,
                        32 * NB), xs, acc)


@triton.jit
def _wide_columns(FMT: tl.constexpr, NW: tl.constexpr, FIRST: tl.constexpr):
    """Codes of the ``8 NW`` columns of a :func:`_tile` of the ``NW`` words from word ``FIRST`` of a wide step (8
    blocks: Q4_0 144 bytes, 36 words; Q4_1 160 bytes, 40 words): ``(code [8 NW] within the step, valid [8 NW])``.
    Shift ``i`` of a 16-bit half holding bytes ``l``, ``l + 1`` takes codes ``l``, ``l + 16``, ``l + 1``, ``l + 17``.
    Q4_0: half-word ``h = 2 q + e`` is half ``h % 18`` of the block pair ``h // 18``: 0 and 9 are the pair's fp16
    scales (not codes), 1-8 bytes ``2 (h - 1)``, ``+ 1`` of the even block, 10-17 those of the odd one. Q4_1: word
    ``q`` is word ``q % 5`` of block ``q // 5``: 0 holds ``d, m`` (not codes), 1-4 bytes ``4 (q % 5 - 1)`` to
    ``+ 3``."""
    F: tl.constexpr = NW // 4
    col = tl.arange(0, 8 * NW)
    q = FIRST + ((col // 2) % 4) * F + (col // 8) % F
    i = col // (8 * F)
    e = col % 2
    nib = i // 2 + 16 * (i % 2)
    if FMT == Q4_0:
        hp = (2 * q + e) % 18
        odd = (hp >= 9).to(tl.int32)
        code = 32 * (2 * ((2 * q + e) // 18) + odd) + 2 * (hp - 1 - 9 * odd) + nib
        valid = (hp != 0) & (hp != 9)
    else:
        code = 32 * (q // 5) + 4 * (q % 5 - 1) + 2 * e + nib
        valid = q % 5 != 0
    return tl.where(valid, code, 0), valid


@triton.jit
def _wide_x_part(x_ptr, out_ptr, row, s, K, stride_xm, FMT: tl.constexpr, NW: tl.constexpr, FIRST: tl.constexpr):
    """Columns ``8 FIRST`` to ``8 (FIRST + NW)`` of steps ``s`` of row ``row`` of :func:`wide_x_kernel`."""
    SC: tl.constexpr = 288 if FMT == Q4_0 else 320
    code, valid = _wide_columns(FMT, NW, FIRST)
    ok = s < K // 256
    v = tl.load(x_ptr + row * stride_xm + (s * 256)[:, None] + code[None, :], mask=ok[:, None] & valid[None, :],
                other=0.0)
    cols = tl.arange(0, 8 * NW)
    tl.store(out_ptr + row * (K // 256 * SC) + (s * SC + 8 * FIRST)[:, None] + cols[None, :], v, mask=ok[:, None])


@triton.jit
def wide_x_kernel(x_ptr, out_ptr, K, stride_xm, FMT: tl.constexpr, S: tl.constexpr, PDL: tl.constexpr = False):
    """x of wide Q4_0 / Q4_1 steps: ``x [M, K]`` -> ``[M, K / 256 * SC]``, for each step of 8 blocks (256 codes)
    its ``SC`` tile columns (Q4_0 288: words 0-31 of the step, then 32-35; Q4_1 320: words 0-31, then 32-39) in
    the order of :func:`_tile`, 0 where a column holds no code (:func:`_wide_columns`). Grid
    ``(M, cdiv(K / 256, S))``."""
    enter(PDL)
    row = tl.program_id(0)
    s = tl.program_id(1) * S + tl.arange(0, S)
    _wide_x_part(x_ptr, out_ptr, row, s, K, stride_xm, FMT, 32, 0)
    _wide_x_part(x_ptr, out_ptr, row, s, K, stride_xm, FMT, 4 if FMT == Q4_0 else 8, 32)


@triton.jit
def _wide_x_step(xq_ptr, m, g, K, M, FMT: tl.constexpr):
    """``([256, MP], [8 TW, MP])``: the columns of :func:`wide_x_kernel`'s step from block ``g`` (rows ``>= M``:
    0; ``TW`` = 4 or 8 tail words)."""
    SC: tl.constexpr = 288 if FMT == Q4_0 else 320
    base = xq_ptr + m[:, None] * (K // 256 * SC) + g // 8 * SC
    ok = (m < M)[:, None]
    xs = tl.load(base + tl.arange(0, 256)[None, :], mask=ok, other=0.0)
    xt = tl.load(base + 256 + tl.arange(0, SC - 256)[None, :], mask=ok, other=0.0)
    return tl.trans(xs), tl.trans(xt)


# ``(OFF + q) - (OFF + 8)`` is ``q - 8`` exactly, and ``(q - 8) d`` (an FMA with -0.0) rounds once: the pair of
# dequantized Q4_0 weights, two codes an instruction, with a 16-bit ``d``.
_CENTERED_BF16 = tl.constexpr("""{ .reg .b32 t, one, off, nz;
 mov.b32 one, 0x3F803F80; mov.b32 off, 0xC308C308; mov.b32 nz, 0x80008000;
 lop3.b32 t, $1, 0x000F000F, 0x43004300, 0xEA;
 fma.rn.bf16x2 t, t, one, off;
 fma.rn.bf16x2 $0, t, $2, nz; }""")
_CENTERED_F16 = tl.constexpr("""{ .reg .b32 t, one, off, nz;
 mov.b32 one, 0x3C003C00; mov.b32 off, 0xE408E408; mov.b32 nz, 0x80008000;
 lop3.b32 t, $1, 0x000F000F, 0x64006400, 0xEA;
 fma.rn.f16x2 t, t, one, off;
 fma.rn.f16x2 $0, t, $2, nz; }""")


@triton.jit
def _centered_pairs(w, shifts, S2, X_F16: tl.constexpr, ASM: tl.constexpr):
    """As :func:`_packed_pairs` for ``S (q - 8)`` (Q4_0: no bias term, which ``-8 d`` could overflow in fp16)."""
    wide = w[:, :, None] >> shifts[None, None, :]
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    if ASM:
        d = tl.inline_asm_elementwise(_CENTERED_F16 if X_F16 else _CENTERED_BF16, "=r,r,r", [wide, S2],
                                      dtype=tl.int32, is_pure=True, pack=1)
        return tl.join(d.to(tl.int16).to(dt, bitcast=True), (d >> 16).to(tl.int16).to(dt, bitcast=True))
    q = wide & 0x000F000F
    S = S2.to(tl.int16).to(dt, bitcast=True).to(tl.float32)
    return tl.join((((q & 0xF) - 8).to(tl.float32) * S).to(dt), (((q >> 16) - 8).to(tl.float32) * S).to(dt))


@triton.jit
def _half_pairs(sw, hi, X_F16: tl.constexpr):
    """Words holding an fp16 in their high (``hi``: a bool tensor or constant) or low half -> :func:`_pair16` of
    it in x's dtype."""
    bits = tl.where(hi, sw >> 16, sw) & 0xFFFF
    if X_F16:
        return bits | (bits << 16)
    return _pair16(bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32).to(tl.bfloat16))


@triton.jit
def _wide_words(w_ptr, rows, g, stride_wn, WORDS: tl.constexpr):
    """The ``WORDS`` (36 / 40) int32 words of each row's wide step from block ``g`` (a multiple of 8), 16-byte
    aligned: ``([BN, 32] words 0-31, [BN, WORDS - 32] the rest)``, two tiles of 16-byte loads."""
    first = tl.multiple_of(rows * (stride_wn // 4) + (g // 8) * WORDS, 4)
    w = _word(w_ptr, first[:, None] + tl.arange(0, 32)[None, :], None)
    return w, _word(w_ptr, first[:, None] + 32 + tl.arange(0, WORDS - 32)[None, :], None)


@triton.jit
def _q40_wide_step(xs, xt, w_ptr, rows, g, stride_wn, acc, BN: tl.constexpr, X_F16: tl.constexpr,
                   ASM: tl.constexpr):
    """``acc [BN, MP] += dot(d (q - 8), x)`` over the 8 Q4_0 blocks from ``g`` (a multiple of 8) of each row: their
    144 bytes (16-byte aligned: rows of a multiple of 8 blocks) are words 0-31 and 32-35 (:func:`_wide_words`),
    dequantized word by word (whatever the word holds) with the ``d`` of its block, which sits in the low half
    of word ``9 p`` (even block ``2 p``) or the high half of word ``9 p + 4`` (odd block ``2 p + 1``) of the same
    tile, taken from there (``tl.gather`` along the row); the halves holding scales meet x = 0 (``xs [256, MP]``,
    ``xt [32, MP]``: :func:`_wide_x_step`)."""
    w, wt = _wide_words(w_ptr, rows, g, stride_wn, 36)
    shifts = 4 * tl.arange(0, 4)
    q = tl.arange(0, 32)
    odd = q % 9 >= 5
    src = tl.broadcast_to((9 * (q // 9) + 4 * odd.to(tl.int32))[None, :], (BN, 32))
    S2 = _half_pairs(tl.gather(w, src, 1), odd[None, :], X_F16)
    S2t = _half_pairs(tl.gather(w, tl.full((BN, 1), 31, tl.int32), 1), True, X_F16)  # block 7: word 31's high
    acc = tl.dot(_tile(_centered_pairs(w, shifts, S2[:, :, None], X_F16, ASM), BN, 256), xs, acc)
    return tl.dot(_tile(_centered_pairs(wt, shifts, S2t[:, :, None], X_F16, ASM), BN, 32), xt, acc)


@triton.jit
def _q41_wide_step(xs, xt, w_ptr, rows, g, stride_wn, acc, BN: tl.constexpr, X_F16: tl.constexpr,
                   ASM: tl.constexpr):
    """``acc [BN, MP] += dot(d q + m, x)`` over the 8 Q4_1 blocks from ``g`` (a multiple of 8) of each row: their
    160 bytes (16-byte aligned: rows of a multiple of 8 blocks) are words 0-31 and 32-39 (:func:`_wide_words`),
    dequantized word by word with the ``d, m`` of its block (word ``5 b`` of block ``b``: ``d`` low half, ``m``
    high; taken from the tiles with ``tl.gather``); the header words meet x = 0 (``xs [256, MP]``, ``xt [64,
    MP]``: :func:`_wide_x_step`)."""
    w, wt = _wide_words(w_ptr, rows, g, stride_wn, 40)
    shifts = 4 * tl.arange(0, 4)
    q = tl.arange(0, 32)
    hw = tl.gather(w, tl.broadcast_to((5 * (q // 5))[None, :], (BN, 32)), 1)
    qt = tl.arange(0, 8)
    hw6 = tl.gather(w, tl.full((BN, 1), 30, tl.int32), 1)  # words 32-34: block 6, whose header is word 30
    hw7 = tl.gather(wt, tl.full((BN, 1), 3, tl.int32), 1)  # words 35-39: block 7 (word 35)
    ht = tl.where((qt < 3)[None, :], hw6, hw7)
    acc = tl.dot(_tile(_packed_pairs(w, shifts, _half_pairs(hw, False, X_F16)[:, :, None],
                                     _half_pairs(hw, True, X_F16)[:, :, None], X_F16, ASM), BN, 256), xs, acc)
    return tl.dot(_tile(_packed_pairs(wt, shifts, _half_pairs(ht, False, X_F16)[:, :, None],
                                      _half_pairs(ht, True, X_F16)[:, :, None], X_F16, ASM), BN, 64), xt, acc)


@triton.jit
def _affine_scale_words(s_ptr, rows, g, g_hi, stride_sn, G: tl.constexpr):
    """The int32 words ``[BN, (G + 1) // 2]`` holding the scales (or biases; x's dtype) of the ``G`` MLX groups from
    ``g`` (0 from ``g_hi`` on; for ``G >= 2`` ``g`` is even and rows hold an even number of groups, so the words are
    the groups' own; for ``G == 1`` the word holding the scale, whichever half).
    Words, as x's: a loop carries them to the next step in the registers they were loaded into."""
    NW: tl.constexpr = (G + 1) // 2
    j = tl.arange(0, NW)
    return tl.load(s_ptr.to(tl.pointer_type(tl.int32)) + ((rows * stride_sn + g) // 2)[:, None] + j[None, :],
                   mask=(g + 2 * j < g_hi)[None, :], other=0)


@triton.jit
def _affine_pairs(sw, rows, g, stride_sn, G: tl.constexpr, WPS: tl.constexpr):
    """:func:`_affine_scale_words`' ``sw`` -> :func:`_pair16` of the scale of each of a step's ``WPS`` words
    ``[BN, WPS]`` (word ``j``: group ``j // (WPS / G)``; when ``G == 1`` the half of scale ``rows * stride_sn + g``)."""
    BN: tl.constexpr = sw.shape[0]
    NW: tl.constexpr = sw.shape[1]
    sw = tl.reshape(tl.broadcast_to(sw[:, :, None], (BN, NW, WPS // NW)), (BN, WPS))
    if G == 1:
        v = (sw >> (16 * ((rows * stride_sn + g) % 2))[:, None]) & 0xFFFF
    else:
        v = (sw >> (16 * ((tl.arange(0, WPS) // (WPS // G)) % 2))[None, :]) & 0xFFFF
    return v | (v << 16)


@triton.jit
def _affine_step(xs, sw, bw, w_ptr, rows, g, stride_wn, stride_sn, acc, BN: tl.constexpr, GS: tl.constexpr,
                 KS: tl.constexpr, X_F16: tl.constexpr, ASM: tl.constexpr):
    """``acc [BN, MP] += dot(S q + B, x)`` over the ``KS`` codes (``KS / GS`` MLX groups) of a loop step from group
    ``g``, scales and biases in x's dtype as the words ``sw, bw`` of :func:`_affine_scale_words`: each row's ``KS / 8``
    words are one contiguous load, dequantized two codes an instruction (:func:`_packed_pairs`) into one tile of the
    column order of :func:`_x_step`'s MLX case, which ``xs [KS, MP]`` follows."""
    WPS: tl.constexpr = KS // 8
    G: tl.constexpr = KS // GS
    w = tl.load(w_ptr + rows[:, None] * stride_wn + (g * (GS // 8) + tl.arange(0, WPS))[None, :])
    S2 = _affine_pairs(sw, rows, g, stride_sn, G, WPS)
    B2 = _affine_pairs(bw, rows, g, stride_sn, G, WPS)
    return tl.dot(_tile(_packed_pairs(w, 4 * tl.arange(0, 4), S2[:, :, None], B2[:, :, None], X_F16, ASM), BN, KS),
                  xs, acc)


@triton.jit
def _q4k_packed_step(xs, w_ptr, rows, g, stride_wn, acc, BN: tl.constexpr, X_F16: tl.constexpr, ASM: tl.constexpr):
    """``acc [BN, MP] += dot(S q + B, x)`` over half a Q4_K super-block (4 sub-blocks of 32 codes, from sub-block
    ``g``, a multiple of 4): the 16 code words of each row are one contiguous load, every shift of a word is
    dequantized (even shifts sub-block ``2 c``, odd ``2 c + 1`` of its chunk ``c``), two codes an instruction with
    ``S = d sc``, ``B = -dmin m`` rounded to x's dtype once per sub-block; ``xs [128, MP]``: :func:`_x_step`
    (word ``w`` of a row is bytes ``4 (w % 8)`` to ``+ 3`` of chunk ``w // 8``, shift ``i`` takes sub-block
    ``2 chunk + i % 2``, values ``i // 2`` and ``i // 2 + 2`` of those bytes, half ``e``)."""
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    d, dmin, s1, s2, s3 = _q4k_header(w_ptr, (rows * (stride_wn // 4) + (g // 8) * 36)[:, None], None)
    sc, mn = _k_scale_min(s1, s2, s3, (g % 8) + tl.arange(0, 4)[None, :])  # [BN, 4]: chunk-major, parity minor
    S2 = _pair16((d * sc.to(tl.float32)).to(dt))
    B2 = _pair16((-dmin * mn.to(tl.float32)).to(dt))
    S2 = tl.reshape(tl.broadcast_to(tl.reshape(S2, (BN, 2, 1, 1, 2)), (BN, 2, 8, 2, 2)), (BN, 16, 4))
    B2 = tl.reshape(tl.broadcast_to(tl.reshape(B2, (BN, 2, 1, 1, 2)), (BN, 2, 8, 2, 2)), (BN, 16, 4))
    # the row's words from the first of the step's 64 code bytes: a multiple of 4 (144-byte super-blocks, 16 + 64 h)
    first = tl.multiple_of(rows * (stride_wn // 4) + (g // 8) * 36 + 4 + (g % 8) * 4, 4)
    w = tl.load(w_ptr.to(tl.pointer_type(tl.int32)) + first[:, None] + tl.arange(0, 16)[None, :])  # 16-byte loads
    return tl.dot(_tile(_packed_pairs(w, 4 * tl.arange(0, 4), S2, B2, X_F16, ASM), BN, 128), xs, acc)


@triton.jit
def _q4k_step(xp, w_ptr, rows, m, g, M, stride_wn, acc, BN: tl.constexpr, X_F16: tl.constexpr,
              PRESCALE: tl.constexpr):
    """``acc [BN, MP] += sum_j S_j * dot(OFF + q_j, x_j)`` over the 8 sub-blocks of the Q4_K
    super-block starting at group ``g`` (``xp``: :func:`_x_ptrs` of ``g``): per 32-byte chunk
    ``c``, the even shifts of its 8 words are sub-block ``2 c``, the odd ones ``2 c + 1``.
    ``PRESCALE``: ``acc += dot(S_j q_j + B_j, x_j)`` (see :func:`_group_step`)."""
    base = (rows * (stride_wn // 4) + (g // 8) * 36)[:, None]  # [BN, 1] words: 144-byte super-blocks
    d, dmin, s1, s2, s3 = _q4k_header(w_ptr, base, None)
    wj = tl.arange(0, 8)
    for c in tl.static_range(4):
        w = _word(w_ptr, tl.multiple_of(base + 4 + 8 * c, (4, 4)) + wj[None, :], None)
        for p in tl.static_range(2):
            sc, mn = _k_scale_min(s1, s2, s3, 2 * c + p)
            xg = _x_group(xp + 32 * (2 * c + p), m, M)
            a = _tile(_magic_pairs(w, 4 * p + 8 * tl.arange(0, 2), X_F16), BN, 32)
            if PRESCALE:
                S = tl.reshape(d * sc.to(tl.float32), (BN,))
                B = tl.reshape(-dmin * mn.to(tl.float32), (BN,))
                acc = tl.dot(_dequantized(a, S, B, X_F16), xg, acc)
            else:
                acc += d * sc.to(tl.float32) * tl.dot(a, xg)
    return acc


@triton.jit
def _q4k_affine(w_ptr, rows, g0, g_hi, stride_wn, G: tl.constexpr):
    """Q4_K ``(S, B)`` fp32 ``[BN, G]`` of the groups ``g0 .. g0 + G`` (``g0``: a multiple of 8)."""
    sbi = g0 // 8 + tl.arange(0, G // 8)
    d, dmin, s1, s2, s3 = _q4k_header(w_ptr, rows[:, None] * (stride_wn // 4) + sbi[None, :] * 36,
                                      (sbi * 8 < g_hi)[None, :])  # [BN, G / 8]
    sc, mn = _k_scale_min(s1[:, :, None], s2[:, :, None], s3[:, :, None], tl.arange(0, 8)[None, None, :])
    S = tl.reshape(d[:, :, None] * sc.to(tl.float32), (d.shape[0], G))
    B = tl.reshape(-dmin[:, :, None] * mn.to(tl.float32), (d.shape[0], G))
    return S, B


@triton.jit
def _group_affine(w_ptr, s_ptr, b_ptr, rows, g0, g_hi, stride_wn, stride_sn, FMT: tl.constexpr, G: tl.constexpr):
    """``(S, B)`` fp32 ``[BN, G]`` of the groups ``g0 .. g0 + G`` (0 from ``g_hi`` on)."""
    if FMT == Q4_K:
        return _q4k_affine(w_ptr, rows, g0, g_hi, stride_wn, G)
    else:
        gi = g0 + tl.arange(0, G)
        mask = (gi < g_hi)[None, :]
        if FMT == AFFINE:
            S = tl.load(s_ptr + rows[:, None] * stride_sn + gi[None, :], mask=mask, other=0.0).to(tl.float32)
            B = tl.load(b_ptr + rows[:, None] * stride_sn + gi[None, :], mask=mask, other=0.0).to(tl.float32)
        else:
            base = rows[:, None] * stride_wn + gi[None, :] * (18 if FMT == Q4_0 else 20)
            S = _f16(w_ptr, base, mask)
            if FMT == Q4_0:
                B = -8.0 * S
            else:
                B = _f16(w_ptr, base + 2, mask)
        return S, B


@triton.jit
def _offset_terms(x_ptr, w_ptr, s_ptr, b_ptr, rows, m, g_lo, g_hi, M, stride_xm, stride_wn, stride_sn, acc,
                  FMT: tl.constexpr, GS: tl.constexpr, X_F16: tl.constexpr, ONE_ROW: tl.constexpr):
    """``acc += sum_g (B_g - OFF * S_g) * sum_{k in g} x[:, k]`` over groups ``[g_lo, g_hi)``, 16 at a
    time, as an fp32 dot (3-pass TF32, about fp32 accuracy: the OFF term cancels against the codes)."""
    OFF: tl.constexpr = 1024.0 if X_F16 else 128.0
    GCH: tl.constexpr = 16
    gc = tl.arange(0, GCH)
    kc = tl.arange(0, GS)
    for g0 in range(g_lo, g_hi, GCH):
        gi = g0 + gc
        ok = gi < g_hi
        S, B = _group_affine(w_ptr, s_ptr, b_ptr, rows, g0, g_hi, stride_wn, stride_sn, FMT, GCH)
        if ONE_ROW:  # only row 0 of x is real: sum [GCH, GS], place it in column 0
            x1 = tl.load(x_ptr + (gi * GS)[:, None] + kc[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            xs = tl.where((m == 0)[None, :], tl.sum(x1, axis=1)[:, None], 0.0)  # [GCH, MP]
        else:
            xk = x_ptr + m[:, None, None] * stride_xm + (gi * GS)[None, :, None] + kc[None, None, :]
            xc = tl.load(xk, mask=(m < M)[:, None, None] & ok[None, :, None], other=0.0).to(tl.float32)
            xs = tl.trans(tl.sum(xc, axis=2))  # [GCH, MP]
        acc = tl.dot(B - OFF * S, xs, acc, input_precision="tf32x3")
    return acc


@triton.jit(do_not_specialize=["groups_per_split"])
def mmv_kernel(
    x_ptr,  # [M, K] activations, bf16 or fp16 (unit column stride)
    w_ptr,  # MLX: [N, K / 8] int32 words; GGUF: [N * stride_wn] uint8 blocks
    s_ptr, b_ptr,  # MLX: [N, K / GS] scales / biases; GGUF: unused (the blocks hold them), but packed Q4_0's
    # and Q4_1's 8-block steps' s_ptr: [M, K / 256 * 288 or 320] x in tile order (wide_x_kernel)
    out_ptr,  # [M, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, M, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters, zero between launches (FUSE)
    M, N, K, stride_xm, stride_wn, stride_sn, groups_per_split,
    FMT: tl.constexpr, BN: tl.constexpr, GS: tl.constexpr, MP: tl.constexpr, GPS: tl.constexpr,
    X_F16: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr, ONE_ROW: tl.constexpr,
    PRESCALE: tl.constexpr = False, PACKED: tl.constexpr = False, ASM: tl.constexpr = True,
    PDL: tl.constexpr = False,
):
    """``FMT``: ``gemv.AFFINE`` or the GGUF type id (Q4_0, Q4_1, Q4_K); ``stride_wn``: in words
    (MLX) or bytes (GGUF). ``GPS``: groups per loop step (1 or 2; Q4_K: 8, a super-block; ``PACKED``: the
    groups of one ``GPS * GS``-code dot, Q4_K 4). ``groups_per_split``: a multiple of ``GPS``. ``ONE_ROW``:
    ``M == 1``. ``FUSE`` (with ``SPLIT_K``): the last split of each tile to arrive sums the tile's partials into
    ``out``. ``PACKED``: MLX affine or Q4_K tiles of :func:`_affine_step` / :func:`_q4k_packed_step` (``ASM``:
    their PTX, else the interpreter's fp32 form of the same math)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_n * BN + tl.arange(0, BN)
    row_ok = rows < N
    rows = tl.where(row_ok, rows, 0)
    m = tl.arange(0, MP)
    g_lo = pid_k * groups_per_split
    g_hi = tl.minimum(K // GS, g_lo + groups_per_split)
    acc = tl.zeros([BN, MP], dtype=tl.float32)
    if PACKED and (FMT == AFFINE or FMT == Q4_K):  # GPS groups a step of GPS * GS codes, x of the next step first
        KS: tl.constexpr = GPS * GS
        # x of the next step loaded as words during this one, unpacked and reordered at the top of the next
        xn = _x_load(x_ptr, m, g_lo, stride_xm, tl.where(g_lo < g_hi, M, 0), GS, KS)
        if FMT == Q4_K:  # its headers come with the code words, through the cp.async pipeline
            for g in range(g_lo, g_hi, GPS):
                xs = _x_order(pinned(xn, ASM), KS, FMT, x_ptr.dtype.element_ty)
                xn = _x_load(x_ptr, m, g + GPS, stride_xm, tl.where(g + GPS < g_hi, M, 0), GS, KS)
                acc = _q4k_packed_step(xs, w_ptr, rows, g, stride_wn, acc, BN, X_F16, ASM)
        else:  # scales and biases as words a step ahead too
            sw = _affine_scale_words(s_ptr, rows, g_lo, g_hi, stride_sn, GPS)
            bw = _affine_scale_words(b_ptr, rows, g_lo, g_hi, stride_sn, GPS)
            for g in range(g_lo, g_hi, GPS):
                xs = _x_order(pinned(xn, ASM), KS, FMT, x_ptr.dtype.element_ty)
                sc, bc = pinned(sw, ASM), pinned(bw, ASM)
                xn = _x_load(x_ptr, m, g + GPS, stride_xm, tl.where(g + GPS < g_hi, M, 0), GS, KS)
                sw = _affine_scale_words(s_ptr, rows, g + GPS, g_hi, stride_sn, GPS)
                bw = _affine_scale_words(b_ptr, rows, g + GPS, g_hi, stride_sn, GPS)
                acc = _affine_step(xs, sc, bc, w_ptr, rows, g, stride_wn, stride_sn, acc, BN, GS, KS, X_F16, ASM)
    elif PACKED and (FMT == Q4_0 or FMT == Q4_1 and GPS == 8):  # 8 blocks a step, x from wide_x_kernel (s_ptr)
        for g in range(g_lo, g_hi, GPS):
            xs, xt = _wide_x_step(s_ptr, m, g, K, M, FMT)
            if FMT == Q4_0:
                acc = _q40_wide_step(xs, xt, w_ptr, rows, g, stride_wn, acc, BN, X_F16, ASM)
            else:
                acc = _q41_wide_step(xs, xt, w_ptr, rows, g, stride_wn, acc, BN, X_F16, ASM)
    elif PACKED:  # Q4_1, GPS (2 or 4) blocks a step: d and m loaded a step ahead
        S, B = _q41_scales(w_ptr, rows, g_lo, g_hi, stride_wn, GPS, X_F16)
        for g in range(g_lo, g_hi, GPS):
            S_nxt, B_nxt = _q41_scales(w_ptr, rows, g + GPS, g_hi, stride_wn, GPS, X_F16)
            acc = _q41_packed_step(_x_step(x_ptr, m, g, stride_xm, M, GS, GPS * GS, FMT), S, B, w_ptr, rows, g,
                                   stride_wn, acc, GPS, BN, X_F16, ASM)
            S, B = S_nxt, B_nxt
    elif FMT == Q4_K:
        for g in range(g_lo, g_hi, GPS):
            acc = _q4k_step(_x_ptrs(x_ptr, m, _q4k_columns(GS), g, stride_xm, GS), w_ptr, rows, m, g, M, stride_wn,
                            acc, BN, X_F16, PRESCALE)
    else:
        for g in range(g_lo, g_hi, GPS):
            acc = _group_step(_x_step(x_ptr, m, g, stride_xm, M, GS, GS, FMT), w_ptr, s_ptr, b_ptr, rows, g,
                              stride_wn, stride_sn, acc, FMT, BN, GS, X_F16, 0, PRESCALE)
            if GPS == 2:
                acc = _group_step(_x_step(x_ptr, m, g + 1, stride_xm, M, GS, GS, FMT), w_ptr, s_ptr, b_ptr, rows, g,
                                  stride_wn, stride_sn, acc, FMT, BN, GS, X_F16, 1, PRESCALE)
    if not PRESCALE:
        acc = _offset_terms(x_ptr, w_ptr, s_ptr, b_ptr, rows, m, g_lo, g_hi, M, stride_xm, stride_wn, stride_sn,
                            acc, FMT, GS, X_F16, ONE_ROW)
    mask = row_ok[:, None] & (m < M)[None, :]
    out_off = m[None, :].to(tl.int64) * N + (pid_n * BN + tl.arange(0, BN))[:, None]
    store_result(out_ptr, part_ptr, part_ptr, cnt_ptr + pid_n, acc, acc, out_off, mask, M * N, SPLIT_K, FUSE, False, 0)


# ----------------------------------------------------------------------------- launch plans

from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...kernels.dependent import dependent_launch  # noqa: E402
from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ...runtime.memory import empty  # noqa: E402
from .qmm import SplitK, run_split  # noqa: E402

# From the H100 sweeps (bench/mmv_sweep.py, bench/results/2026-11-22-h100-quant-mmv/): 64-feature tiles,
# about 2 programs per SM, 3 pipeline stages for one row of x. From 2 rows the tiles are dequantized before the
# dot, with 3 stages (bench/mmv_sweep.py --prescale, bench/results/2026-11-25-h100-session17/run1): MLX g64
# 4096 x 14336 at M = 8 / 16: 43.2 / 45.9 -> 40.6 / 43.8 us, 14336 x 4096: 42.1 / 45.4 -> 35.4 / 38.2, 4096 x 4096:
# 16.5 / 17.8 -> 13.9 / 15.0; GGUF Q4_K at M = 2-16 65-79 us against 72-88 for the raw-code dots. Packed MLX
# tiles (bench/mmv_sweep.py --packed, session 19 run 3, 12 variants): 64-row tiles, 4 warps, 128-code steps,
# 3 stages, 2 programs per SM best on the three 8B shapes at every M of 2-16 (256- and 512-code steps, 128-row
# tiles and 4 programs per SM 5-50% slower); from 3 rows it beats the integer-dot rows kernel (4096 x 14336 at
# M = 4: 25.6 against 35.8 us; M = 2: 25.6 against 23.9).
MMV_BN = 64  # output features per program
MMV_WARPS = 4
MMV_STAGES = 3  # one row of x
MMV_STAGES_ROWS = 3  # 2-16 rows
PROGRAMS_PER_SM = 2  # split K until about this many programs per SM
MAX_ROWS = 16  # decode calls: 1 to this many rows of x
# Calls of 17 to MID_ROWS_MAX[format] rows (prefill-sized for the other kernels) come here too, the x tile the rows
# padded to a power of two, and take MID_WIDE_BN-feature tiles of MID_WIDE_WARPS warps for the rows of MID_WIDE.
# H100 session 32 run 4 (bench/mid_rows_sweep.py, us at 17 / 64 / 128 rows against the tiled kernel and chunked
# dequantize + cuBLAS that had them, and bf16 cuBLAS): MLX g64 4096 x 14336 25.4 / 37.8 / 64.1 against 172 / 193 /
# 109 (cuBLAS 43.6 / 44.3 / 46.1), 14336 x 4096 23.1 / 40.0 / 61.1 against 477 / 536 / 115; Q4_K 4096 x 14336 27.4 /
# 39.4 / 59.7 against 97 / 112 / 110; Q4_0 4096 x 14336 33.7 / 57.7 against 79 / 85 (chunks 106); 4096 x 4096 MLX
# 10.4 / 15.5 / 27.4 against 28-31 (cuBLAS 14.6-15.7). Q4_0 / Q4_1 tiles of 128 rows do not fit in shared memory.
MID_ROWS_MAX = {AFFINE.value: 128, Q4_K.value: 128, Q4_0.value: 64, Q4_1.value: 64}
MID_WIDE = {AFFINE.value: (33, 64), Q4_0.value: (17, 64), Q4_1.value: (33, 64)}
MID_WIDE_BN = 128
MID_WIDE_WARPS = 8
Q4K_MP8 = True  # packed Q4_K tiles of up to 8 rows of x: x tiles of 8 rows (the dot's N), not 16. Session 28 run 10
# (us, 2 / 4 / 8 rows): 4096 x 14336 25.4-25.6 -> 24.8-25.0, 14336 x 4096 24.0-24.3 -> 23.3-23.6, 4096 x 4096
# 10.4-10.5 -> 10.1-10.3; MLX tiles lost 4-11% with them, Q4_0's wide steps 7-20% (164 registers against 106)
PRESCALE_MIN_ROWS = 2  # rows of x from which the tiles are dequantized before the dot
PACKED = True  # prescaled MLX affine (scales in x's dtype), Q4_K and Q4_1 tiles: dequantized two codes an instruction
MMV_BN_ROWS = 64  # 2-16 rows: output features per program
MMV_WARPS_ROWS = 4
MMV_STEP_ROWS = 128  # PACKED: codes of a row per loop step (at most; whole groups dividing K)
OVER_IDOT_ROWS_FROM = 3  # MLX affine: rows of x from which calls it prefers go here, not to affine_idot_rows
OVER_IDOT_M2_MIN_WEIGHTS = 1 << 25  # and at 2 rows from this N x K (see over_idot_rows)
Q4K_OVER_IDOT_M2_MIN_WEIGHTS = 3 << 22  # GGUF Q4_K at 2 rows: N x K from which calls go here, not to q4k_idot_rows


def over_idot_rows(m: int, n: int, k: int, fmt: int = AFFINE.value) -> bool:
    """Whether a call of ``m`` rows that :func:`prefer` sends here goes here rather than to the integer-dot rows
    kernel (``affine_idot_rows`` for MLX affine, ``ggml/q4k_idot_rows`` for GGUF Q4_K, ``fmt``).

    MLX affine: from ``OVER_IDOT_ROWS_FROM`` rows always; at 2 rows from ``OVER_IDOT_M2_MIN_WEIGHTS`` weights,
    where this kernel's time is flat in M. Session 22 run 1 (g64, us, this kernel against the rows kernel at M2):
    K x N 4096 x 14336 21.7 / 23.6, 14336 x 4096 20.3 / 25.4, 4096 x 8192 13.2 / 16.8, 8192 x 4096 13.6 / 16.0,
    2048 x 16384 12.7 / 14.2; below, at 4096 x 4096, the rows kernel is ahead (8.4 at M2 against 8.6 at M3 here).

    GGUF Q4_K (the rows kernel takes 2 rows): at 2 rows from ``Q4K_OVER_IDOT_M2_MIN_WEIGHTS`` weights. Session 30
    run 2 (H100, us, the rows kernel at M2 with its prefetch on / off against this kernel at M4, an upper bound of
    its M2): K x N 14336 x 4096 27.6 / 29.2 against 23.1, 4096 x 4096 10.8 / 12.6 against 9.8, 4096 x 8192 20.2 /
    19.4 against 15.1, 14336 x 1024 16.2 / 17.0 against 10.3, 2048 x 8192 10.5 / 10.2 against 8.8; below, the rows
    kernel is ahead (4096 x 2048 5.9 against 6.9, 2048 x 2048 3.7 against 4.9, 4096 x 1024 4.2 against 5.5)."""
    if fmt == Q4_K.value:
        return m == 2 and n * k >= Q4K_OVER_IDOT_M2_MIN_WEIGHTS
    return m >= OVER_IDOT_ROWS_FROM or (m == 2 and n * k >= OVER_IDOT_M2_MIN_WEIGHTS)


GGUF_FORMATS = (Q4_0.value, Q4_1.value, Q4_K.value)  # GGUF type ids
Q41_MIN_ROWS = 5  # Q4_1 rows of x from which prefer() sends calls here (packed tiles)
Q41_MIN_WEIGHTS = 1 << 24  # ... of a matrix of at least this many weights
Q41_WIDE = True  # Q4_1 rows of a multiple of 8 blocks take wide steps (16-byte loads), the others 2 or 4 blocks
WIDE_MIN_ROWS = 5  # Q4_0 / Q4_1 rows of x from which prefer() sends calls of wide steps here (q4_mv has 2-4 rows)
WIDE_FEW_ROWS_MIN_WEIGHTS = 1 << 25  # ... and 3-4 rows from this many weights
GGUF_GROUP = 32  # values per GGUF block / Q4_K sub-block
MMV_TRIGGER = False  # PDL trigger: at the start 0.80-0.84x (session 22), after the loop 0.94-1.03x (session 23)
Q4_K_GPS = 8  # Q4_K: a loop step is one 256-value super-block
WIDE_GPS = 8  # packed Q4_0 / Q4_1 ("wide" steps): 8 blocks, 144 / 160 bytes (16-byte aligned in rows of a multiple
# of 8 blocks)
WIDE_X_STEPS = 1  # wide_x_kernel: steps of a row per program. Session 28 run 14 (us, 4-16 rows, 16 -> 1): Q4_0
# 4096 x 4096 13.7-14.4 -> 12.7-13.0, 4096 x 14336 28.9-29.9 -> 27.3-28.5, 14336 x 4096 27.2-28.7 -> 25.8-27.6
WIDE_COLUMNS = {Q4_0.value: 288, Q4_1.value: 320}  # tile columns of a wide step (its words times 8; wide_x_kernel)


def max_rows(fmt: int) -> int:
    """The most rows of x this kernel takes for weights of format ``fmt`` (``gemv.AFFINE`` or a GGUF type id)."""
    return max(MAX_ROWS, MID_ROWS_MAX.get(fmt, 0))


def mid_rows(m: int, fmt: int = AFFINE.value) -> bool:
    """Whether a call of ``m`` rows, more than the decode kernels take, comes here (``MID_ROWS_MAX``)."""
    return MAX_ROWS < m <= MID_ROWS_MAX.get(fmt, 0)


def supports(bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, out_dtype: torch.dtype,
             m: int) -> bool:
    """MLX affine weights and activations this kernel takes (``MLX_NATIVE_MMV=off`` turns it off).

    Only 16-bit outputs: the offset ``OFF`` cancels in fp32 (``OFF * sum(x)`` against ``q . x``),
    which costs about ``OFF / 8`` times fp32 rounding, far below a bf16/fp16 ulp but not within
    the error of an fp32 result.
    """
    low = (torch.bfloat16, torch.float16)
    return (env.settings.mmv != "off" and bits == 4 and transpose and group_size in (32, 64, 128)
            and 1 <= m <= max_rows(AFFINE.value) and x_dtype in low and out_dtype in low)


def supports_gguf(fmt: int, x_dtype: torch.dtype, m: int, k: int, nbytes: int) -> bool:
    """GGUF weights (type id ``fmt``, ``nbytes`` of blocks for ``k`` columns) this kernel takes for
    ``m`` rows of x; the output has x's dtype, 16-bit for the reason of :func:`supports`.
    Byte offsets are int32; Q4_0 needs an even number of blocks per row (its loads pair them)."""
    return (env.settings.mmv != "off" and fmt in GGUF_FORMATS and 1 <= m <= max_rows(fmt)
            and x_dtype in (torch.bfloat16, torch.float16) and nbytes < 2**31 and (fmt != Q4_0.value or k % 64 == 0))


PREFER_MIN_WEIGHTS = 1 << 24  # one row of x: N x K from which this kernel beats the word-level one
PREFER_MIN_K = 2048  # 2-16 rows: K from which it beats the general kernel


def prefer(m: int, n: int, k: int, fmt: int = AFFINE.value) -> bool:
    """Whether a call that :func:`supports` / :func:`supports_gguf` takes should run here (``fmt``: ``gemv.AFFINE``
    or the GGUF type id).

    ``MLX_NATIVE_MMV=on`` / ``off`` decide outright; ``auto`` (default) follows the H100 measurements
    of ``bench/decode_route.py`` (bench/results/2026-11-22-h100-session3/) and ``bench/mmv_sweep.py --prescale``
    (bench/results/2026-11-25-h100-session17/run1):

    * GGUF Q4_0 and Q4_1, rows of a multiple of 8 blocks (packed tiles, wide steps: :func:`wide_rows`): from
      ``WIDE_MIN_ROWS`` rows, and from 3 rows of a matrix of ``>= WIDE_FEW_ROWS_MIN_WEIGHTS`` weights (where
      ``q4_mv``'s rows kernel gives them up; at 3 rows 4096 x 14336 Q4_0 28.7 against 31.5 us, Q4_1 31.2 against
      33.5, 14336 x 4096 Q4_0 27.2 against 26.9, Q4_1 29.3 against 30.1). Q4_0, session 28 run 4
      (H100, us, here against the route before): 4096 x 14336 M4 / M5 / M8 / M16 28.8 / 28.8 / 28.7 / 30.2 against
      35.5 / 58.1 / 58.9 / 61.9, 14336 x 4096 27.3 / 27.3 / 27.1 / 28.6 against 32.6 / 54.2 / 53.9 / 55.6, 4096 x
      4096 14.0 / 14.1 / 14.1 / 14.3 against 12.0 / 20.8 / 20.9 / 21.7; at 2-3 rows ``q4_mv`` is as fast or faster
      (4096 x 4096 M3 10.1 against 13.9, 14336 x 4096 26.9 against 27.2). Before the packed tiles (4-byte loads)
      this kernel lost on every shape (71-72 us at 5-16 rows of 4096 x 14336). Q4_1, session 28 run 6: 4096 x
      14336 M4 / M8 / M16 31.8 / 32.1 / 32.0 against 37.1 / 60.3 / 60.2 (q4_mv; 4-block steps of 4-byte loads),
      14336 x 4096 29.3 / 29.6 / 30.0 against 32.5 / 53.5 / 53.4, 4096 x 4096 M8 15.0 against 19.1.
    * GGUF Q4_1 rows of no whole wide step, from ``Q41_MIN_ROWS`` rows of a matrix of ``>= Q41_MIN_WEIGHTS``
      weights and an even number of blocks a row (packed tiles, 2 or 4 blocks a step of 4-byte loads; 2-4 rows
      have ``q4_mv``'s rows kernel): session 23 run 1 (H200,
      us, here against the general kernel) 4096 x 14336 M5 / M8 / M16 60.1 / 60.4 / 60.3 against 63.9 / 64.8 /
      80.0, 14336 x 4096 54.5 / 54.4 / 54.3 against 59.4 / 65.1 / 71.7, 4096 x 4096 and 2048 x 8192 at 5-16 rows
      18.5-19.0 against 20.8-22.5 (1.06-1.33x; smaller matrices not timed).
    * GGUF Q4_K, 2-16 rows: always (packed tiles, session 19 runs 6-7: 30-34 us on the 8B shapes, 12.6 on 4096 x
      4096, against the general kernel's 72-83 / 26-27); one row has its streamed kernels, two the integer-dot
      rows kernel (``q4k_idot_rows.IDOT_ROWS_MAX``).
    * MLX affine, one row: from ``N * K >= 2**24`` (4096 x 4096 1.10x, 4096 x 14336 1.25x, 14336 x 4096
      1.51x, 576 x 49152 1.06x at g64); smaller matrices are launch and prologue bound here (576 x 576:
      6.3 against 3.3 us; 4096 x 1024: 0.77x).
    * MLX affine, 2-16 rows: from ``K >= 2048`` (K = 4096 / 14336: 1.5-3.1x the general kernel; K <= 1536:
      0.82-0.94x, measured before the packed tiles); ahead of the integer-dot rows kernel as
      :func:`over_idot_rows` says.
    """
    mode = env.settings.mmv
    if mode != "auto":
        return mode == "on"
    if fmt == Q4_K.value:
        return m >= 2
    if fmt == Q4_1.value:
        return wide_rows(m, n, k) or m >= Q41_MIN_ROWS and n * k >= Q41_MIN_WEIGHTS and k % (2 * GGUF_GROUP) == 0
    if fmt == Q4_0.value:
        return wide_rows(m, n, k)
    if fmt != AFFINE.value:
        return False
    return n * k >= PREFER_MIN_WEIGHTS if m == 1 else k >= PREFER_MIN_K


def wide_rows(m: int, n: int, k: int) -> bool:
    """:func:`prefer`'s rule for GGUF Q4_0 / Q4_1 rows of whole wide steps (packed tiles of 8 blocks); at 3-4 rows
    it takes calls from ``q4_mv``'s rows kernel."""
    return k % (WIDE_GPS * GGUF_GROUP) == 0 and (m >= WIDE_MIN_ROWS or m >= 3 and n * k >= WIDE_FEW_ROWS_MIN_WEIGHTS)


def split_rule(groups: int, gps: int, tiles: int, target: int, min_steps: int) -> tuple[int, int]:
    """``(split, groups_per_split)``: split K in powers of two until ``tiles * split`` reaches
    ``target`` programs, keeping at least ``min_steps`` loop steps of ``gps`` groups per split
    (the pipeline's prologue is paid per program)."""
    steps = groups // gps
    split = 1
    while tiles * split < target and steps // (split * 2) >= min_steps and split < 32:
        split *= 2
    per_split = triton.cdiv(steps, split) * gps
    return triton.cdiv(groups, per_split), per_split


BALANCED_SPLIT_ROWS = True  # 2-16 rows of x: balanced_split instead of split_rule
BALANCED_MIN_PROGRAMS_PER_SM = 3  # balanced_split's splits give at least this many programs per SM where they can
BALANCED_GAIN = 0.97  # ... and a larger split must cut the modelled time below this share of the best so far


def balanced_split(groups: int, gps: int, tiles: int, sms: int, min_steps: int) -> tuple[int, int]:
    """``(split, groups_per_split)`` for 2-16 rows of x: the power-of-two K split (at least ``min_steps`` loop
    steps a split) that minimizes the modelled time ``cdiv(programs, sms) * (steps a split + 1)``: the programs
    are all resident and each SM runs its share, so the busiest SM sets the time, and a program's prologue costs
    about a step. Splits of fewer than ``BALANCED_MIN_PROGRAMS_PER_SM`` programs an SM are taken only where no
    split reaches that many (then the largest); a larger split must gain ``1 - BALANCED_GAIN`` (its partials
    cost traffic the model leaves out). Session 42 run 6 (H200, MLX g64, K 4096, 2 rows, us): N 14336 split 2
    (448 programs, 3.39 an SM) 21.28, split 4 (the rule's) 19.90; N 12672 split 2 (396, 3 an SM; the rule's)
    17.28, split 4 18.76; N 16896 split 1 (264) 23.27, split 2 (528, the rule's) 21.68. Run 7, 4096 x 14336 at 2 / 4 /
    8 / 16 rows, split_rule's 2 -> 4: MLX 20.83 / 20.97 / 21.50 / 22.22 -> 19.51 / 19.76 / 20.39 / 22.21, GGUF Q4_K
    24.34 / 24.61 / 24.80 / 24.93 -> 22.18 / 22.47 / 22.77 / 24.52; the other shapes and formats kept their splits."""
    steps = groups // gps
    best, best_cost, largest = None, None, 1
    split = 1
    while split <= 32 and (split == 1 or steps // split >= min_steps):
        per = triton.cdiv(steps, split)
        programs = tiles * triton.cdiv(steps, per)
        largest = split
        if programs >= BALANCED_MIN_PROGRAMS_PER_SM * sms:
            cost = triton.cdiv(programs, sms) * (per + 1)
            if best is None or cost < BALANCED_GAIN * best_cost:
                best, best_cost = split, cost
        split *= 2
    per_split = triton.cdiv(steps, best or largest) * gps
    return triton.cdiv(groups, per_split), per_split


class MmvLaunch:
    """:func:`mmv_kernel` prepared for one signature.

    Args:
        m, n, k: rows of x, output features, input features. group_size: of the weights (GGUF: 32).
        x_dtype / out_dtype: activations (bf16 or fp16) / output. strides: (stride_xm, stride_wn, stride_sn),
            ``stride_wn`` in words (MLX) or bytes (GGUF: the row's bytes; ``stride_sn`` unused).
        fmt: ``gemv.AFFINE`` (MLX, the default) or a GGUF type id of :data:`GGUF_FORMATS`.

    Call with ``(x [m, k], w, s, b)``: MLX words / scales / biases, or for GGUF the raw bytes
    (16-byte aligned) three times. Wide Q4_0 / Q4_1 steps first rewrite x in tile order (:func:`wide_x_kernel`,
    a launch of its own, which the mat-vec follows as a programmatic dependent).

    A K split (``split > 1``) is summed in the same launch by default (``qmm.SplitK``: this plan
    owns the arrival counters, so it must not run on two streams at once).
    """

    def __init__(self, m: int, n: int, k: int, group_size: int, x_dtype: torch.dtype, out_dtype: torch.dtype,
                 strides: tuple, device, fmt: int = AFFINE.value, prescale: Optional[bool] = None,
                 scale_dtype: Optional[torch.dtype] = None):
        wide_lo, wide_hi = MID_WIDE.get(fmt, (0, 0))
        if m == 1:
            bn, warps = MMV_BN, MMV_WARPS
        elif wide_lo <= m <= wide_hi:
            bn, warps = MID_WIDE_BN, MID_WIDE_WARPS
        else:
            bn, warps = MMV_BN_ROWS, MMV_WARPS_ROWS
        if prescale is None:
            prescale = m >= PRESCALE_MIN_ROWS
        groups = k // group_size
        wide = fmt in (Q4_0.value, Q4_1.value) and groups % WIDE_GPS == 0 and (fmt == Q4_0.value or Q41_WIDE)
        packed = PACKED and prescale and (fmt == AFFINE.value and scale_dtype == x_dtype or fmt == Q4_K.value
                                          or fmt == Q4_1.value and groups % 2 == 0 or wide)
        if fmt == Q4_K.value and packed:  # half super-blocks, at least 2 a split
            gps, min_steps = Q4_K_GPS // 2, 2
        elif wide and packed:  # 8 blocks (144 / 160 bytes) a step, at least 2 a split
            gps, min_steps = WIDE_GPS, 2
        elif fmt == Q4_K.value:  # at least 2 super-blocks per split: the 512 values of 4 MLX g64 steps (not swept)
            gps, min_steps = Q4_K_GPS, 2
        elif packed and fmt == Q4_1.value:  # 4 blocks a step where they divide the row, else 2; >= 256 codes a split
            gps = 4 if groups % 4 == 0 else 2
            min_steps = 8 // gps
        elif packed:  # the widest step of whole groups dividing K, splits of at least 512 codes
            step = MMV_STEP_ROWS
            while step > group_size and k % step:
                step //= 2
            gps, min_steps = max(1, step // group_size), max(1, 512 // max(step, group_size))
        else:  # Q4_0 rows always have an even number of blocks here (supports_gguf): pairs of blocks
            gps, min_steps = (2 if groups % 2 == 0 else 1), 4
        tiles = triton.cdiv(n, bn)
        sms = device_info(device).sm_count
        if 2 <= m <= MAX_ROWS and BALANCED_SPLIT_ROWS:  # (17-128 rows keep split_rule: not measured)
            self.split, per_split = balanced_split(groups, gps, tiles, sms, min_steps)
        else:
            self.split, per_split = split_rule(groups, gps, tiles, PROGRAMS_PER_SM * sms, min_steps)
        self.m, self.n, self.out_dtype, self.device, self.fmt = m, n, out_dtype, device, fmt
        # packed MLX / Q4_K tiles load x as int32 words (_x_load): rows of an odd stride are copied to contiguous ones
        self.x_words = packed and fmt in (AFFINE.value, Q4_K.value)
        self.x_copy = self.x_words and strides[0] % 2 == 1
        if self.x_copy:
            strides = (k, *strides[1:])
        self.ints = (m, n, k, *strides, per_split)
        self.wide_x = None
        if wide and packed:  # x in tile order first, the mat-vec a programmatic dependent of it
            steps = k // 256
            sb = min(WIDE_X_STEPS, triton.next_power_of_2(steps))
            self.wide_x = dependent_launch(wide_x_kernel, (m, triton.cdiv(steps, sb)), dict(FMT=fmt, S=sb), device,
                                           True, num_warps=4)
            self.wide_ints, self.wide_shape = (k, strides[0]), (m, steps * WIDE_COLUMNS[fmt])
        self.splitk = SplitK(self.split, m, n, False, 0, device, tiles=tiles) if self.split > 1 else None
        # x tile rows (padded; the dot's N)
        mp = 8 if Q4K_MP8 and packed and fmt == Q4_K.value and m <= 8 else max(16, triton.next_power_of_2(m))
        self.launch = dependent_launch(mmv_kernel, (tiles, self.split), dict(
            FMT=fmt, BN=bn, GS=group_size, MP=mp, GPS=gps, X_F16=x_dtype == torch.float16, SPLIT_K=self.split > 1,
            FUSE=self.splitk is not None and self.splitk.fused, ONE_ROW=m == 1, PRESCALE=prescale, PACKED=packed,
            ASM=not env.settings.triton_interpret), device, MMV_TRIGGER,
            num_warps=warps, num_stages=MMV_STAGES if m == 1 else MMV_STAGES_ROWS)

    def __call__(self, x, w, s, b, *unused) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.out_dtype, device=self.device)
        if self.x_words:  # read as int32 words: 4-byte aligned rows (MLX scales / biases too)
            x = x.contiguous() if self.x_copy else word_aligned(x)
            if self.fmt == AFFINE.value:
                s, b = word_aligned(s), word_aligned(b)
        if self.wide_x is not None:
            s = empty(self.wide_shape, dtype=x.dtype, device=self.device)
            self.wide_x(x, s, *self.wide_ints)
        return run_split(self.launch, self.splitk, (x, w, s, b), out, self.ints)
