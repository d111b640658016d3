"""Decode mat-vec for GGUF Q6_K weights and one to four rows of x, streamed like ``ggml/q4_mv.py``.

A Q6_K super-block (210 bytes, only 2-byte aligned: read as 105 16-bit halves) holds 256 values in two halves
of 128: ``ql`` (halves 0-63: low nibbles), ``qh`` (halves 64-95: high 2-bit pairs), 16 int8 scales (bytes
192-207) and fp16 ``d`` (half 104); value ``= d * sc * (q - 32)`` with the 6-bit ``q`` and the int8 scale of
its 16 values. Unit ``u`` (0-15) of half ``h`` is the pair of positions ``l = 2u, 2u + 1``, read as three
halves: ``A`` = ql half ``32 h + u`` (low nibbles of values ``l`` / ``l + 1`` in bits 0-3 / 8-11, of ``l + 64`` /
``l + 65`` in bits 4-7 / 12-15), ``B`` = ql half ``32 h + 16 + u`` (the same for ``l + 32`` / ``l + 96``) and
``C`` = qh half ``64 + 16 h + u`` (bits ``2 r`` / ``8 + 2 r``: the high pairs of ``l + 32 r`` / ``l + 1 + 32 r``):
3 loads for 8 codes, which belong to the four 16-value scale groups ``8 h + 2 r + u // 8`` (``r`` = 0-3, the
32-value rows of the half).

Tiles are ``[BN rows, G slots, T threads]``: a slot is a half super-block (``G = 2 SBS`` per step), its 16
units spread over ``T = 16 / UPT`` adjacent lanes, thread ``t`` taking units ``UPT t .. UPT t + UPT - 1``, which
share their four scales. With the rows first in the tile's shape Triton's coalescing puts the lanes on the
threads of the slots and then the slots, the remaining lanes and the warps on the rows, ``RT`` rows of each
thread in registers; every load (codes, scales, ``d``, x as ``[1, G, T]``) gets that layout, so nothing is
converted in the loop.

Decoding, per unit and row: two shifts (``C << 4``, ``C << 2``) and four bit selects (one LOP3 each: the
mask ``0x0F0F0F0F`` is a runtime value) build ``W0 = A & 0x0F0F | C << 4 & ~0x0F0F`` (codes ``l``, ``l + 1``
at bits 0 / 8), ``W2`` (the other bits: ``l + 64``, ``l + 65`` at bits 4 / 12) and ``W1`` / ``W3`` (``B`` with
``C << 2``: ``l + 32``, ``l + 33`` / ``l + 96``, ``l + 97``); each code is then one LOP3 ``(W & 63 << s) |
2**23`` (the fp32 ``2**23 + q 2**s``), one FMA (FADD at ``s = 0``) giving ``q - 32`` exactly (the offset is
folded into its constant, no x sums needed) and one FMA into its group's sum ``g_r``. Per thread, slot and
row: 4 int8 scale loads (I2FP), ``t = sum_r sc_r g_r`` and ``acc += d t`` (``d``: one 16-bit load, HADD2):
19 instructions for the ``8 UPT`` codes; x comes as int32 words (pairs of bf16/fp16 values, 4 a unit, one
shift or mask each), shared by the thread's rows. Offline sm_90 SASS (Triton 3.6 and 3.9, UPT 4, RT 4, bf16
x): 5.2 instructions and 0.66 loads a code in the loop, 168 registers.

The loop runs two steps an iteration: the next step's operands are loaded before the current one is decoded
(register prefetch) into registers the step before has released, so no copies follow each step (one step an
iteration left ~35 MOVs a step); the second step is skipped past the split's end, and the last loads of a
split reload its last step. ``ASM``: the 16- and 8-bit loads are PTX loads into 32-bit registers (with
``tl.load`` LLVM carries the prefetched values packed in pairs and quads through the loop, 0.5 PRMT a code to
unpack them). A K split is summed in the same launch (``qmm.store_result``).

Rows of x (``MR``, 2 to 4: a few tokens decoded at once; the one-row code above is its own constexpr branch and
compiles as before): the weights are streamed once for all rows. Each unit's eight codes are decoded once and
scaled by their group's ``d sc`` (one FMUL a code; the four ``d sc`` of a slot are made once a step), then each row
of x costs one FMA a code into its own ``[BN, G, T]`` accumulator, its x words loaded as the one row's are at
``x + row * stride_x``. The group sums of the one-row loop would need ``4 MR`` accumulators a thread and row (and
still one FMA a code and row of x); the scaled codes need ``MR``. The rows' results are joined into one
``store_result`` (:func:`~mlx_native.ops.quant.affine_mv.store_rows`): the output ``[MR, N]``, a K split's
partials ``[split, MR, N]`` and one arrival counter per row tile, as with one row.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..quant.affine_mv import code_f32, row_tile, store_rows
from ...kernels.dependent import enter
from ...kernels.loads import last_split, load_or_zero, tail_mask
from ...kernels.words import bit_select, half_lo, word_aligned, x_pair


@triton.jit
def _code_words(a, b, c, nib):
    """A unit's ``A, B, C`` halves (int32) -> the words ``W0 .. W3`` holding its 6-bit codes of 32-value rows 0-3
    (``nib = 0x0F0F0F0F``)."""
    t4 = c << 4
    u2 = c << 2
    w0 = bit_select(nib, a, t4)  # codes l (bits 0-5), l + 1 (bits 8-13)
    w2 = bit_select(nib, t4, a)  # codes l + 64 (bits 4-9), l + 65 (bits 12-17)
    w1 = bit_select(nib, b, u2)  # codes l + 32, l + 33
    w3 = bit_select(nib, u2, b)  # codes l + 96, l + 97
    return w0, w1, w2, w3


@triton.jit
def _unit(a, b, c, xw_ptr, x_off, g0, g1, g2, g3, magic, nib, X_BF16: tl.constexpr, x_mask=None):
    """Add one unit's codes times x to the group sums ``g0 .. g3`` (32-value rows 0-3 of its half): ``a, b,
    c`` its ql / ql + 32 / qh halves (int32, zero-extended), ``x_off`` the int32 word of its x pair in row
    0 (x 0 where ``x_mask`` is False), ``nib = 0x0F0F0F0F``."""
    w0, w1, w2, w3 = _code_words(a, b, c, nib)
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off, x_mask), X_BF16)
    g0 = tl.fma(code_f32(w0, 0, magic, 6, 32.0), x0, g0)
    g0 = tl.fma(code_f32(w0, 8, magic, 6, 32.0), x1, g0)
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off + 16, x_mask), X_BF16)
    g1 = tl.fma(code_f32(w1, 0, magic, 6, 32.0), x0, g1)
    g1 = tl.fma(code_f32(w1, 8, magic, 6, 32.0), x1, g1)
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off + 32, x_mask), X_BF16)
    g2 = tl.fma(code_f32(w2, 4, magic, 6, 32.0), x0, g2)
    g2 = tl.fma(code_f32(w2, 12, magic, 6, 32.0), x1, g2)
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off + 48, x_mask), X_BF16)
    g3 = tl.fma(code_f32(w3, 4, magic, 6, 32.0), x0, g3)
    g3 = tl.fma(code_f32(w3, 12, magic, 6, 32.0), x1, g3)
    return g0, g1, g2, g3


@triton.jit
def _ld(p, ASM: tl.constexpr, mask=None):
    """int32 of the uint16 / int8 at ``p`` (zero- / sign-extended; 0 where ``mask`` is False). ``ASM`` (unmasked
    loads): one PTX load into a 32-bit register (LLVM would otherwise carry the prefetched 16- and 8-bit values
    packed in pairs and quads through the loop, unpacking each with a PRMT), else ``tl.load``."""
    if mask is not None:
        return tl.load(p, mask=mask, other=0).to(tl.int32)
    elif ASM:
        if p.dtype.element_ty == tl.uint16:
            return tl.inline_asm_elementwise("ld.global.u16 $0, [$1];", "=r,l", [p], dtype=tl.int32, is_pure=True,
                                             pack=1)
        else:
            return tl.inline_asm_elementwise("ld.global.s8 $0, [$1];", "=r,l", [p], dtype=tl.int32, is_pure=True,
                                             pack=1)
    else:
        return tl.load(p).to(tl.int32)


@triton.jit
def _load(w_ptr, w8_ptr, a_off, c_off, s_off, d_off, hb, UPT: tl.constexpr, ASM: tl.constexpr, mask=None):
    """The raw operands of a step at super-block half offset ``hb``: ``A, B, C`` of the thread's units 0-3
    (those past ``UPT`` repeat unit 0), the four scale bytes of its group set and ``d`` (int32 each; 0 where
    ``mask`` is False)."""
    a0 = _ld(w_ptr + a_off + hb, ASM, mask)
    b0 = _ld(w_ptr + a_off + hb + 16, ASM, mask)
    c0 = _ld(w_ptr + c_off + hb, ASM, mask)
    a1, b1, c1, a2, b2, c2, a3, b3, c3 = a0, b0, c0, a0, b0, c0, a0, b0, c0
    if UPT >= 2:
        a1 = _ld(w_ptr + a_off + hb + 1, ASM, mask)
        b1 = _ld(w_ptr + a_off + hb + 17, ASM, mask)
        c1 = _ld(w_ptr + c_off + hb + 1, ASM, mask)
    if UPT == 4:
        a2 = _ld(w_ptr + a_off + hb + 2, ASM, mask)
        b2 = _ld(w_ptr + a_off + hb + 18, ASM, mask)
        c2 = _ld(w_ptr + c_off + hb + 2, ASM, mask)
        a3 = _ld(w_ptr + a_off + hb + 3, ASM, mask)
        b3 = _ld(w_ptr + a_off + hb + 19, ASM, mask)
        c3 = _ld(w_ptr + c_off + hb + 3, ASM, mask)
    sp = w8_ptr + s_off + 2 * hb
    sc0 = _ld(sp, ASM, mask)
    sc1 = _ld(sp + 2, ASM, mask)
    sc2 = _ld(sp + 4, ASM, mask)
    sc3 = _ld(sp + 6, ASM, mask)
    d = _ld(w_ptr + d_off + hb, ASM, mask)
    return a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3, sc0, sc1, sc2, sc3, d


@triton.jit
def _step(acc, a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3, sc0, sc1, sc2, sc3, d, xw_ptr, xo, magic, nib,
          UPT: tl.constexpr, X_BF16: tl.constexpr, x_mask=None):
    """``acc + d * sum_r sc_r * g_r`` for one step's operands (``_load``), ``g_r`` the sums of the thread's
    units' codes times x in the 32-value rows ``r`` of its half (``xo``: x word of its unit 0, row 0; x 0 where
    ``x_mask`` is False)."""
    z = tl.zeros(acc.shape, dtype=tl.float32)
    g0, g1, g2, g3 = _unit(a0, b0, c0, xw_ptr, xo, z, z, z, z, magic, nib, X_BF16, x_mask)
    if UPT >= 2:
        g0, g1, g2, g3 = _unit(a1, b1, c1, xw_ptr, xo + 1, g0, g1, g2, g3, magic, nib, X_BF16, x_mask)
    if UPT == 4:
        g0, g1, g2, g3 = _unit(a2, b2, c2, xw_ptr, xo + 2, g0, g1, g2, g3, magic, nib, X_BF16, x_mask)
        g0, g1, g2, g3 = _unit(a3, b3, c3, xw_ptr, xo + 3, g0, g1, g2, g3, magic, nib, X_BF16, x_mask)
    t = sc0.to(tl.float32) * g0
    t = tl.fma(sc1.to(tl.float32), g1, t)
    t = tl.fma(sc2.to(tl.float32), g2, t)
    t = tl.fma(sc3.to(tl.float32), g3, t)
    return tl.fma(half_lo(d), t, acc)


@triton.jit
def _row_dot(acc, v00, v01, v10, v11, v20, v21, v30, v31, xw_ptr, x_off, X_BF16: tl.constexpr, x_mask=None):
    """``acc`` + one unit's scaled codes (``v_r0, v_r1``: positions ``l, l + 1`` of its 32-value row ``r``) times
    one row of x (``x_off``: the x word of the unit's pair in its row 0; x 0 where ``x_mask`` is False)."""
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off, x_mask), X_BF16)
    acc = tl.fma(v00, x0, acc)
    acc = tl.fma(v01, x1, acc)
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off + 16, x_mask), X_BF16)
    acc = tl.fma(v10, x0, acc)
    acc = tl.fma(v11, x1, acc)
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off + 32, x_mask), X_BF16)
    acc = tl.fma(v20, x0, acc)
    acc = tl.fma(v21, x1, acc)
    x0, x1 = x_pair(load_or_zero(xw_ptr + x_off + 48, x_mask), X_BF16)
    acc = tl.fma(v30, x0, acc)
    acc = tl.fma(v31, x1, acc)
    return acc


