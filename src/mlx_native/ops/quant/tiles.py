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

MAGIC = 0x4B000000  # fp32 bits of 2**23
MAGIC_F = 8388608.0  # 2**23


@triton.jit
def codes_to_f32(codes):
    """Integer codes in [0, 2**23) (int32) -> float32, exactly."""
    return (codes | MAGIC).to(tl.float32, bitcast=True) - MAGIC_F


@triton.jit
def affine_tile(w_ptr, s_ptr, b_ptr, rows, row_ok, c0, c_end, stride_wr, stride_sr,
                BITS: tl.constexpr, GS: tl.constexpr, NC: tl.constexpr):
    """fp32 ``[R, NC]``: ``q * scale + bias`` of ``W[rows, c0:c0 + NC]`` (MLX packing)."""
    G: tl.constexpr = NC // GS
    g = tl.arange(0, G)
    grp_ok = row_ok[:, None] & ((c0 + g * GS) < c_end)[None, :]  # [R, G]
    row64 = rows.to(tl.int64)
    sidx = row64[:, None] * stride_sr + (c0 // GS + g)[None, :]
    s = tl.load(s_ptr + sidx, mask=grp_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + sidx, mask=grp_ok, other=0.0).to(tl.float32)
    if 32 % BITS == 0:
        PER: tl.constexpr = 32 // BITS  # codes per word
        WPG: tl.constexpr = GS // PER  # words per group
        wi = tl.arange(0, WPG)
        widx = row64[:, None, None] * stride_wr + ((c0 // PER) + g[None, :, None] * WPG + wi[None, None, :])
        words = tl.load(w_ptr + widx, mask=grp_ok[:, :, None], other=0)  # int32 [R, G, WPG]
        shifts = tl.arange(0, PER) * BITS
        codes = (words[:, :, :, None] >> shifts[None, None, None, :]) & ((1 << BITS) - 1)
        v = codes_to_f32(codes) * s[:, :, None, None] + b[:, :, None, None]  # [R, G, WPG, PER]
        return tl.reshape(v, [v.shape[0], NC])
    else:
        # 3, 5, 6 bits: a code may straddle two words of the little-endian bit stream
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
