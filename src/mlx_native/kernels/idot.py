"""Integer dot products of 4-bit codes with int16-quantized activations.

A 4-bit mat-vec in fp32 spends three instructions per code (extract, convert, FMA). With x held as
int16 the hardware's ``dp2a`` (two int16 x two unsigned bytes, accumulated into an int32) does two
codes per instruction and needs no per-code conversion: a packed word ``w`` of 8 codes splits into
``w & 0x0F0F0F0F`` (codes 0 2 4 6 as bytes) and ``w & 0xF0F0F0F0`` (16 x codes 1 3 5 7), and four
``dp2a`` against the x pairs ``(0, 2) (4, 6) (1, 3) (5, 7)`` give the word's even and 16 x odd sums.

x is quantized per chunk of 32 values (4 words) with a power-of-two scale: ``x = scale * xi`` with
``|xi| <= 2**14``, so the rounding error of each value is at most ``2**-14`` of the chunk's largest
magnitude (bf16 itself rounds at ``2**-9``); a chunk's ``16 * even + odd16`` sum stays below ``2**27``
(int32, converted to fp32 with a relative error of at most ``2**-24``). Values below ``2**-112`` quantize with
the ``2**-126`` step of the smallest normal scale. Inf and NaN do not survive the integers; kernels carry them through the chunk's float sum
(the bias term of an affine group), so they still reach the output.

Under ``TRITON_INTERPRET=1`` (no inline assembly) ``dp2a`` is computed with integer ops, same result.
"""

import triton
import triton.language as tl

LOW_NIBBLES = tl.constexpr(0x0F0F0F0F)
HIGH_NIBBLES = tl.constexpr(-0x0F0F0F10)  # 0xF0F0F0F0 as an int32


@triton.jit
def dp2a(a, b, c, HI: tl.constexpr, ASM: tl.constexpr):
    """``c + a.lo16 * b.byte0 + a.hi16 * b.byte1`` (``HI``: bytes 2 and 3), int32 tensors; ``a`` holds two
    signed int16, ``b`` four unsigned bytes. ``ASM``: the PTX instruction (GPU), else integer ops."""
    if ASM:
        if HI:
            return tl.inline_asm_elementwise("dp2a.hi.s32.u32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c],
                                             dtype=tl.int32, is_pure=True, pack=1)
        else:
            return tl.inline_asm_elementwise("dp2a.lo.s32.u32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c],
                                             dtype=tl.int32, is_pure=True, pack=1)
    else:
        if HI:
            b = b >> 16
        return c + ((a << 16) >> 16) * (b & 0xFF) + (a >> 16) * ((b >> 8) & 0xFF)


@triton.jit
def word_idot(w, p02, p46, p13, p57, even, odd16, ASM: tl.constexpr):
    """The integer dot of the 8 codes of each int32 word ``w`` (code ``p`` at bits ``4p``) with x: returns
    ``(even + sum_{p even} q_p xi_p, odd16 + 16 * sum_{p odd} q_p xi_p)`` (the odd codes are used in place,
    ``w & 0xF0F0F0F0``, which saves a shift per word); ``pAB``: int16 pairs (x_A low, x_B high)
    broadcastable to ``w``."""
    return code_idot(w & LOW_NIBBLES, w & HIGH_NIBBLES, p02, p46, p13, p57, even, odd16, ASM)


@triton.jit
def code_idot(lo, hi, p02, p46, p13, p57, even, odd, ASM: tl.constexpr):
    """``(even + sum_b lo.byte_b xi_b, odd + sum_b hi.byte_b xi'_b)``: the integer dots of two words of four
    unsigned code bytes with x, ``lo`` against the x pairs ``p02`` (bytes 0, 1) and ``p46`` (bytes 2, 3), ``hi``
    against ``p13`` and ``p57`` (the pairs of :func:`word_idot`)."""
    even = dp2a(p02, lo, even, False, ASM)
    even = dp2a(p46, lo, even, True, ASM)
    odd = dp2a(p13, hi, odd, False, ASM)
    return even, dp2a(p57, hi, odd, True, ASM)


@triton.jit
def chunk_scale(amax):
    """``(inv, scale)``, powers of two with ``amax * inv < 2**14`` and ``scale = 1 / inv``, from the
    exponent of ``amax >= 0`` (clamped to the normal range of ``scale``)."""
    e = tl.minimum(tl.maximum((amax.to(tl.int32, bitcast=True) >> 23) & 0xFF, 14), 254)
    inv = ((267 - e) << 23).to(tl.float32, bitcast=True)  # 2**(13 - E), E = e - 127
    scale = ((e - 13) << 23).to(tl.float32, bitcast=True)
    return inv, scale


@triton.jit
def round_int(x, inv):
    """Bits whose low 16 are ``round(x * inv)`` as int16 (|x * inv| < 2**22): the magic-number rounding."""
    return (x * inv + 12582912.0).to(tl.int32, bitcast=True)


@triton.jit
def _pair(a, b):
    return (a & 0xFFFF) | (b << 16)


@triton.jit
def word_pairs(x, inv):
    """``[C, 8]`` fp32 values of one word per row -> its four int16 pairs ``(p02, p46, p13, p57)``, each
    ``[C]``, quantized with ``inv [C]``."""
    C: tl.constexpr = x.shape[0]
    q = round_int(x, inv[:, None])
    e, o = tl.split(tl.reshape(q, (C, 4, 2)))  # values 0 2 4 6 / 1 3 5 7
    e0, e1 = tl.split(tl.reshape(e, (C, 2, 2)))  # 0 4 / 2 6
    o0, o1 = tl.split(tl.reshape(o, (C, 2, 2)))  # 1 5 / 3 7
    q0, q4 = tl.split(e0)
    q2, q6 = tl.split(e1)
    q1, q5 = tl.split(o0)
    q3, q7 = tl.split(o1)
    return _pair(q0, q2), _pair(q4, q6), _pair(q1, q3), _pair(q5, q7)


@triton.jit
def pack_pair(a, b, ASM: tl.constexpr):
    """One int32 of two int16 ``(a.lo16 low, b.lo16 high)`` from int32 ``a b``: one ``prmt`` (GPU, ``ASM``),
    else integer ops."""
    if ASM:
        return tl.inline_asm_elementwise("prmt.b32 $0, $1, $2, 0x5410;", "=r,r,r", [a, b], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:
        return _pair(a, b)


def step_warps(units: int, units_per_warp: int, max_warps: int) -> int:
    """Warps per program of a streamed integer-dot mat-vec whose loop step takes ``units_per_warp`` units of a
    row per warp: the most, up to ``max_warps``, whose step divides the row's ``units`` (0 when not even one
    warp's does)."""
    warps = max_warps
    while warps and units % (units_per_warp * warps):
        warps //= 2
    return warps