@triton.jit
def _unit_rows(acc0, acc1, acc2, acc3, a, b, c, ds0, ds1, ds2, ds3, xw_ptr, x_off, stride_xw, magic, nib,
               MR: tl.constexpr, X_BF16: tl.constexpr, x_mask=None):
    """The accumulators of ``MR`` rows of x (``stride_xw`` words apart) + one unit's codes (``a, b, c`` as for
    :func:`_unit`), decoded once and scaled by ``ds_r = d sc_r`` of their 32-value row ``r``."""
    w0, w1, w2, w3 = _code_words(a, b, c, nib)
    v00 = code_f32(w0, 0, magic, 6, 32.0) * ds0
    v01 = code_f32(w0, 8, magic, 6, 32.0) * ds0
    v10 = code_f32(w1, 0, magic, 6, 32.0) * ds1
    v11 = code_f32(w1, 8, magic, 6, 32.0) * ds1
    v20 = code_f32(w2, 4, magic, 6, 32.0) * ds2
    v21 = code_f32(w2, 12, magic, 6, 32.0) * ds2
    v30 = code_f32(w3, 4, magic, 6, 32.0) * ds3
    v31 = code_f32(w3, 12, magic, 6, 32.0) * ds3
    acc0 = _row_dot(acc0, v00, v01, v10, v11, v20, v21, v30, v31, xw_ptr, x_off, X_BF16, x_mask)
    acc1 = _row_dot(acc1, v00, v01, v10, v11, v20, v21, v30, v31, xw_ptr + stride_xw, x_off, X_BF16, x_mask)
    if MR > 2:
        acc2 = _row_dot(acc2, v00, v01, v10, v11, v20, v21, v30, v31, xw_ptr + 2 * stride_xw, x_off, X_BF16,
                        x_mask)
    if MR > 3:
        acc3 = _row_dot(acc3, v00, v01, v10, v11, v20, v21, v30, v31, xw_ptr + 3 * stride_xw, x_off, X_BF16,
                        x_mask)
    return acc0, acc1, acc2, acc3


