"""Test-only fixes that make Triton's CPU interpreter compute what the GPU does.

1. fp32 -> bf16 casts: the interpreter truncates; the GPU (and PyTorch)
   round to nearest even. Without this, interpreter outputs carry up to one
   bf16 ulp of extra error that the GPU never shows.
2. ``tl.dot`` on bf16 operands: the interpreter multiplies the raw uint16
   bit patterns (triton-lang/triton#11584); we convert to fp32 first.

Applied by conftest.py when ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import numpy as np
import torch


def _bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16_bits_rtne(values: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().view(np.uint16)


def apply() -> None:
    import triton.language as tl
    from triton.runtime import interpreter as itp

    builder_cls = itp.InterpreterBuilder
    if getattr(builder_cls, "_mlx_native_shimmed", False):
        return
    original_cast = builder_cls.cast_impl
    original_dot = builder_cls.create_dot

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return itp.TensorHandle(_f32_to_bf16_bits_rtne(src.data), dst_type.scalar)
        return original_cast(self, src, dst_type)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16:
            a = itp.TensorHandle(_bf16_bits_to_f32(a.data), tl.float32)
        if b.dtype.scalar == tl.bfloat16:
            b = itp.TensorHandle(_bf16_bits_to_f32(b.data), tl.float32)
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder_cls.cast_impl = cast_impl
    builder_cls.create_dot = create_dot
    builder_cls._mlx_native_shimmed = True
