"""Decode matmul on tensor cores for GGUF Q6_K, Q8_0 and Q5_K weights and a few rows of x (``ROWS_MIN`` to
``ROWS_MAX``).

The streamed kernels of these types (``q6k_idot``, ``q6k_mv``, ``q8_mv``) decode every code once per row of x; at
4-16 rows their cost grows with the rows (Q6_K 4 rows 36.6 us against 20.1 at one row on 4096 x 14336, H200), and the
tiled decode kernel took 65-108 us. Here each code is decoded once, to a 16-bit weight in x's dtype, and the rows of
x cost tensor-core multiply-adds, as ``quant/mmv.py`` does for 4-bit weights (and for 17-64 rows, which took
chunked dequantize + cuBLAS). ``FMT`` picks the layout:

* Q6_K (llama.cpp's 210-byte super-blocks of 256 values: bytes 0-127 low nibbles ``ql``, 128-191 high bit pairs
  ``qh``, 192-207 int8 scales, 208-209 fp16 ``d``; value ``128 h + l + 64 t`` of half ``h`` (``l`` 0-63, ``t`` 0-1)
  takes nibble ``t`` of ql byte ``64 h + l``, bits ``2 (l // 32) + 4 t`` of qh byte ``32 h + l % 32`` and scale
  ``value // 16``; ``w = d sc (q - 32)``). A loop step is half a super-block (64 ql bytes, 32 qh bytes, 8 scales).
* Q8_0 (34-byte blocks of 32 values: fp16 ``d``, 32 int8 codes; ``w = d q``). A loop step is 4 blocks.
* Q5_K (176-byte super-blocks of 256 values: fp16 ``d``, ``dmin``, 12 bytes of Q4_K's 6-bit scales and mins, 32 bytes
  ``qh``, 128 bytes ``qs``; value ``32 j + l`` of sub-block ``j = 2 c + t`` takes nibble ``t`` of qs byte ``32 c +
  l`` and bit ``j`` of qh byte ``l``; ``w = d sc_j q - dmin m_j``). A loop step is half a super-block; super-blocks
  are 16-byte aligned, so no funnel shifts.

Alignment. Q6_K super-blocks and Q8_0 blocks start 4-byte aligned or two bytes past it; every field is read as the
int32 words from the one holding its first byte, each joined with the next word by a funnel shift of 0 or 16 bits
(``shf``; two loads, the second one word on only where the field is not aligned). Q8_0 steps (rows of whole steps)
start 4-byte aligned, so every offset and shift is a constant; Q6_K's are per row and super-block, or per step where
every row starts 4-byte aligned (``ROWS4``: an even number of super-blocks a row). ``PREFETCH`` (:func:`prefetch_rule`):
the next step's words are loaded before this step is decoded (registers; taken at the top of the next step through
``kernels.loads.pinned``).

Decoding, Q6_K and Q5_K as ``mmv``'s packed tiles: ``(w >> 4 i) & 0x000F000F`` of a word ``w`` is nibble ``i0`` of
bytes ``i1`` and ``i1 + 2`` (``i = 2 i1 + i0``), one per 16-bit half; with the magic exponent of ``quant/mmv.py``
(bf16 ``0x4300``, fp16 ``0x6400``) each half is a 16-bit float ``OFF + v`` exactly, ``(OFF + v) - (OFF + c)`` is ``v -
c`` exactly and ``(v - c) S`` (an FMA with -0.0) rounds once: two values an instruction in PTX (``bf16x2`` /
``f16x2``; the interpreter runs the same math in fp32). Q6_K: ``v`` the 6-bit code (its high pair from qh word ``f``
shifted by ``2 c0`` for ql word ``8 c0 + f``, at bits ``4 i`` and ``4 i + 16``), ``c = 32``, ``S = d sc`` rounded to
x's dtype once per 16 values, so each weight is rounded twice (``S``, then the product), as ``mmv``'s Q4_K tiles.
Q5_K: ``v`` the nibble or'ed with its qh bit in bit 4, ``c = 0``, and ``fma(v, S, B)`` with ``S = d sc``, ``B = -dmin
m`` rounded to x's dtype once per sub-block (``mmv``'s Q4_K tiles with a fifth bit). Q8_0: each code byte (``^ 0x80``:
``u = q + 128``) becomes the fp32 ``2^23 + u`` by a ``prmt`` under the magic exponent; minus ``2^23 + 128`` it is
``q``, times the fp32 ``d`` exact, and one ``cvt`` rounds each weight once, two a register (4 instructions a pair).
The pairs form ``mmv``'s tile (:func:`~mlx_native.ops.quant.mmv._tile`, each thread's register pairs from its own
words) and x is reordered in registers to match (:func:`_x_order_step`): Q6_K column ``((i 4 + f4) 4 + c) 2 + e``
holds the half's value ``64 i0 + 16 c + 4 f4 + 2 e + i1`` (ql word ``4 c + f4``), Q5_K the same with ``64 c1 + 32
i0`` (sub-block ``2 c1 + i0``, ``c = 2 c1 + c0``); Q8_0 column ``((i 8 + f) 4 + b) 2 + e`` value ``32 b + 4 f + 2 i +
e`` of the step (block ``b``, code word ``f``, byte ``2 i + e``).

Grid: axis 0 tiles of ``BN`` output features, axis 1 a K split in whole steps, summed in the launch by the last split
of each tile to arrive (``qmm.store_result``; ``qmm.SplitK`` owns the counters). x rows are padded to ``MP`` (8, 16,
32 or 64, the dot's N: :func:`x_tile_rows`); rows ``>= M`` are masked loads and never stored. x is read as int32
words (an even row stride) a step ahead, unpacked at the top of the next step, as in ``mmv``.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.dependent import dependent_launch, enter
from ...kernels.loads import pinned
from ...kernels.words import half16, word_aligned
from ...runtime import env
from ...runtime.device import device_info
from ...runtime.memory import empty
from ..quant.affine_mv import row_tile
from ..quant.mmv import _k_scale_min, _pair16, _tile, _x_load, split_rule
from ..quant.qmm import SplitK, run_split, store_result
from . import formats

Q6K_ID = formats.BY_NAME["Q6_K"].id
Q8_ID = formats.BY_NAME["Q8_0"].id
Q5K_ID = formats.BY_NAME["Q5_K"].id
Q6_K: tl.constexpr = tl.constexpr(Q6K_ID)
Q8_0: tl.constexpr = tl.constexpr(Q8_ID)
Q5_K: tl.constexpr = tl.constexpr(Q5K_ID)
STEP_VALUES = 128  # a loop step: half a Q6_K / Q5_K super-block, 4 Q8_0 blocks
# Session 40 run 3 (H200, us, Q6_K here against the route before: q6k_idot's rows at 2-4 rows, 4-row slices at 5-8,
# the tiled decode kernel at 9-16; K x N 4096 x 14336 / 14336 x 4096 / 4096 x 4096 / the 4096 x 128256 head):
# 4 rows 33.1 / 33.4 / 12.4 / 235.5 against 36.4 / 39.8 / 16.6 / 286.1; 5 rows 33.1 / 33.6 / 12.4 / 235.4 against
# 74.3 / 90.0 / 25.3 / 482.0; 8 rows 33.4 / 33.6 / 12.4 / 234.6 against 74.8 / 81.2 / 33.2 / 577.7; 16 rows 35.9 /
# 35.5 / 13.5 / 239.5 against 107.6 / 90.3 / 32.4 / 775.7 (dequantize + cuBLAS 97 / 96 / 30 / 806; one row 19.8 /
# 20.8 / 8.4 / 128.8). At 3 rows q6k_idot's rows are ahead on 4096 x 14336 (30.5 against 33.1). Q8_0, run 4 (against
# the route before: q8_mv's rows at 3, 4-row slices at 5, the tiled decode kernel at 6-16): 5 / 8 / 16 rows 50.8 /
# 50.8 / 51.9, 48.4 / 48.7 / 49.3, 16.9 / 17.0 / 17.3 against 66.8 / 71.0 / 71.8, 58.3 / 65.8 / 66.4, 22.2 / 24.6 /
# 24.9 (dequantize + cuBLAS 88 / 89 / 26; one row 21.6 / 21.7 / 8.5); at 3 rows q8_mv's rows are ahead (33.2 against
# 50.5 on 4096 x 14336).
# Session 41 (runs 0 and 2, this module's ROWS4 / byte-column forms): Q5_K at 3 / 4 / 8 / 16 rows 4096 x 14336 29.5
# / 29.6 / 30.0 / 31.1 against the route before (q4k_idot_rows at 3-4, slices, the tiled kernel) 38.4 / 48.3 / 99.5 /
# 100.8; at 2 rows q4k_idot_rows is as fast (28.8 against 29.5). 17 / 32 / 64 rows (chunked dequantize + cuBLAS
# before, 95-100 us): Q6_K 36.2 / 37.1 / 51.5, Q8_0 50.8 / 51.4 / 64.5, Q5_K 35.1 / 36.2 / 51.5.
ROWS_MIN = {Q6K_ID: 4, Q8_ID: 5, Q5K_ID: 3}  # rows of x from which ggml_matmul takes this kernel, by type
ROWS_MAX = 64  # 17-64 rows (MID_ROWS): x tiles of 32 / 64 rows
BN = 64  # output features per program
WARPS = 4
STAGES = 1  # session 40 run 2: the cp.async pipeline of 4-byte pieces spilled (3 stages 3.2x slower than 1)
PROGRAMS_PER_SM = 4  # split K until about this many programs per SM (run 3: Q6_K 4096 x 14336 33.1 against 36.0 with 2)
FEW_TILES_PROGRAMS_PER_SM = 2  # ... this many where the tiles are fewer than the SMs (session 41: Q8_0 / Q5_K 14336 x
# 4096 at 5-16 rows 40.8-42.1 / 29.1-31.0 against 44.7-46.7 / 31.2-32.7 with 4)
MIN_STEPS = 4  # loop steps per split at least
Q8_PREFETCH_STEPS = 12  # Q8_0 prefetches from this many steps a split (prefetch_rule)


def programs_rule(tiles: int, sms: int) -> int:
    """Programs per SM that the K split aims at: ``PROGRAMS_PER_SM``, ``FEW_TILES_PROGRAMS_PER_SM`` where the ``tiles``
    of ``BN`` outputs are fewer than the ``sms`` (longer splits: fewer partial sums to merge)."""
    return FEW_TILES_PROGRAMS_PER_SM if tiles < sms else PROGRAMS_PER_SM


def prefetch_rule(type_id: int, split: int, per_split: int) -> bool:
    """Whether the loop loads the next step's words a step ahead (``PREFETCH``), for a K split ``split`` ways of
    ``per_split`` steps. On without a split (session 40: the 4096 x 128256 head, Q6_K 235 against 249 us, Q8_0 5 / 16
    rows 361.8 / 364.6 against 359.3 / 381.9) and for Q6_K / Q5_K (session 41, their forms with pinned slots 3-4:
    Q6_K 4096 x 14336 at 4 / 8 / 16 rows 31.0 / 31.2 / 31.8 against 32.0 / 32.3 / 33.8, 14336 x 4096 31.0 / 31.0 /
    31.2 against 32.7 / 32.9 / 33.7; Q5_K 4096 x 14336 at 3-16 rows 29.4-31.2 against 33.1-33.8). Q8_0 (decoded a
    byte a column): on from ``Q8_PREFETCH_STEPS`` steps a split (14336 x 4096, 14 steps: 5-16 rows 40.8-42.1 against
    42.8-44.5), off below (4096 x 14336, 8 steps: 41.4-47.5 against 47.5-49.8)."""
    return split == 1 or type_id != Q8_ID or per_split >= Q8_PREFETCH_STEPS


# ``(OFF + v) - (OFF + c)`` is ``v - c`` exactly (``$3``: ``-(OFF + c)`` in both halves) and ``fma(v - c, S, B)``
# rounds once (``$2``, ``$4``: scale and bias pairs; Q6_K's bias -0.0): a pair of dequantized weights from ``$1``, two
# values with the magic exponent.
_PAIRS = """{ .reg .b32 t, one;
 mov.b32 one, ONE;
 fma.rn.TY t, $1, one, $3;
 fma.rn.TY $0, t, $2, $4; }"""
_PAIRS_BF16 = tl.constexpr(_PAIRS.replace("ONE", "0x3F803F80").replace("TY", "bf16x2"))
_PAIRS_F16 = tl.constexpr(_PAIRS.replace("ONE", "0x3C003C00").replace("TY", "f16x2"))


@triton.jit
def _funnel(a, b, sh, ASM: tl.constexpr):
    """The low word of ``(b : a) >> sh`` (``sh`` 0 or 16, broadcast to ``a``'s shape): ``a``, or its high half joined
    with ``b``'s low half."""
    sh = tl.broadcast_to(sh, a.shape)
    if ASM:
        return tl.inline_asm_elementwise("shf.r.clamp.b32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, sh], dtype=tl.int32,
                                         is_pure=True, pack=1)
    return (((a.to(tl.int64) & 0xFFFFFFFF) | (b.to(tl.int64) << 32)) >> sh.to(tl.int64)).to(tl.int32)


@triton.jit
def _step_loads(wp, row_byte, u, FMT: tl.constexpr, ROWS4: tl.constexpr):
    """The words of step ``u`` of the rows at byte ``row_byte [BN]``, as 8 tensors. Q6_K (half ``u % 2`` of
    super-block ``u // 2``): ``(ql, ql1, qh, qh1, sc, sc1, dw, sh)`` -- each field's words from the one holding its
    first byte and the words one on (the same words where the super-block is 4-byte aligned), the word holding ``d``,
    the funnel shift ``[BN, 1]``. Q5_K (half ``u % 2`` of super-block ``u // 2``): ``(qs, qh, dd, s1, s2, s3, h,
    dd)`` -- the half's 16 qs words, the 8 qh words, the header words (``d | dmin``, the three scale words) and the
    half, ``[BN, 1]`` each. Q8_0 (blocks ``4 u .. 4 u + 3``): ``(q, q1, dw, sh, dsh, ..)`` -- the code words
    ``[BN, 4, 8]`` and those one on, the words holding ``d [BN, 4]``, the codes' funnel shift ``[BN, 4, 1]`` and
    ``d``'s half ``[BN, 4]`` (the rest repeat it). ``ROWS4``: every row starts 4-byte aligned (Q6_K: rows of an even
    number of super-blocks), so a Q6_K super-block's alignment is the step's, one for all rows (word offsets from one
    base a row)."""
    if FMT == Q6_K:
        if ROWS4:
            sb = 210 * (u // 2)
            w0 = (row_byte >> 2) + (sb >> 2)  # (a row is 105 K / 512 words: no alignment past 4 bytes)
            one = tl.full((row_byte.shape[0], 1), (sb >> 1) & 1, tl.int32)
        else:
            byte = row_byte + 210 * (u // 2)
            w0 = byte >> 2
            one = ((byte >> 1) & 1)[:, None]
        h = u % 2
        ql = wp + (w0 + 16 * h)[:, None] + tl.arange(0, 16)[None, :]
        qh = wp + (w0 + 32 + 8 * h)[:, None] + tl.arange(0, 8)[None, :]
        sc = wp + (w0 + 48 + 2 * h)[:, None] + tl.arange(0, 2)[None, :]
        return (tl.load(ql), tl.load(ql + one), tl.load(qh), tl.load(qh + one), tl.load(sc), tl.load(sc + one),
                tl.load(wp + w0 + 52), 16 * one)
    elif FMT == Q5_K:
        w0 = tl.multiple_of((row_byte >> 2) + 44 * (u // 2), 4)  # 176-byte super-blocks, 16-byte aligned
        hdr = tl.load(wp + w0[:, None] + tl.arange(0, 4)[None, :])  # one 16-byte load: d | dmin, the scale words
        even, odd = tl.split(tl.reshape(hdr, (hdr.shape[0], 2, 2)))  # words 0, 2 and 1, 3
        dd, s2 = tl.split(even)
        s1, s3 = tl.split(odd)
        qh = tl.load(wp + w0[:, None] + 4 + tl.arange(0, 8)[None, :])
        qs = tl.load(wp + (w0 + 12 + 16 * (u % 2))[:, None] + tl.arange(0, 16)[None, :])
        dd = dd[:, None]
        return qs, qh, dd, s1[:, None], s2[:, None], s3[:, None], tl.full(dd.shape, u % 2, tl.int32), dd
    else:
        # a step's 136 bytes start 4-byte aligned (rows of whole steps): block b's codes at byte 34 b + 2 are the
        # words from (34 b + 2) // 4 shifted by 16 (b even) or not, its d the half (b % 2) of word 34 b // 4
        b = tl.arange(0, 4)
        w0 = tl.multiple_of((row_byte >> 2) + 34 * u, 2)[:, None]  # [BN, 1]; rows of 34 K / 128 words: even
        q = wp + (w0 + ((34 * b + 2) // 4)[None, :])[:, :, None] + tl.arange(0, 8)[None, None, :]
        one = ((b + 1) % 2)[None, :, None]
        dsh = tl.broadcast_to(16 * (b % 2)[None, :], (row_byte.shape[0], 4))
        return tl.load(q), tl.load(q + one), tl.load(wp + w0 + (34 * b // 4)[None, :]), 16 * one, dsh, dsh, dsh, dsh


@triton.jit
def _pairs(code, S2, OFF2, B2, X_F16: tl.constexpr, ASM: tl.constexpr):
    """``code`` pairs with the magic exponent, ``S2`` / ``B2`` (:func:`_pair16` of the scales / biases) and ``OFF2``
    (``-(OFF + c)`` in both halves), broadcast to one shape -> the weights ``fma(v - c, S, B)`` in x's dtype, half
    ``e`` on a last axis of 2."""
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    if ASM:
        d = tl.inline_asm_elementwise(_PAIRS_F16 if X_F16 else _PAIRS_BF16, "=r,r,r,r,r", [code, S2, OFF2, B2],
                                      dtype=tl.int32, is_pure=True, pack=1)
        return tl.join(d.to(tl.int16).to(dt, bitcast=True), (d >> 16).to(tl.int16).to(dt, bitcast=True))
    S = half16(S2, 0, dt).to(tl.float32)
    off = half16(OFF2, 0, dt).to(tl.float32)
    B = half16(B2, 0, dt).to(tl.float32)
    lo = half16(code, 0, dt).to(tl.float32) + off
    hi = half16(code, 16, dt).to(tl.float32) + off
    return tl.join(tl.fma(lo, S, B).to(dt), tl.fma(hi, S, B).to(dt))


# Q8_0: the four code bytes of a word (``^ 0x80``: ``u = q + 128``) as fp32 ``2^23 + u`` (``prmt`` under the magic
# exponent), ``- (2^23 + 128)`` is ``q`` exactly, ``q d`` (fp32 ``d``, ``$3``: its bits) is exact and one ``cvt`` rounds
# each weight once, two a register: ``$0`` bytes 0, 1 and ``$1`` bytes 2, 3 of the word ``$2``.
_Q8_CODE = """{ .reg .b32 m, t; .reg .f32 fd, f0, f1, f2, f3;
 mov.b32 fd, $3; mov.b32 m, 0x4B000000;
 prmt.b32 t, $2, m, 0x7540; mov.b32 f0, t; prmt.b32 t, $2, m, 0x7541; mov.b32 f1, t;
 prmt.b32 t, $2, m, 0x7542; mov.b32 f2, t; prmt.b32 t, $2, m, 0x7543; mov.b32 f3, t;
 sub.f32 f0, f0, 0f4B000080; sub.f32 f1, f1, 0f4B000080; sub.f32 f2, f2, 0f4B000080; sub.f32 f3, f3, 0f4B000080;
 mul.f32 f0, f0, fd; mul.f32 f1, f1, fd; mul.f32 f2, f2, fd; mul.f32 f3, f3, fd;
 cvt.rn.TY.f32 $0, f1, f0; cvt.rn.TY.f32 $1, f3, f2; }"""
_Q8_BF16 = tl.constexpr(_Q8_CODE.replace("TY", "bf16x2"))
_Q8_F16 = tl.constexpr(_Q8_CODE.replace("TY", "f16x2"))


@triton.jit
def _q8_weights(q, d, X_F16: tl.constexpr, ASM: tl.constexpr):
    """``[BN, W]`` Q8_0 code words (bytes ``^ 0x80``), ``d [BN, W]`` fp32 (each word's block) -> ``[BN, W, 2, 2]``
    weights ``q d`` in x's dtype, rounded once: byte ``2 i + e`` of each word at ``[.., i, e]``."""
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    if ASM:
        p01, p23 = tl.inline_asm_elementwise(_Q8_F16 if X_F16 else _Q8_BF16, "=r,=r,r,r",
                                             [q, d.to(tl.int32, bitcast=True)], dtype=(tl.int32, tl.int32),
                                             is_pure=True, pack=1)
        lo = tl.join(half16(p01, 0, dt), half16(p23, 0, dt))
        hi = tl.join(half16(p01, 16, dt), half16(p23, 16, dt))
        return tl.join(lo, hi)
    w = ((((q[:, :, None] >> (8 * tl.arange(0, 4))[None, None, :]) & 0xFF) - 128).to(tl.float32) * d[:, :, None]).to(dt)
    return tl.reshape(w, (q.shape[0], q.shape[1], 2, 2))


@triton.jit
def _x_order_step(xn, FMT: tl.constexpr, DT: tl.constexpr):
    """x of a step as loaded (``[MP, 64]`` int32 words, values in order) -> ``[C, MP]`` in the tile's column order
    (module docstring): Q6_K ``C = 128``, value ``64 i0 + 32 c1 + 16 c0 + 4 f4 + 2 e + i1`` to column ``(((2 i1 + i0) 4
    + f4) 4 + 2 c1 + c0) 2 + e``; Q5_K the same with value ``64 c1 + 32 i0 + ..`` (sub-block ``2 c1 + i0``); Q8_0
    value ``32 b + 4 f + 2 i + e`` to column ``((i 8 + f) 4 + b) 2 + e``."""
    MP: tl.constexpr = xn.shape[0]
    x = tl.reshape(tl.join(half16(xn, 0, DT), half16(xn, 16, DT)), (MP, 128))
    if FMT == Q6_K:
        return tl.reshape(tl.permute(tl.reshape(x, (MP, 2, 2, 2, 4, 2, 2)), (6, 1, 4, 2, 3, 5, 0)), (128, MP))
    elif FMT == Q5_K:
        return tl.reshape(tl.permute(tl.reshape(x, (MP, 2, 2, 2, 4, 2, 2)), (6, 2, 4, 1, 3, 5, 0)), (128, MP))
    else:
        return tl.reshape(tl.permute(tl.reshape(x, (MP, 4, 8, 2, 2)), (3, 2, 1, 4, 0)), (128, MP))


@triton.jit
def _step(xs, t0, t1, t2, t3, t4, t5, t6, t7, acc, FMT: tl.constexpr, BN: tl.constexpr, X_F16: tl.constexpr,
          ASM: tl.constexpr):
    """``acc [BN, MP] += dot(w, x)`` over one step from :func:`_step_loads`' tensors, ``xs`` x of its values in the
    tile's column order (:func:`_x_order_step`)."""
    dt: tl.constexpr = tl.float16 if X_F16 else tl.bfloat16
    OFF: tl.constexpr = 1024.0 if X_F16 else 128.0
    MAGIC: tl.constexpr = 0x64006400 if X_F16 else 0x43004300
    i = tl.arange(0, 4)[None, None, :]
    if FMT == Q6_K:
        ql = _funnel(t0, t1, t7, ASM)
        qh = _funnel(t2, t3, t7, ASM)
        sc = _funnel(t4, t5, t7, ASM)
        d = half16(t6, tl.reshape(t7, (BN,)), tl.float16).to(tl.float32)
        scb = (sc[:, :, None] << (24 - 8 * tl.arange(0, 4))[None, None, :]) >> 24  # int8 scales [BN, 2, 4]
        S2 = _pair16(tl.reshape(d[:, None, None] * scb.to(tl.float32), (BN, 8)).to(dt))
        # scale 4 i0 + 2 c0 + f // 4 of ql word 8 c0 + f, shift i = 2 i1 + i0
        S2 = tl.permute(tl.reshape(S2, (BN, 2, 2, 2)), (0, 2, 3, 1))  # [BN, c0, f // 4, i0]
        S2 = tl.reshape(tl.broadcast_to(tl.reshape(S2, (BN, 2, 2, 1, 1, 2)), (BN, 2, 2, 4, 2, 2)), (BN, 16, 4))
        # qh word f of ql word 8 c0 + f, shifted by 2 c0: its pairs at bits 4 i, 4 i + 16
        hs = tl.reshape(tl.broadcast_to(tl.reshape(qh, (BN, 1, 8)), (BN, 2, 8)), (BN, 16))
        hs = hs >> (2 * (tl.arange(0, 16) // 8))[None, :]
        # bits 4 i, 4 i + 1 (and + 16) of hs to bits 4, 5: left 4 for i = 0, right 4 i - 4 else
        high = ((hs[:, :, None] << tl.where(i == 0, 4, 0)) >> tl.maximum(4 * i - 4, 0)) & 0x00300030
        code = ((ql[:, :, None] >> 4 * i) & 0x000F000F) | high | MAGIC
        OFF2 = _pair16(tl.full((1, 1, 1), -(OFF + 32.0), dt))
        return tl.dot(_tile(_pairs(code, S2, OFF2, _pair16(tl.full((1, 1, 1), -0.0, dt)), X_F16, ASM), BN, 128), xs,
                      acc)
    elif FMT == Q5_K:
        h = tl.reshape(t6, (BN,))
        sc, mn = _k_scale_min(t3, t4, t5, 4 * h[:, None] + tl.arange(0, 4)[None, :])
        d = half16(t2, 0, tl.float16).to(tl.float32)
        dmin = half16(t2, 16, tl.float16).to(tl.float32)
        S2 = _pair16((d * sc.to(tl.float32)).to(dt))  # [BN, 4]: sub-block 4 h + 2 c' + i0
        B2 = _pair16((-dmin * mn.to(tl.float32)).to(dt))
        S2 = tl.reshape(tl.broadcast_to(tl.reshape(S2, (BN, 2, 1, 1, 2)), (BN, 2, 8, 2, 2)), (BN, 16, 4))
        B2 = tl.reshape(tl.broadcast_to(tl.reshape(B2, (BN, 2, 1, 1, 2)), (BN, 2, 8, 2, 2)), (BN, 16, 4))
        # qh word f of qs word 8 c' + f, shifted by 2 c = 4 h + 2 c': bit i0 of bytes i1, i1 + 2 for shift i
        hs = tl.reshape(tl.broadcast_to(tl.reshape(t1, (BN, 1, 8)), (BN, 2, 8)), (BN, 16))
        hs = hs >> (4 * h[:, None] + 2 * (tl.arange(0, 16) // 8)[None, :])
        # bit 8 i1 + i0 (and + 16) of hs to bit 4: left 4 / 3 for i = 0 / 1, right 4 / 5 for i = 2 / 3
        high = ((hs[:, :, None] << tl.where(i < 2, 4 - i, 0)) >> tl.where(i < 2, 0, i + 2)) & 0x00100010
        code = ((t0[:, :, None] >> 4 * i) & 0x000F000F) | high | MAGIC
        OFF2 = _pair16(tl.full((1, 1, 1), -OFF, dt))
        return tl.dot(_tile(_pairs(code, S2, OFF2, B2, X_F16, ASM), BN, 128), xs, acc)
    else:
        q = tl.reshape(_funnel(t0, t1, t3, ASM), (BN, 32)) ^ -0x7F7F7F80  # bytes q + 128 (^ 0x80808080)
        d = tl.reshape(tl.broadcast_to(half16(t2, t4, tl.float16).to(tl.float32)[:, :, None], (BN, 4, 8)), (BN, 32))
        return tl.dot(_tile(_q8_weights(q, d, X_F16, ASM), BN, 128), xs, acc)


@triton.jit(do_not_specialize=["steps_per_split"])
def block_mmv_kernel(
    x_ptr,  # [M, K] activations, bf16 or fp16, 4-byte aligned rows (unit column stride, even stride_xm)
    w_ptr,  # [N * row_bytes] uint8 blocks, 4-byte aligned
    out_ptr,  # [M, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, M, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters, zero between launches (FUSE)
    M, N, K, stride_xm, row_bytes, steps_per_split,
    FMT: tl.constexpr, BN: tl.constexpr, MP: tl.constexpr, X_F16: tl.constexpr, SPLIT_K: tl.constexpr,
    FUSE: tl.constexpr, ROWS4: tl.constexpr = False, PREFETCH: tl.constexpr = True, ASM: tl.constexpr = True,
    PDL: tl.constexpr = 0,
):
    """Grid ``(cdiv(N, BN), split)``; ``FMT``: the GGUF type id (Q6_K, Q8_0 or Q5_K)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows, row_ok = row_tile(N, BN, False)
    row_byte = rows * row_bytes
    m = tl.arange(0, MP)
    u_lo = pid_k * steps_per_split
    u_hi = tl.minimum(K // 128, u_lo + steps_per_split)
    wp = w_ptr.to(tl.pointer_type(tl.int32))
    dt = x_ptr.dtype.element_ty
    acc = tl.zeros([BN, MP], dtype=tl.float32)
    xn = _x_load(x_ptr, m, u_lo, stride_xm, tl.where(u_lo < u_hi, M, 0), 128, 128)  # x of the next step
    if PREFETCH:
        n0, n1, n2, n3, n4, n5, n6, n7 = _step_loads(wp, row_byte, u_lo, FMT, ROWS4)
    for u in range(u_lo, u_hi):
        xs = _x_order_step(pinned(xn, ASM), FMT, dt)
        xn = _x_load(x_ptr, m, u + 1, stride_xm, tl.where(u + 1 < u_hi, M, 0), 128, 128)
        if PREFETCH:
            t0, t1, t2, t5, t6, t7 = pinned(n0, ASM), pinned(n1, ASM), pinned(n2, ASM), pinned(n5, ASM), \
                pinned(n6, ASM), n7
            if FMT == Q8_0:  # slots 3, 4: constant shifts
                t3, t4 = n3, n4
            else:  # loaded words (Q6_K's qh1 and sc, Q5_K's scale words)
                t3, t4 = pinned(n3, ASM), pinned(n4, ASM)
            n0, n1, n2, n3, n4, n5, n6, n7 = _step_loads(wp, row_byte, tl.minimum(u + 1, u_hi - 1), FMT, ROWS4)
        else:
            t0, t1, t2, t3, t4, t5, t6, t7 = _step_loads(wp, row_byte, u, FMT, ROWS4)
        acc = _step(xs, t0, t1, t2, t3, t4, t5, t6, t7, acc, FMT, BN, X_F16, ASM)
    mask = row_ok[:, None] & (m < M)[None, :]
    out_off = m[None, :].to(tl.int64) * N + (pid_n * BN + tl.arange(0, BN))[:, None]
    store_result(out_ptr, part_ptr, part_ptr, cnt_ptr + pid_n, acc, acc, out_off, mask, M * N, SPLIT_K, FUSE, False, 0)


def x_tile_rows(m: int) -> int:
    """Rows of the x tile (the dot's N) for ``m`` rows of x: 8, 16, or ``m`` padded to a power of two."""
    return 8 if m <= 8 else max(16, triton.next_power_of_2(m))


def _row_unit(type_id: int) -> int:
    """Values a row must be a multiple of: Q6_K / Q5_K whole super-blocks, Q8_0 whole steps of 4 blocks."""
    return STEP_VALUES if type_id == Q8_ID else 256


def supports(type_id: int, x_dtype: torch.dtype, m: int, k: int, raw_bytes: int) -> bool:
    """``ROWS_MIN[type]`` to ``ROWS_MAX`` rows of bf16/fp16 x (its dtype the result's: the rounding of the weights is
    within a 16-bit result's error bar, not fp32's) against Q6_K / Q5_K rows of whole super-blocks or Q8_0 rows of a
    multiple of 128 values, int32 offsets. ``MLX_NATIVE_MMV=off`` turns it off, as the 4-bit tensor-core decode
    kernel."""
    return (env.settings.mmv != "off" and type_id in ROWS_MIN and ROWS_MIN[type_id] <= m <= ROWS_MAX
            and x_dtype in (torch.bfloat16, torch.float16) and k > 0 and k % _row_unit(type_id) == 0
            and raw_bytes < 2**31)


class BlockMmvLaunch:
    """:func:`block_mmv_kernel` for ``(x [m, k], raw)`` of GGUF type ``type_id`` (raw: the blocks as uint8, 16-byte
    aligned), x rows at stride ``x_row_stride`` (an odd one is copied to contiguous rows: x is read as int32 words); the
    result has x's dtype. The counters of a K split belong to the plan: it must not run on two streams at once.
    ``programs_per_sm`` (the K split's target; 0: no split) and ``prefetch``: the sweep's knobs (None: the rules)."""

    def __init__(self, type_id: int, m: int, n: int, k: int, x_dtype: torch.dtype, x_row_stride: int, device,
                 programs_per_sm: Optional[int] = None, prefetch: Optional[bool] = None):
        if type_id not in ROWS_MIN or k % _row_unit(type_id) or not 1 <= m <= ROWS_MAX:
            raise ValueError(f"block_mmv: GGUF Q6_K, Q8_0 or Q5_K (got type {type_id}) rows of a multiple of "
                             f"{_row_unit(type_id)} values (got {k}), 1-{ROWS_MAX} rows of x (got {m})")
        tiles = triton.cdiv(n, BN)
        sms = device_info(device).sm_count
        pps = programs_rule(tiles, sms) if programs_per_sm is None else programs_per_sm
        self.split, per_split = split_rule(k // STEP_VALUES, 1, tiles, pps * sms, MIN_STEPS)
        self.prefetch = prefetch_rule(type_id, self.split, per_split) if prefetch is None else prefetch
        self.m, self.n, self.dtype, self.device = m, n, x_dtype, device
        self.x_copy = x_row_stride % 2 == 1
        row_bytes = formats.row_bytes(formats.BY_ID[type_id], k)
        self.ints = (m, n, k, k if self.x_copy else x_row_stride, row_bytes, per_split)
        self.splitk = SplitK(self.split, m, n, False, 0, device, tiles=tiles) if self.split > 1 else None
        self.launch = dependent_launch(block_mmv_kernel, (tiles, self.split), dict(
            FMT=type_id, BN=BN, MP=x_tile_rows(m), ROWS4=row_bytes % 4 == 0, X_F16=x_dtype == torch.float16,
            SPLIT_K=self.split > 1,
            FUSE=self.splitk is not None and self.splitk.fused, PREFETCH=self.prefetch,
            ASM=not env.settings.triton_interpret), device, False, num_warps=WARPS, num_stages=STAGES)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.dtype, device=self.device)
        x = x.contiguous() if self.x_copy else word_aligned(x)
        return run_split(self.launch, self.splitk, (x, raw), out, self.ints)
