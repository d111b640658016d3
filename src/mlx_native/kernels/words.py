"""Device functions for kernels that read 16-bit values and packed fields as int32 words, and the host-side
alignment those reads need.

* :func:`x_pair`: the two bf16 / fp16 values of an int32 word (x read as words of two values) as fp32;
* :func:`half_lo`: the fp16 in the low 16 bits of an int32 word as fp32 (GGUF block scales);
* :func:`half16`: the 16-bit value of a given type in either half of an int32 word (no conversion);
* :func:`word_ptrs`: int32 pointers to the words holding 16-bit values at given offsets;
* :func:`bit_select`: the bits of one word where a mask is set, of another elsewhere, in one LOP3;
* :func:`word_aligned`: x for such kernels, copied when a view starts at an odd element.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def half_lo(v):
    """fp32 of the fp16 in the low 16 bits of the int32 ``v``."""
    return v.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def half16(v, shift, DT: tl.constexpr):
    """The 16-bit value of type ``DT`` in bits ``shift`` (0 or 16; scalar or tensor) to ``shift + 15`` of the int32
    ``v``."""
    return ((v >> shift) & 0xFFFF).to(tl.int16).to(DT, bitcast=True)


@triton.jit
def word_ptrs(p, off):
    """int32 pointers to the words holding the 16-bit values at ``p + off`` (``p`` 4-byte aligned: the value sits
    in half ``off % 2`` of its word)."""
    return p.to(tl.pointer_type(tl.int32)) + (off >> 1)


@triton.jit
def x_pair(v, X_BF16: tl.constexpr):
    """fp32 ``(lo, hi)`` of the two bf16 (``X_BF16``) or fp16 values in the int32 word ``v``."""
    if X_BF16:
        lo = (v << 16).to(tl.float32, bitcast=True)
        hi = (v & -65536).to(tl.float32, bitcast=True)
    else:
        lo = half_lo(v)
        hi = half_lo(v >> 16)
    return lo, hi


@triton.jit
def bit_select(m, x, y):
    """Bits of ``x`` where ``m`` is set, of ``y`` elsewhere (one LOP3; with ``m`` a runtime value the masked merge
    is not rewritten into two masks)."""
    return y ^ ((x ^ y) & m)


def word_aligned(x: torch.Tensor) -> torch.Tensor:
    """x (or 16-bit scales) for kernels that read it as int32 words (pairs of 16-bit values): a view at an odd element
    is copied to fresh memory with the same strides (a misaligned word load faults on the GPU; plans hold the
    strides)."""
    if x.data_ptr() % 4 == 0:
        return x
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)
