"""Triton device functions: GGML blocks -> fp32 values in registers.

* :func:`ggml_elem`: any element of any supported type, from its row's byte
  offset and its index in the row (gathered loads; used by dequantize,
  embedding, and the matmul of the types without a structured tile).
* :func:`ggml_tile`: a ``[BN, BK]`` tile of rows in natural column order, with
  structured loads (whole blocks: contiguous code bytes, one scale load per
  block or sub-block) for Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K; other types fall
  back to :func:`ggml_elem`. It is :func:`ggml_load` followed by :func:`ggml_decode`, which the
  matmul kernels call apart so that the loads of the next step overlap the decode of this one.

The arithmetic is llama.cpp's: every product of a block scale and a code is
exact in fp32, so ``ggml_elem`` is bit-identical to ``gguf.quants`` (fusing a
multiply-add cannot change an exact product). Layouts: see :mod:`.ref`.
Type ids are ggml's (``formats.py``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..quant.tiles import codes_to_f32

F32: tl.constexpr = tl.constexpr(0)
F16: tl.constexpr = tl.constexpr(1)
Q4_0: tl.constexpr = tl.constexpr(2)
Q4_1: tl.constexpr = tl.constexpr(3)
Q5_0: tl.constexpr = tl.constexpr(6)
Q5_1: tl.constexpr = tl.constexpr(7)
Q8_0: tl.constexpr = tl.constexpr(8)
Q2_K: tl.constexpr = tl.constexpr(10)
Q3_K: tl.constexpr = tl.constexpr(11)
Q4_K: tl.constexpr = tl.constexpr(12)
Q5_K: tl.constexpr = tl.constexpr(13)
Q6_K: tl.constexpr = tl.constexpr(14)
BF16: tl.constexpr = tl.constexpr(30)

STRUCTURED = (2, 3, 8, 12, 13, 14)  # types with a structured tile


@triton.jit
def _u8(raw_ptr, off, mask):
    return tl.load(raw_ptr + off, mask=mask, other=0).to(tl.int32)


@triton.jit
def _f16(raw_ptr, off, mask):
    """fp16 at byte offset ``off`` (2-aligned) as fp32."""
    p = (raw_ptr + off).to(tl.pointer_type(tl.uint16))
    return tl.load(p, mask=mask, other=0).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _i8_to_f32(b):
    """Bytes (int32 0..255) read as int8 -> fp32 exactly."""
    return ((b ^ 0x80) | 0x4B000000).to(tl.float32, bitcast=True) - 8388736.0


@triton.jit
def _k_scale_min(raw_ptr, sb, j, mask):
    """Q4_K/Q5_K six-bit scale and min of sub-block ``j`` (0..7); ``sb`` = byte offset of the 12 bytes."""
    low = j < 4
    bj = _u8(raw_ptr, sb + j, mask)
    bj4 = _u8(raw_ptr, sb + j + 4, mask)
    bjm4 = _u8(raw_ptr, sb + j - 4, mask & (j >= 4))
    sc = tl.where(low, bj & 63, (bj4 & 15) | ((bjm4 >> 6) << 4))
    mn = tl.where(low, bj4 & 63, (bj4 >> 4) | ((bj >> 6) << 4))
    return sc, mn


@triton.jit
def ggml_elem(raw_ptr, row_off, e, mask, FMT: tl.constexpr):
    """fp32 value of element ``e`` of the row at byte ``row_off`` (broadcast shapes)."""
    if FMT == F32:
        return tl.load((raw_ptr + row_off + e.to(tl.int64) * 4).to(tl.pointer_type(tl.float32)), mask=mask, other=0.0)
    elif FMT == F16:
        return _f16(raw_ptr, row_off + e.to(tl.int64) * 2, mask)
    elif FMT == BF16:
        p = (raw_ptr + row_off + e.to(tl.int64) * 2).to(tl.pointer_type(tl.uint16))
        bits = tl.load(p, mask=mask, other=0).to(tl.uint32) << 16
        return bits.to(tl.float32, bitcast=True)
    elif FMT == Q4_0:
        i = e % 32
        bb = row_off + (e // 32).to(tl.int64) * 18
        d = _f16(raw_ptr, bb, mask)
        q = (_u8(raw_ptr, bb + 2 + i % 16, mask) >> (4 * (i // 16))) & 15
        return d * (codes_to_f32(q) - 8.0)
    elif FMT == Q4_1:
        i = e % 32
        bb = row_off + (e // 32).to(tl.int64) * 20
        d = _f16(raw_ptr, bb, mask)
        m = _f16(raw_ptr, bb + 2, mask)
        q = (_u8(raw_ptr, bb + 4 + i % 16, mask) >> (4 * (i // 16))) & 15
        return d * codes_to_f32(q) + m
    elif FMT == Q5_0:
        i = e % 32
        bb = row_off + (e // 32).to(tl.int64) * 22
        d = _f16(raw_ptr, bb, mask)
        hb = (_u8(raw_ptr, bb + 2 + i // 8, mask) >> (i % 8)) & 1
        q = ((_u8(raw_ptr, bb + 6 + i % 16, mask) >> (4 * (i // 16))) & 15) | (hb << 4)
        return d * (codes_to_f32(q) - 16.0)
    elif FMT == Q5_1:
        i = e % 32
        bb = row_off + (e // 32).to(tl.int64) * 24
        d = _f16(raw_ptr, bb, mask)
        m = _f16(raw_ptr, bb + 2, mask)
        hb = (_u8(raw_ptr, bb + 4 + i // 8, mask) >> (i % 8)) & 1
        q = ((_u8(raw_ptr, bb + 8 + i % 16, mask) >> (4 * (i // 16))) & 15) | (hb << 4)
        return d * codes_to_f32(q) + m
    elif FMT == Q8_0:
        i = e % 32
        bb = row_off + (e // 32).to(tl.int64) * 34
        d = _f16(raw_ptr, bb, mask)
        return _i8_to_f32(_u8(raw_ptr, bb + 2 + i, mask)) * d
    elif FMT == Q2_K:
        i = e % 256
        bb = row_off + (e // 256).to(tl.int64) * 84
        h = i // 128
        s = (i % 128) // 32
        l = i % 32
        q = (_u8(raw_ptr, bb + 16 + 32 * h + l, mask) >> (2 * s)) & 3
        sc = _u8(raw_ptr, bb + i // 16, mask)
        d = _f16(raw_ptr, bb + 80, mask)
        dmin = _f16(raw_ptr, bb + 82, mask)
        return (d * codes_to_f32(sc & 15)) * codes_to_f32(q) - dmin * codes_to_f32(sc >> 4)
    elif FMT == Q3_K:
        i = e % 256
        bb = row_off + (e // 256).to(tl.int64) * 110
        h = i // 128
        s = (i % 128) // 32
        l = i % 32
        low = (_u8(raw_ptr, bb + 32 + 32 * h + l, mask) >> (2 * s)) & 3
        hbit = (_u8(raw_ptr, bb + l, mask) >> (i // 32)) & 1
        si = i // 16
        sc_lo = (_u8(raw_ptr, bb + 96 + si % 8, mask) >> (4 * (si // 8))) & 15
        sc_hi = (_u8(raw_ptr, bb + 104 + si % 4, mask) >> (2 * (si // 4))) & 3
        sc = codes_to_f32(sc_lo | (sc_hi << 4)) - 32.0
        d = _f16(raw_ptr, bb + 108, mask)
        q = codes_to_f32(low) - 4.0 * codes_to_f32(1 - hbit)
        return (d * sc) * q
    elif FMT == Q4_K or FMT == Q5_K:
        i = e % 256
        TS: tl.constexpr = 144 if FMT == Q4_K else 176
        QS: tl.constexpr = 16 if FMT == Q4_K else 48
        bb = row_off + (e // 256).to(tl.int64) * TS
        j = i // 32
        c = i // 64
        l = i % 32
        q = (_u8(raw_ptr, bb + QS + 32 * c + l, mask) >> (4 * (j % 2))) & 15
        if FMT == Q5_K:
            q = q | (((_u8(raw_ptr, bb + 16 + l, mask) >> j) & 1) << 4)
        sc, mn = _k_scale_min(raw_ptr, bb + 4, j, mask)
        d = _f16(raw_ptr, bb, mask)
        dmin = _f16(raw_ptr, bb + 2, mask)
        return (d * codes_to_f32(sc)) * codes_to_f32(q) - dmin * codes_to_f32(mn)
    else:  # Q6_K
        i = e % 256
        bb = row_off + (e // 256).to(tl.int64) * 210
        h = i // 128
        r = i % 128
        low = (_u8(raw_ptr, bb + 64 * h + r % 64, mask) >> (4 * (r // 64))) & 15
        high = (_u8(raw_ptr, bb + 128 + 32 * h + r % 32, mask) >> (2 * (r // 32))) & 3
        sc = _i8_to_f32(_u8(raw_ptr, bb + 192 + i // 16, mask))
        d = _f16(raw_ptr, bb + 208, mask)
        return (d * sc) * (codes_to_f32(low | (high << 4)) - 32.0)


def planes_of(fmt: int) -> tuple[int, int]:
    """(planes, run) of :func:`ggml_tile` for a type: a tile comes as ``planes`` tensors; with two,
    column ``c`` of plane ``h`` holds K index ``(c // run) * 2 * run + h * run + c % run``."""
    if fmt in (2, 3):  # Q4_0, Q4_1: low / high nibbles of 16 bytes
        return 2, 16
    if fmt in (12, 13):  # Q4_K, Q5_K: low / high nibbles of 32-byte chunks
        return 2, 32
    if fmt == 14:  # Q6_K: low / high nibbles of the 64 low-bit bytes of a half super-block
        return 2, 64
    return 1, 0


def tile_unit(fmt: int) -> int:
    """Columns of K a structured tile step of type ``fmt`` must be a multiple of (the types that gather: a block)."""
    return {12: 64, 13: 64, 14: 128}.get(fmt, 32)


@triton.jit
def ggml_tile(raw_ptr, row_off, row_ok, k0, k_end, FMT: tl.constexpr, BK: tl.constexpr):
    """Columns ``k0 .. k0 + BK`` of the rows at byte offsets ``row_off [BN]``, as fp32 planes.

    Returns ``(p0, p1)``: for the two-plane types (:func:`planes_of`) each ``[BN, BK / 2]``
    (the low and the high nibbles of whole blocks, each plane in K order within its runs);
    else ``p0 [BN, BK]`` in K order and ``p1 = p0``. ``k0`` is a multiple of the type's
    unit (block, or 64-value chunk of a K-quant super-block); units at or past ``k_end``
    read nothing and give 0.
    """
    t0, t1, t2, t3, t4, t5, t6, t7, t8, t9 = ggml_load(raw_ptr, row_off, row_ok, k0, k_end, FMT, BK)
    return ggml_decode(t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, raw_ptr, row_off, row_ok, k0, k_end, FMT, BK)


@triton.jit
def _ld16(raw_ptr, off, mask):
    return tl.load((raw_ptr + off).to(tl.pointer_type(tl.uint16)), mask=mask, other=0)


@triton.jit
def _h2f(bits):
    return bits.to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def ggml_load(raw_ptr, row_off, row_ok, k0, k_end, FMT: tl.constexpr, BK: tl.constexpr):
    """The loads of :func:`ggml_tile` for the structured types, as 10 raw tensors (unused slots
    repeat one); other types load nothing here (their decode gathers)."""
    if FMT == Q4_0 or FMT == Q4_1 or FMT == Q8_0:
        NU: tl.constexpr = BK // 32
        TS: tl.constexpr = 18 if FMT == Q4_0 else (20 if FMT == Q4_1 else 34)
        QS: tl.constexpr = 2 if FMT == Q4_0 else (4 if FMT == Q4_1 else 2)
        NB: tl.constexpr = 32 if FMT == Q8_0 else 16
        u = k0 // 32 + tl.arange(0, NU)
        uok = row_ok[:, None] & (u * 32 < k_end)[None, :]  # [BN, NU]
        bb = row_off[:, None] + u[None, :].to(tl.int64) * TS
        d = _ld16(raw_ptr, bb, uok)
        j = tl.arange(0, NB)
        b = tl.load(raw_ptr + bb[:, :, None] + QS + j[None, None, :], mask=uok[:, :, None], other=0)
        m = d
        if FMT == Q4_1:
            m = _ld16(raw_ptr, bb + 2, uok)
        return b, d, m, d, d, d, d, d, d, b
    elif FMT == Q4_K or FMT == Q5_K:
        TS: tl.constexpr = 144 if FMT == Q4_K else 176
        QS: tl.constexpr = 16 if FMT == Q4_K else 48
        NC: tl.constexpr = BK // 64
        c = k0 // 64 + tl.arange(0, NC)
        cok = row_ok[:, None] & (c * 64 < k_end)[None, :]  # [BN, NC]
        bb = row_off[:, None] + (c // 4)[None, :].to(tl.int64) * TS
        cc = (c % 4)[None, :]
        d = _ld16(raw_ptr, bb, cok)
        dmin = _ld16(raw_ptr, bb + 2, cok)
        sb = bb + 4
        j0 = 2 * cc
        j1 = 2 * cc + 1
        a0 = tl.load(raw_ptr + sb + j0, mask=cok, other=0)
        a4 = tl.load(raw_ptr + sb + j0 + 4, mask=cok, other=0)
        am = tl.load(raw_ptr + sb + j0 - 4, mask=cok & (j0 >= 4), other=0)
        b0 = tl.load(raw_ptr + sb + j1, mask=cok, other=0)
        b4 = tl.load(raw_ptr + sb + j1 + 4, mask=cok, other=0)
        bm = tl.load(raw_ptr + sb + j1 - 4, mask=cok & (j1 >= 4), other=0)
        l = tl.arange(0, 32)
        qb = tl.load(raw_ptr + bb[:, :, None] + QS + 32 * cc[:, :, None] + l[None, None, :], mask=cok[:, :, None],
                     other=0)
        qh = qb
        if FMT == Q5_K:
            qh = tl.load(raw_ptr + bb[:, :, None] + 16 + l[None, None, :], mask=cok[:, :, None], other=0)
        return qb, d, dmin, a0, a4, am, b0, b4, bm, qh
    elif FMT == Q6_K:
        # half h of a 210-byte super-block: low bits ql[64 h + l] (values 128 h + l, low nibble, and + 64, high),
        # high bits qh[32 h + l % 32] (2 bits, shift 2 (l // 32), + 4 for the high nibble's value), int8 scales
        # 192 + 8 h .. + 8 (16 values each), fp16 d at 208. 16-bit loads: the blocks are 2-byte aligned (ql / qh as
        # pairs of bytes, half the load instructions of byte loads).
        NH: tl.constexpr = BK // 128
        hh = k0 // 128 + tl.arange(0, NH)
        hok = row_ok[:, None] & (hh * 128 < k_end)[None, :]  # [BN, NH]
        bb = row_off[:, None] + (hh // 2)[None, :].to(tl.int64) * 210
        h = (hh % 2)[None, :]
        m3 = hok[:, :, None]
        base = bb[:, :, None] + 64 * h[:, :, None]
        ql = _ld16(raw_ptr, base + 2 * tl.arange(0, 32)[None, None, :], m3)  # [BN, NH, 32] byte pairs
        qh = _ld16(raw_ptr, base + 128 - 32 * h[:, :, None] + 2 * tl.arange(0, 16)[None, None, :], m3)
        sc = _ld16(raw_ptr, base + 192 - 56 * h[:, :, None] + 2 * tl.arange(0, 4)[None, None, :], m3)
        d = _ld16(raw_ptr, bb + 208, hok)
        return ql, qh, sc, d, ql, ql, ql, ql, ql, ql
    else:
        z = row_off
        return z, z, z, z, z, z, z, z, z, z


@triton.jit
def _bytes_of(v):
    """``[A, B, W]`` uint16 byte pairs -> ``[A, B, 2 W]`` int32 bytes in memory order."""
    v = v.to(tl.int32)
    b = tl.join(v & 255, (v >> 8) & 255)
    return tl.reshape(b, (v.shape[0], v.shape[1], 2 * v.shape[2]))


@triton.jit
def _k_sm(bj, bj4, bjm4, j):
    bj = bj.to(tl.int32)
    bj4 = bj4.to(tl.int32)
    bjm4 = bjm4.to(tl.int32)
    low = j < 4
    sc = tl.where(low, bj & 63, (bj4 & 15) | ((bjm4 >> 6) << 4))
    mn = tl.where(low, bj4 & 63, (bj4 >> 4) | ((bj >> 6) << 4))
    return sc, mn


@triton.jit
def ggml_decode(t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, raw_ptr, row_off, row_ok, k0, k_end,
                FMT: tl.constexpr, BK: tl.constexpr):
    """Planes ``(p0, p1)`` of :func:`ggml_tile` from :func:`ggml_load`'s tensors."""
    if FMT == Q4_0 or FMT == Q4_1 or FMT == Q8_0:
        b = t0.to(tl.int32)
        d = _h2f(t1)[:, :, None]
        if FMT == Q8_0:
            v = _i8_to_f32(b) * d
            v = tl.reshape(v, [v.shape[0], BK])
            return v, v
        else:
            lo = codes_to_f32(b & 15)
            hi = codes_to_f32(b >> 4)
            if FMT == Q4_0:
                lo = (lo - 8.0) * d
                hi = (hi - 8.0) * d
            else:
                m = _h2f(t2)[:, :, None]
                lo = lo * d + m
                hi = hi * d + m
            return tl.reshape(lo, [lo.shape[0], BK // 2]), tl.reshape(hi, [hi.shape[0], BK // 2])
    elif FMT == Q4_K or FMT == Q5_K:
        NC: tl.constexpr = BK // 64
        cc = ((k0 // 64 + tl.arange(0, NC)) % 4)[None, :]
        d = _h2f(t1)
        dmin = _h2f(t2)
        sc0, mn0 = _k_sm(t3, t4, t5, 2 * cc)
        sc1, mn1 = _k_sm(t6, t7, t8, 2 * cc + 1)
        qb = t0.to(tl.int32)
        lo = qb & 15
        hi = qb >> 4
        if FMT == Q5_K:
            qh = t9.to(tl.int32)
            lo = lo | (((qh >> (2 * cc)[:, :, None]) & 1) << 4)
            hi = hi | (((qh >> (2 * cc + 1)[:, :, None]) & 1) << 4)
        lo = codes_to_f32(lo) * (d * codes_to_f32(sc0))[:, :, None] - (dmin * codes_to_f32(mn0))[:, :, None]
        hi = codes_to_f32(hi) * (d * codes_to_f32(sc1))[:, :, None] - (dmin * codes_to_f32(mn1))[:, :, None]
        return tl.reshape(lo, [lo.shape[0], BK // 2]), tl.reshape(hi, [hi.shape[0], BK // 2])
    elif FMT == Q6_K:
        BN: tl.constexpr = t0.shape[0]
        NH: tl.constexpr = t0.shape[1]
        ql = _bytes_of(t0)  # [BN, NH, 64]
        qh = _bytes_of(t1)  # [BN, NH, 32]
        qh = tl.reshape(tl.permute(tl.join(qh, qh), (0, 1, 3, 2)), (BN, NH, 64))  # byte l % 32
        l = tl.arange(0, 64)[None, None, :]
        lo = (ql & 15) | (((qh >> (2 * (l // 32))) & 3) << 4)
        hi = (ql >> 4) | (((qh >> (4 + 2 * (l // 32))) & 3) << 4)
        dsc = _h2f(t3)[:, :, None] * _i8_to_f32(_bytes_of(t2))  # [BN, NH, 8]: d times the scale of 16 values
        dsc_lo, dsc_hi = tl.split(tl.permute(tl.reshape(dsc, (BN, NH, 2, 4)), (0, 1, 3, 2)))  # scales 0-3, 4-7
        dsc_lo = tl.reshape(tl.broadcast_to(dsc_lo[:, :, :, None], (BN, NH, 4, 16)), (BN, NH, 64))
        dsc_hi = tl.reshape(tl.broadcast_to(dsc_hi[:, :, :, None], (BN, NH, 4, 16)), (BN, NH, 64))
        lo = dsc_lo * (codes_to_f32(lo) - 32.0)
        hi = dsc_hi * (codes_to_f32(hi) - 32.0)
        return tl.reshape(lo, [BN, BK // 2]), tl.reshape(hi, [BN, BK // 2])
    else:
        e = k0 + tl.arange(0, BK)
        v = ggml_elem(raw_ptr, row_off[:, None], e[None, :], row_ok[:, None] & (e < k_end)[None, :], FMT)
        return v, v