@triton.jit
def _step_any(acc0, acc1, acc2, acc3, a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3, sc0, sc1, sc2, sc3, d,
              xw_ptr, xo, stride_xw, magic, nib, UPT: tl.constexpr, MR: tl.constexpr, X_BF16: tl.constexpr,
              x_mask=None):
    """One step for ``MR`` rows of x: :func:`_step` into ``acc0`` for one row, else each unit through
    :func:`_unit_rows` (the accumulators of rows ``MR`` and up are returned as they came)."""
    if MR == 1:
        acc0 = _step(acc0, a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3, sc0, sc1, sc2, sc3, d, xw_ptr, xo, magic,
                     nib, UPT, X_BF16, x_mask)
    else:
        dh = half_lo(d)
        ds0 = dh * sc0.to(tl.float32)
        ds1 = dh * sc1.to(tl.float32)
        ds2 = dh * sc2.to(tl.float32)
        ds3 = dh * sc3.to(tl.float32)
        acc0, acc1, acc2, acc3 = _unit_rows(acc0, acc1, acc2, acc3, a0, b0, c0, ds0, ds1, ds2, ds3, xw_ptr, xo,
                                            stride_xw, magic, nib, MR, X_BF16, x_mask)
        if UPT >= 2:
            acc0, acc1, acc2, acc3 = _unit_rows(acc0, acc1, acc2, acc3, a1, b1, c1, ds0, ds1, ds2, ds3, xw_ptr,
                                                xo + 1, stride_xw, magic, nib, MR, X_BF16, x_mask)
        if UPT == 4:
            acc0, acc1, acc2, acc3 = _unit_rows(acc0, acc1, acc2, acc3, a2, b2, c2, ds0, ds1, ds2, ds3, xw_ptr,
                                                xo + 2, stride_xw, magic, nib, MR, X_BF16, x_mask)
            acc0, acc1, acc2, acc3 = _unit_rows(acc0, acc1, acc2, acc3, a3, b3, c3, ds0, ds1, ds2, ds3, xw_ptr,
                                                xo + 3, stride_xw, magic, nib, MR, X_BF16, x_mask)
    return acc0, acc1, acc2, acc3


