"""Pure-PyTorch dequantization of GGML blocks (the CPU path and the test oracle's twin).

Each function maps ``blocks [n, block_bytes]`` uint8 to ``[n, block_elems]``
float32 with the arithmetic of llama.cpp's reference dequantizers (every
product of a block scale and a code is exact in fp32, so the results are
bit-identical to ``gguf.quants.dequantize``). Layouts, per block:

* Q4_0 (32 values, 18 B): fp16 d | 16 B codes: byte j holds value j (low
  nibble) and value j + 16 (high nibble); ``x = d * (q - 8)``.
* Q4_1 (20 B): fp16 d | fp16 m | 16 B codes as Q4_0; ``x = d * q + m``.
* Q5_0 (22 B): fp16 d | u32 high bits (bit j -> value j) | 16 B low nibbles; ``x = d * (q - 16)``.
* Q5_1 (24 B): fp16 d | fp16 m | u32 high bits | 16 B low nibbles; ``x = d * q + m``.
* Q8_0 (34 B): fp16 d | 32 int8; ``x = d * q``.
* Q2_K (256 values, 84 B): 16 B scales (low nibble: scale, high: min of each 16 values)
  | 64 B 2-bit codes | fp16 d | fp16 dmin; ``x = d * sc * q - dmin * m``.
* Q3_K (110 B): 32 B high-bit mask | 64 B 2-bit low codes | 12 B 6-bit scales | fp16 d;
  ``x = d * (sc - 32) * (q - 4 * (1 - hbit))``.
* Q4_K (144 B): fp16 d | fp16 dmin | 12 B of 6-bit scales and mins (8 sub-blocks of 32)
  | 128 B nibbles; ``x = d * sc * q - dmin * m``.
* Q5_K (176 B): as Q4_K plus 32 B of fifth bits before the nibbles.
* Q6_K (210 B): 128 B low nibbles | 64 B high 2-bit pairs | 16 int8 scales | fp16 d;
  ``x = d * sc * (q - 32)``.

Code positions inside the K-quant super-blocks are spelled out in each function.
"""

from __future__ import annotations

import torch

from .formats import BY_ID, GGMLType

QK_K = 256


def _f16(b: torch.Tensor, off: int) -> torch.Tensor:
    """fp16 field at byte ``off`` of each block, as float32 ``[n, 1]``."""
    return b[:, off:off + 2].contiguous().view(torch.float16).to(torch.float32)


def _nibbles_32(qs: torch.Tensor) -> torch.Tensor:
    """16 bytes per block -> 32 codes: the low nibbles are values 0-15, the high ones 16-31."""
    return torch.cat([qs & 0x0F, qs >> 4], dim=1)


def q4_0(b: torch.Tensor) -> torch.Tensor:
    d = _f16(b, 0)
    q = _nibbles_32(b[:, 2:18]).to(torch.float32) - 8.0
    return d * q


def q4_1(b: torch.Tensor) -> torch.Tensor:
    d, m = _f16(b, 0), _f16(b, 2)
    q = _nibbles_32(b[:, 4:20]).to(torch.float32)
    return d * q + m


