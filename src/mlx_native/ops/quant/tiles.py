"""Triton device functions: dequantize a tile of MLX-affine packed weights into registers.

The packed matrix ``W [rows, cols]`` (codes packed along ``cols``) has row
``r``'s words at ``w_ptr + r * stride_wr`` and its scales/biases at
``s_ptr + r * stride_sr`` (one per group of ``GS`` columns). A tile is
``rows x NC`` columns starting at ``c0`` (a multiple of ``GS``); groups at or
past ``c_end`` (and rows with ``row_ok`` False) read nothing and give 0.

Codes become floats with the "magic number" trick: ``code | 0x4B000000`` read
as fp32 is ``2**23 + code`` exactly, one integer op and one subtraction
instead of a slow int-to-float conversion.
"""

from __future__ import annotations

import triton
import triton.language as tl

MAGIC: tl.constexpr = tl.constexpr(0x4B000000)  # fp32 bits of 2**23
MAGIC_F: tl.constexpr = tl.constexpr(8388608.0)  # 2**23


@triton.jit
def codes_to_f32(codes):
    """Integer codes in [0, 2**23) (int32) -> float32, exactly."""
    return (codes | MAGIC).to(tl.float32, bitcast=True) - MAGIC_F


@triton.jit
def interleave2d(a, b):
    """``[R, C]`` x 2 -> ``[R, 2C]`` with ``a`` at even and ``b`` at odd columns (values stay in-thread)."""
    c = tl.join(a, b)
    return tl.reshape(c, [c.shape[0], 2 * c.shape[1]])