@triton.jit
def tile_offsets(r_off, SBS: tl.constexpr, UPT: tl.constexpr):
    """``(a_off, c_off, s_off, d_off, x_off)``: ``[BN, G, T]`` half offsets at a step's first super-block for unit
    ``UPT t`` of slot ``g`` (its ``A`` and ``C``, ``d``, and, in bytes for the int8 pointer, the scale of row 0 of its
    group set) from the rows' half offsets ``r_off [BN]``, and ``[1, G, T]`` the x word (2 values) of that unit, row
    0, slot ``g``."""
    G: tl.constexpr = 2 * SBS
    gi = tl.arange(0, G)
    h = gi % 2
    slot = ((gi // 2) * 105)[None, :, None] + r_off[:, None, None]
    u0 = (UPT * tl.arange(0, 16 // UPT))[None, None, :]
    a_off = slot + (32 * h)[None, :, None] + u0
    c_off = slot + (64 + 16 * h)[None, :, None] + u0
    d_off = slot + 104 + 0 * u0
    s_off = 2 * slot + (192 + 8 * h)[None, :, None] + u0 // 8
    x_off = (gi * 64)[None, :, None] + u0
    return a_off, c_off, s_off, d_off, x_off


@triton.jit
def rows_loop(w_ptr, a_off, c_off, s_off, d_off, x_ptr, x_off, stride_xw, j_lo, j_hi, is_last, magic, nib,
              N_SB: tl.constexpr, BN: tl.constexpr, SBS: tl.constexpr, UPT: tl.constexpr, TAIL: tl.constexpr,
              MR: tl.constexpr, ASM: tl.constexpr):
    """The ``[BN, G, T]`` fp32 accumulators of ``MR`` rows of x (``x_ptr``: bf16/fp16, rows ``stride_xw`` words
    apart) against super-blocks ``j_lo .. j_hi`` of the rows at :func:`tile_offsets` from ``w_ptr`` (the raw rows as
    int16 halves), and with ``TAIL`` the row's last, partial step where ``is_last`` (a K split's last program).
    Two steps an iteration, each step's operands loaded into the registers the step before released (the second step
    skipped past ``j_hi``)."""
    X_BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    G: tl.constexpr = 2 * SBS
    w8_ptr = w_ptr.to(tl.pointer_type(tl.int8))
    w_ptr = w_ptr.to(tl.pointer_type(tl.uint16))  # zero-extended halves
    xw_ptr = x_ptr.to(tl.pointer_type(tl.int32))
    last = j_hi - SBS
    acc0 = tl.zeros([BN, G, 16 // UPT], dtype=tl.float32)
    acc1, acc2, acc3 = acc0, acc0, acc0  # rows 1-3 of x (MR > 1)
    if TAIL:  # the row's last, partial step: its first TAIL super-blocks, for the last split
        T0: tl.constexpr = N_SB - TAIL  # its first super-block
        tail = tail_mask(tl.arange(0, G) // 2, TAIL, is_last)[None, :, None]
        ta0, tb0, tc0, ta1, tb1, tc1, ta2, tb2, tc2, ta3, tb3, tc3, ts0, ts1, ts2, ts3, td = _load(
            w_ptr, w8_ptr, a_off, c_off, s_off, d_off, T0 * 105, UPT, ASM, tail)
    a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3, s0, s1, s2, s3, d = _load(
        w_ptr, w8_ptr, a_off, c_off, s_off, d_off, j_lo * 105, UPT, ASM)
    for j in range(j_lo, j_hi, 2 * SBS):
        e0, f0, g0, e1, f1, g1, e2, f2, g2, e3, f3, g3, t0, t1, t2, t3, dd = _load(
            w_ptr, w8_ptr, a_off, c_off, s_off, d_off, tl.minimum(j + SBS, last) * 105, UPT, ASM)
        acc0, acc1, acc2, acc3 = _step_any(acc0, acc1, acc2, acc3, a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3, s0,
                                           s1, s2, s3, d, xw_ptr, x_off + 128 * j, stride_xw, magic, nib, UPT, MR,
                                           X_BF16)
        a0, b0, c0, a1, b1, c1, a2, b2, c2, a3, b3, c3, s0, s1, s2, s3, d = _load(
            w_ptr, w8_ptr, a_off, c_off, s_off, d_off, tl.minimum(j + 2 * SBS, last) * 105, UPT, ASM)
        if j + SBS < j_hi:
            acc0, acc1, acc2, acc3 = _step_any(acc0, acc1, acc2, acc3, e0, f0, g0, e1, f1, g1, e2, f2, g2, e3, f3, g3,
                                               t0, t1, t2, t3, dd, xw_ptr, x_off + 128 * (j + SBS), stride_xw, magic,
                                               nib, UPT, MR, X_BF16)
    if TAIL:
        acc0, acc1, acc2, acc3 = _step_any(acc0, acc1, acc2, acc3, ta0, tb0, tc0, ta1, tb1, tc1, ta2, tb2, tc2, ta3,
                                           tb3, tc3, ts0, ts1, ts2, ts3, td, xw_ptr, x_off + 128 * T0, stride_xw, magic,
                                           nib, UPT, MR, X_BF16, tail)
    return acc0, acc1, acc2, acc3


@triton.jit(do_not_specialize=["blocks_per_split", "magic", "nib"])
def q6k_mv_kernel(
    x_ptr,  # [MR, K] activations, bf16 or fp16 (read as int32 words of two values), row stride 2 stride_xw
    w_ptr,  # [N * K / 256 * 105] int16 halves of the raw rows
    out_ptr,  # [MR, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, MR, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, stride_xw, blocks_per_split, magic, nib,
    N_SB: tl.constexpr, BN: tl.constexpr, SBS: tl.constexpr, UPT: tl.constexpr, EVEN_N: tl.constexpr,
    SPLIT_K: tl.constexpr, FUSE: tl.constexpr, ASM: tl.constexpr,
    PDL: tl.constexpr = False, TAIL: tl.constexpr = 0, MR: tl.constexpr = 1,
):
    """Offsets are in 16-bit halves (105 per super-block, ``N_SB`` super-blocks per row) and x words; ``SBS``
    super-blocks per loop step (``G = 2 SBS`` slots), ``UPT`` units per thread and slot (1, 2 or 4);
    ``blocks_per_split`` is a multiple of ``SBS``. The loop runs two steps an iteration (the second one
    skipped past the split's end), so that each step's operands are loaded into registers the step before
    them has released (no copies between a prefetch and its use); ``ASM``: PTX loads (see ``_ld``). ``TAIL``: the
    row ends in a step of only ``TAIL`` super-blocks after the whole ones, run by the last K split (its operands
    are loaded with the first step's). ``MR`` (1-4) rows of x, ``stride_xw`` words apart (read only for ``MR >
    1``)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    STRIDE_H: tl.constexpr = N_SB * 105
    pid_n = tl.program_id(0)
    rows, row_ok = row_tile(N, BN, EVEN_N)
    if EVEN_N:  # int64 row offsets from the tile's first row: constants, folded into the loads' addresses
        w_ptr += (pid_n * BN).to(tl.int64) * STRIDE_H
        r_off = tl.arange(0, BN).to(tl.int64) * STRIDE_H
    else:  # int32: every offset is below raw_bytes < 2**31 (supports)
        r_off = rows * STRIDE_H
    a_off, c_off, s_off, d_off, x_off = tile_offsets(r_off, SBS, UPT)
    j_lo = tl.program_id(1) * blocks_per_split
    j_hi = tl.minimum(N_SB, j_lo + blocks_per_split)
    acc0, acc1, acc2, acc3 = rows_loop(w_ptr, a_off, c_off, s_off, d_off, x_ptr, x_off, stride_xw, j_lo, j_hi,
                                       last_split(), magic, nib, N_SB, BN, SBS, UPT, TAIL, MR, ASM)
    store_rows(out_ptr, part_ptr, cnt_ptr + pid_n, acc0, acc1, acc2, acc3, pid_n * BN + tl.arange(0, BN).to(tl.int64),
               row_ok, N, MR, SPLIT_K, FUSE, 0)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import MAGIC, StreamedMvLaunch, step_with_tail, x_row_stride_of  # noqa: E402

# From the H100 sweep (bench/gguf_mv_sweep.py --types Q6_K, bench/results/2026-11-25-h100-session17/run2): UPT 2
# with 4 rows a thread (K 4096 x N 14336 25.5 us, 63% of copy; 14336 x 4096 24.3 us, 66%), against 29.1 / 31.4
# with UPT 4 (each load instruction on a quarter of the sectors it touches) and 25.8 / 31.3 with 2 rows; the
# word-level kernel took 408 / 370 us. The K split target hardly matters (1 or 2 programs per SM within 1%).
# Offline sm_90 SASS (Triton 3.6, K = 4096): UPT 2 with 4 rows a thread 5.88 loop instructions a code.
Q6K_ID = 14
Q6K_UPT = 2  # units (pairs of positions) per thread and half super-block: 1, 2 or 4
Q6K_MAX_SBS = 4  # super-blocks per loop step: the most up to this dividing the row, or this many + a partial one
Q6K_RT = 4  # rows per thread: the tile takes RT x (threads left after the slots' lanes) rows
Q6K_WARPS = 4
PROGRAMS_PER_SM = 2  # split K until about this many programs per SM
NIB = 0x0F0F0F0F  # the bit-select mask of the code words (a runtime argument: see kernels.words.bit_select)
# 2 to ROWS_MAX rows of x (a few tokens decoded at once) stream the weights once (``MR``), with ROWS_RT rows of
# weights a thread. H200 session 35 run 1 (bench/gguf_mv_sweep.py --types Q6_K --rows 1,2,3,4), us, K x N 4096 x
# 14336 / 14336 x 4096 / 4096 x 4096: one row 24.0 / 22.4 / 8.3; 2 rows 28.2 / 26.7 / 10.1, 3 rows 36.0 / 37.5 /
# 14.2, 4 rows 40.0 / 47.8 / 16.5 (1.2 / 1.5-1.7 / 1.7-2.1x one row: the loop is issue-bound, 8.4 / 11.0 SASS
# instructions a code for 2 / 4 rows against 5.9); the tiled decode kernel these calls took before: 104 / 88 / 32
# at every row count. ROWS_RT 2: 4 rows of 14336 x 4096 and 4096 x 4096 5% faster, every other case 6-60% slower.
# The K split target made no difference. From 5 rows: the tiled decode kernel (87-107 us).
ROWS_MAX = 4
ROWS_RT = 4


def tiling(k: int, n: int = 0, sms: int = 0, m: int = 1) -> tuple[int, int]:
    """``(super-blocks per loop step, super-blocks of a last partial step)`` for ``n`` rows of ``k`` columns on
    ``sms`` SMs and ``m`` rows of x: the most super-blocks, up to Q6K_MAX_SBS, that divide the row (1 always does),
    or steps of Q6K_MAX_SBS and a partial one where :func:`~mlx_native.ops.quant.affine_mv.step_with_tail` takes
    them. K = 11008 (43 super-blocks, a prime) took 1-super-block steps in 43 K splits of one step each (11008 x
    4096 37.9 us, 33% of copy; H100 session 26 run 2); now 10 steps of 4 and one of 3."""
    return step_with_tail(k // 256, Q6K_MAX_SBS, 1, lambda sbs: triton.cdiv(n, tile_rows(sbs, m=m)),
                          PROGRAMS_PER_SM * sms)


def tile_rows(sbs: int, upt: int = None, warps: int = None, rt: int = None, m: int = 1) -> int:
    """Rows per program for steps of ``sbs`` super-blocks and ``m`` rows of x: each of its ``2 sbs`` slots takes
    ``16 / UPT`` lanes, the remaining lanes and warps take rows, ``RT`` rows each (``ROWS_RT`` for several rows of
    x)."""
    upt, warps = upt or Q6K_UPT, warps or Q6K_WARPS
    rt = rt or (Q6K_RT if m == 1 else ROWS_RT)
    return rt * max(1, 32 * warps // (16 // upt * 2 * sbs))


def supports(ggml_type: int, x_dtype: torch.dtype, m: int, n: int, k: int, raw_bytes: int, sms: int,
             x_row_stride: int = 0) -> bool:
    """1 to ``ROWS_MAX`` rows of bf16/fp16 x (an even row stride ``x_row_stride``: x is read in words of two values)
    against Q6_K rows (``MLX_NATIVE_GGUF_MV=0`` turns it off). ``n`` and ``sms`` are taken as by
    ``q4_mv.supports``: no size rule yet (the sweep may add one)."""
    return (env.settings.gguf_mv and ggml_type == Q6K_ID and 1 <= m <= ROWS_MAX and (m == 1 or x_row_stride % 2 == 0)
            and x_dtype in (torch.bfloat16, torch.float16) and n > 0 and k > 0 and k % 256 == 0 and raw_bytes < 2**31)


class Q6kMvLaunch(StreamedMvLaunch):
    """:func:`q6k_mv_kernel` for ``(x [m, k] bf16/fp16, raw [n * k / 256 * 210] uint8)`` -> ``[m, n]`` of
    ``out_dtype``; the raw rows are read as 16-bit halves (their scales as bytes), x as int32 words of two values:
    unit column stride, an even row stride ``x_row_stride`` (default ``k``; a plan-time constant, read only for
    ``m > 1``)."""

    def __init__(self, n: int, k: int, out_dtype: torch.dtype, device, m: int = 1, x_row_stride=None):
        stride_x = x_row_stride_of("q6k_mv", m, k, x_row_stride, ROWS_MAX, words=True)
        sms = device_info(device).sm_count
        sbs, tail = tiling(k, n, sms, m)
        bn = tile_rows(sbs, m=m)
        tiles = triton.cdiv(n, bn)
        super().__init__(q6k_mv_kernel, n, tiles, k // 256 // sbs, sbs, PROGRAMS_PER_SM * sms, (n, stride_x // 2),
                         dict(N_SB=k // 256, BN=bn, SBS=sbs, UPT=Q6K_UPT, EVEN_N=n % bn == 0,
                              ASM=not env.settings.triton_interpret, TAIL=tail, MR=m), out_dtype, device,
                         tail_ints=(MAGIC, NIB), num_warps=Q6K_WARPS, trigger=True, m=m)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(word_aligned(x), raw.view(torch.int16))