def _high_bits_32(qh4: torch.Tensor) -> torch.Tensor:
    """4 bytes (a little-endian u32) -> 32 bits, bit j for value j."""
    j = torch.arange(32, device=qh4.device)
    return (qh4[:, j // 8] >> (j % 8).to(torch.uint8)) & 1


def q5_0(b: torch.Tensor) -> torch.Tensor:
    d = _f16(b, 0)
    q = _nibbles_32(b[:, 6:22]) | (_high_bits_32(b[:, 2:6]) << 4)
    return d * (q.to(torch.float32) - 16.0)


def q5_1(b: torch.Tensor) -> torch.Tensor:
    d, m = _f16(b, 0), _f16(b, 2)
    q = _nibbles_32(b[:, 8:24]) | (_high_bits_32(b[:, 4:8]) << 4)
    return d * q.to(torch.float32) + m


def q8_0(b: torch.Tensor) -> torch.Tensor:
    d = _f16(b, 0)
    return b[:, 2:34].contiguous().view(torch.int8).to(torch.float32) * d


def _value_index():
    """Positions of the 256 values of a super-block: half (128 values each), then
    in-half index i -> (i // 32, i % 32)."""
    e = torch.arange(QK_K)
    return e // 128, (e % 128) // 32, e % 32


def q2_k(b: torch.Tensor) -> torch.Tensor:
    # value e: half h = e // 128, shift s = (e % 128) // 32, l = e % 32 -> byte 16 + 32h + l, bits 2s
    sc = b[:, 0:16]
    qs = b[:, 16:80]
    d, dmin = _f16(b, 80), _f16(b, 82)
    h, s, l = (t.to(b.device) for t in _value_index())
    q = (qs[:, 32 * h + l] >> (2 * s).to(torch.uint8)) & 3
    sub = torch.arange(QK_K, device=b.device) // 16
    dl = d * (sc[:, sub] & 0x0F).to(torch.float32)
    ml = dmin * (sc[:, sub] >> 4).to(torch.float32)
    return dl * q.to(torch.float32) - ml


def _q3_k_scales(sc12: torch.Tensor) -> torch.Tensor:
    """12 bytes -> 16 signed 6-bit scales (minus 32): low 4 bits of scale i are nibble
    i // 8 of byte i % 8; its top 2 bits are bits 2 * (i // 4) of byte 8 + i % 4."""
    i = torch.arange(16, device=sc12.device)
    low = (sc12[:, i % 8] >> (4 * (i // 8)).to(torch.uint8)) & 0x0F
    high = (sc12[:, 8 + i % 4] >> (2 * (i // 4)).to(torch.uint8)) & 0x03
    return (low | (high << 4)).to(torch.float32) - 32.0


def q3_k(b: torch.Tensor) -> torch.Tensor:
    # value e: low 2 bits as Q2_K (byte 32 + 32h + l, bits 2s); high bit: byte l of hmask, bit e // 32;
    # a clear high bit subtracts 4.
    hmask = b[:, 0:32]
    qs = b[:, 32:96]
    scales = _q3_k_scales(b[:, 96:108])
    d = _f16(b, 108)
    h, s, l = (t.to(b.device) for t in _value_index())
    e = torch.arange(QK_K, device=b.device)
    low = (qs[:, 32 * h + l] >> (2 * s).to(torch.uint8)) & 3
    hbit = (hmask[:, l] >> (e // 32).to(torch.uint8)) & 1
    q = low.to(torch.float32) - 4.0 * (1 - hbit).to(torch.float32)
    dl = d * scales[:, e // 16]
    return dl * q


def k_scale_min(sc12: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K/Q5_K: 12 bytes -> 8 six-bit scales and 8 six-bit mins (uint8 ``[n, 8]``).

    Sub-block j < 4: scale = byte j & 63, min = byte j + 4 & 63. j >= 4: scale =
    (byte j + 4 & 15) | (byte j - 4 >> 6) << 4, min = (byte j + 4 >> 4) | (byte j >> 6) << 4.
    """
    lo = sc12[:, 0:4]
    mid = sc12[:, 4:8]
    hi = sc12[:, 8:12]
    sc = torch.cat([lo & 63, (hi & 0x0F) | ((lo >> 6) << 4)], dim=1)
    mn = torch.cat([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], dim=1)
    return sc, mn


def _k_nibbles(qs: torch.Tensor) -> torch.Tensor:
    """128 bytes -> 256 codes: chunk c (32 bytes) gives values 64c..64c+31 (low nibbles)
    and 64c+32..64c+63 (high nibbles)."""
    n = qs.shape[0]
    q = qs.reshape(n, 4, 1, 32) >> torch.tensor([0, 4], dtype=torch.uint8, device=qs.device).reshape(1, 1, 2, 1)
    return (q & 0x0F).reshape(n, QK_K)


def q4_k(b: torch.Tensor) -> torch.Tensor:
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = k_scale_min(b[:, 4:16])
    sub = torch.arange(QK_K, device=b.device) // 32
    q = _k_nibbles(b[:, 16:144]).to(torch.float32)
    return (d * sc.to(torch.float32))[:, sub] * q - (dmin * mn.to(torch.float32))[:, sub]


def q5_k(b: torch.Tensor) -> torch.Tensor:
    # fifth bit of value e: byte e % 32 of qh, bit e // 32
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = k_scale_min(b[:, 4:16])
    qh = b[:, 16:48]
    e = torch.arange(QK_K, device=b.device)
    hbit = (qh[:, e % 32] >> (e // 32).to(torch.uint8)) & 1
    q = (_k_nibbles(b[:, 48:176]) | (hbit << 4)).to(torch.float32)
    sub = e // 32
    return (d * sc.to(torch.float32))[:, sub] * q - (dmin * mn.to(torch.float32))[:, sub]


def q6_k(b: torch.Tensor) -> torch.Tensor:
    # value e: half h = e // 128, i = e % 128; low nibble: byte 64h + i % 64 of ql, nibble i // 64;
    # high 2 bits: byte 32h + i % 32 of qh, bits 2 * (i // 32); scale: int8 e // 16.
    ql = b[:, 0:128]
    qh = b[:, 128:192]
    scales = b[:, 192:208].contiguous().view(torch.int8).to(torch.float32)
    d = _f16(b, 208)
    e = torch.arange(QK_K, device=b.device)
    h, i = e // 128, e % 128
    low = (ql[:, 64 * h + i % 64] >> (4 * (i // 64)).to(torch.uint8)) & 0x0F
    high = (qh[:, 32 * h + i % 32] >> (2 * (i // 32)).to(torch.uint8)) & 0x03
    q = (low | (high << 4)).to(torch.float32) - 32.0
    return (d * scales)[:, e // 16] * q


_DEQUANT = {2: q4_0, 3: q4_1, 6: q5_0, 7: q5_1, 8: q8_0, 10: q2_k, 11: q3_k, 12: q4_k, 13: q5_k, 14: q6_k}


def dequantize(raw: torch.Tensor, t: GGMLType, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Raw bytes of a tensor of type ``t`` -> ``shape`` values in ``dtype`` (fp32 math)."""
    raw = raw.reshape(-1)
    if t.name == "F32":
        w = raw.view(torch.float32)
    elif t.name == "F16":
        w = raw.view(torch.float16)
    elif t.name == "BF16":
        w = raw.view(torch.bfloat16)
    else:
        w = _DEQUANT[t.id](raw.reshape(-1, t.block_bytes))
    return w.reshape(shape).to(dtype)


def rows(raw: torch.Tensor, t: GGMLType, k: int, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Rows ``ids`` (any shape) of a ``[rows, k]`` tensor -> ``ids.shape + [k]`` (embedding lookup)."""
    rb = k // t.block_elems * t.block_bytes
    picked = raw.reshape(-1, rb).index_select(0, ids.reshape(-1).long())
    return dequantize(picked, t, (*ids.shape, k), dtype)


def matmul(x: torch.Tensor, raw: torch.Tensor, t: GGMLType, n: int, k: int) -> torch.Tensor:
    """``x @ W.T`` for W = the ``[n, k]`` tensor in ``raw``; fp32 math (fp64 for fp64 x), x's dtype out."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    w = dequantize(raw, t, (n, k), compute)
    return torch.matmul(x.to(compute), w.T).to(x.dtype)


def check_known(tid: int) -> GGMLType:
    return BY_ID[tid]