@triton.jit
def affine_tile(w_ptr, s_ptr, b_ptr, rows, row_ok, c0, c_end, stride_wr, stride_sr,
                BITS: tl.constexpr, GS: tl.constexpr, NC: tl.constexpr):
    """fp32 ``[R, NC]``: ``q * scale + bias`` of ``W[rows, c0:c0 + NC]`` (MLX packing), natural column order."""
    row64 = rows.to(tl.int64)
    if 32 % BITS == 0:
        # one word holds PER codes; each code plane is dequantized in the words' layout, then the
        # planes are interleaved back to column order (in registers: a thread keeps its words' codes)
        PER: tl.constexpr = 32 // BITS
        NW: tl.constexpr = NC // PER
        wi = tl.arange(0, NW)
        col = c0 + wi * PER
        ok = row_ok[:, None] & (col < c_end)[None, :]  # [R, NW]
        words = tl.load(w_ptr + row64[:, None] * stride_wr + (c0 // PER + wi)[None, :], mask=ok, other=0)
        sidx = row64[:, None] * stride_sr + (col // GS)[None, :]
        s = tl.load(s_ptr + sidx, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + sidx, mask=ok, other=0.0).to(tl.float32)
        MASK: tl.constexpr = (1 << BITS) - 1
        if BITS == 8:
            v0 = codes_to_f32(words & MASK) * s + b
            v1 = codes_to_f32((words >> 8) & MASK) * s + b
            v2 = codes_to_f32((words >> 16) & MASK) * s + b
            v3 = codes_to_f32((words >> 24) & MASK) * s + b
            return interleave2d(interleave2d(v0, v2), interleave2d(v1, v3))
        elif BITS == 4:
            v0 = codes_to_f32(words & MASK) * s + b
            v1 = codes_to_f32((words >> 4) & MASK) * s + b
            v2 = codes_to_f32((words >> 8) & MASK) * s + b
            v3 = codes_to_f32((words >> 12) & MASK) * s + b
            v4 = codes_to_f32((words >> 16) & MASK) * s + b
            v5 = codes_to_f32((words >> 20) & MASK) * s + b
            v6 = codes_to_f32((words >> 24) & MASK) * s + b
            v7 = codes_to_f32((words >> 28) & MASK) * s + b
            return interleave2d(interleave2d(interleave2d(v0, v4), interleave2d(v2, v6)),
                                interleave2d(interleave2d(v1, v5), interleave2d(v3, v7)))
        else:  # 2 bits
            v0 = codes_to_f32(words & MASK) * s + b
            v1 = codes_to_f32((words >> 2) & MASK) * s + b
            v2 = codes_to_f32((words >> 4) & MASK) * s + b
            v3 = codes_to_f32((words >> 6) & MASK) * s + b
            v4 = codes_to_f32((words >> 8) & MASK) * s + b
            v5 = codes_to_f32((words >> 10) & MASK) * s + b
            v6 = codes_to_f32((words >> 12) & MASK) * s + b
            v7 = codes_to_f32((words >> 14) & MASK) * s + b
            v8 = codes_to_f32((words >> 16) & MASK) * s + b
            v9 = codes_to_f32((words >> 18) & MASK) * s + b
            v10 = codes_to_f32((words >> 20) & MASK) * s + b
            v11 = codes_to_f32((words >> 22) & MASK) * s + b
            v12 = codes_to_f32((words >> 24) & MASK) * s + b
            v13 = codes_to_f32((words >> 26) & MASK) * s + b
            v14 = codes_to_f32((words >> 28) & MASK) * s + b
            v15 = codes_to_f32((words >> 30) & MASK) * s + b
            even = interleave2d(interleave2d(interleave2d(v0, v8), interleave2d(v4, v12)),
                                interleave2d(interleave2d(v2, v10), interleave2d(v6, v14)))
            odd = interleave2d(interleave2d(interleave2d(v1, v9), interleave2d(v5, v13)),
                               interleave2d(interleave2d(v3, v11), interleave2d(v7, v15)))
            return interleave2d(even, odd)
    else:
        # 3, 5, 6 bits: a code may straddle two words of the little-endian bit stream
        G: tl.constexpr = NC // GS
        g = tl.arange(0, G)
        grp_ok = row_ok[:, None] & ((c0 + g * GS) < c_end)[None, :]  # [R, G]
        sidx = row64[:, None] * stride_sr + (c0 // GS + g)[None, :]
        s = tl.load(s_ptr + sidx, mask=grp_ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + sidx, mask=grp_ok, other=0.0).to(tl.float32)
        e = tl.arange(0, GS)
        pos = (c0 + g[:, None] * GS + e[None, :]) * BITS  # [G, GS] bit position in the row
        word = pos >> 5
        off = pos & 31
        straddle = (off + BITS) > 32
        base = row64[:, None, None] * stride_wr
        m3 = grp_ok[:, :, None]
        lo = tl.load(w_ptr + base + word[None, :, :], mask=m3, other=0).to(tl.uint32, bitcast=True)
        hi = tl.load(w_ptr + base + word[None, :, :] + 1, mask=m3 & straddle[None, :, :], other=0)
        hi = hi.to(tl.uint32, bitcast=True)
        offu = off.to(tl.uint32)
        val = (lo >> offu[None, :, :]) | tl.where(straddle[None, :, :], hi << ((32 - offu) & 31)[None, :, :], 0)
        codes = (val & ((1 << BITS) - 1)).to(tl.int32, bitcast=True)
        v = codes_to_f32(codes) * s[:, :, None] + b[:, :, None]  # [R, G, GS]
        return tl.reshape(v, [v.shape[0], NC])


# ----------------------------------------------------------------------------- split load / decode
# The matmul kernel issues the loads of step i + 1 before it decodes step i (registers hold one
# step in flight), so memory latency overlaps the dequantization and the dots.


@triton.jit
def affine_load(w_ptr, s_ptr, b_ptr, rows, row_ok, c0, c_end, stride_wr, stride_sr,
                BITS: tl.constexpr, GS: tl.constexpr, NC: tl.constexpr):
    """Loads of a 2/4/8-bit tile: ``(words, scales, biases)``, each ``[R, NC / PER]`` (one per word)."""
    PER: tl.constexpr = 32 // BITS
    NW: tl.constexpr = NC // PER
    row64 = rows.to(tl.int64)
    wi = tl.arange(0, NW)
    col = c0 + wi * PER
    ok = row_ok[:, None] & (col < c_end)[None, :]
    words = tl.load(w_ptr + row64[:, None] * stride_wr + (c0 // PER + wi)[None, :], mask=ok, other=0)
    sidx = row64[:, None] * stride_sr + (col // GS)[None, :]
    s = tl.load(s_ptr + sidx, mask=ok, other=0.0)
    b = tl.load(b_ptr + sidx, mask=ok, other=0.0)
    return words, s, b


@triton.jit
def _pl(words, p: tl.constexpr, s, b, BITS: tl.constexpr, SCALED: tl.constexpr):
    q = codes_to_f32((words >> (p * BITS)) & ((1 << BITS) - 1))
    if SCALED:
        return q * s + b
    else:
        return q


@triton.jit
def affine_codes(words, s, b, BITS: tl.constexpr, SCALED: tl.constexpr):
    """Codes of ``words [R, NW]`` (times ``s`` plus ``b`` per word when SCALED) as fp32
    ``[R, NW * PER]`` in column order: code planes interleaved back in registers."""
    if BITS == 8:
        return interleave2d(interleave2d(_pl(words, 0, s, b, BITS, SCALED), _pl(words, 2, s, b, BITS, SCALED)),
                            interleave2d(_pl(words, 1, s, b, BITS, SCALED), _pl(words, 3, s, b, BITS, SCALED)))
    elif BITS == 4:
        return interleave2d(
            interleave2d(interleave2d(_pl(words, 0, s, b, BITS, SCALED), _pl(words, 4, s, b, BITS, SCALED)),
                         interleave2d(_pl(words, 2, s, b, BITS, SCALED), _pl(words, 6, s, b, BITS, SCALED))),
            interleave2d(interleave2d(_pl(words, 1, s, b, BITS, SCALED), _pl(words, 5, s, b, BITS, SCALED)),
                         interleave2d(_pl(words, 3, s, b, BITS, SCALED), _pl(words, 7, s, b, BITS, SCALED))))
    else:
        return interleave2d(
            interleave2d(
                interleave2d(interleave2d(_pl(words, 0, s, b, BITS, SCALED), _pl(words, 8, s, b, BITS, SCALED)),
                             interleave2d(_pl(words, 4, s, b, BITS, SCALED), _pl(words, 12, s, b, BITS, SCALED))),
                interleave2d(interleave2d(_pl(words, 2, s, b, BITS, SCALED), _pl(words, 10, s, b, BITS, SCALED)),
                             interleave2d(_pl(words, 6, s, b, BITS, SCALED), _pl(words, 14, s, b, BITS, SCALED)))),
            interleave2d(
                interleave2d(interleave2d(_pl(words, 1, s, b, BITS, SCALED), _pl(words, 9, s, b, BITS, SCALED)),
                             interleave2d(_pl(words, 5, s, b, BITS, SCALED), _pl(words, 13, s, b, BITS, SCALED))),
                interleave2d(interleave2d(_pl(words, 3, s, b, BITS, SCALED), _pl(words, 11, s, b, BITS, SCALED)),
                             interleave2d(_pl(words, 7, s, b, BITS, SCALED), _pl(words, 15, s, b, BITS, SCALED)))))


@triton.jit
def affine_decode(words, s, b, BITS: tl.constexpr):
    """``q * scale + bias`` as fp32 ``[R, NW * PER]`` from :func:`affine_load`'s tensors."""
    return affine_codes(words, s.to(tl.float32), b.to(tl.float32), BITS, True)


@triton.jit
def affine_gemv_compute(words, s, b, x, acc, BITS: tl.constexpr):
    """Mat-vec step for 2/4/8-bit codes from :func:`affine_load`: ``acc [R, NW] += s * (q . x) + b * sum(x)``
    per word.

    The codes of a word and the matching ``x`` values stay in one thread, so ``q . x``
    is an in-thread multiply-add chain: one FMA per code plus two per word, instead of
    a dequantizing FMA and an accumulating FMA per code.
    """
    PER: tl.constexpr = 32 // BITS
    NW: tl.constexpr = words.shape[1]
    q = affine_codes(words, s, b, BITS, False)
    qx = tl.sum(tl.reshape(q * x[None, :], [q.shape[0], NW, PER]), axis=2)
    xs = tl.sum(tl.reshape(x, [NW, PER]), axis=1)
    return acc + s.to(tl.float32) * qx + b.to(tl.float32) * xs[None, :]
