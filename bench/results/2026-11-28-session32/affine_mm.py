"""Matmul of many rows of x with MLX affine 4-bit weights: tiles dequantized in registers, tensor-core dots.

``out [M, N] = x [M, K] @ (S q + B)^T`` with ``W [N, K / 8]`` int32 words (nibble ``p`` of word ``j`` is column
``8 j + p``) and ``S, B [N, K / GS]`` in x's dtype. Program ``(pid_m, pid_n)`` (grouped ``GROUP_M`` row blocks at
a time, so the row blocks that share a column block of W run together and read it from L2) loops over K in steps of
``BK``: x ``[BM, BK]``, the words ``[BN, BK / 8]`` and the step's scales / biases ``[BN, BK / GS]`` through Triton's
software pipeline (``num_stages``), codes unpacked with shifts and turned into floats with the magic number
(``kernels``' :func:`~mlx_native.ops.quant.tiles.codes_to_f32`), ``fma(q, S, B)`` in fp32 rounded once to x's dtype
(the dequantized weight of :func:`~mlx_native.ops.quant.api.dequantize`), one ``tl.dot`` per step.

The alternative it competes with is chunked dequantize + cuBLAS (``qmm.ChunkedPrefill``): it writes and reads the
bf16 weight once more (4.5x the packed bytes) but runs cuBLAS's GEMM; the fused tiles read only the packed weight
and dequantize each tile once per row block.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...kernels.words import word_aligned, x_pair
from ...runtime.memory import empty
from .tiles import codes_to_f32


@triton.jit
def _group_pairs(words, X_BF16: tl.constexpr):
    """fp32 ``[R, 2 C]`` of the 16-bit values (two a word, low half first) of ``words [R, C]`` int32."""
    lo, hi = x_pair(words, X_BF16)
    return tl.reshape(tl.join(lo, hi), [words.shape[0], 2 * words.shape[1]])


@triton.jit
def affine_mm_kernel(
    x_ptr,  # [M, K] bf16 / fp16, unit column stride
    w_ptr,  # [N, K / 8] int32 words
    s_ptr, b_ptr,  # [N, K / GS] scales / biases in x's dtype, read as int32 words (pairs of groups)
    out_ptr,  # [M, N] in x's dtype, contiguous
    M, N, K, stride_xm, stride_wn, stride_sn,
    GS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Program ``(pid_m, pid_n)`` of the grouped order: ``out`` rows ``[pid_m BM, +BM)`` x features ``[pid_n BN,
    +BN)``; a step is ``BK = 2 GS j`` columns (whole pairs of groups, so the scales and biases come as 4-byte words
    through the software pipeline with the codes and x)."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    width = GROUP_M * num_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    m_ok = offs_m < M
    rows = tl.where(offs_n < N, offs_n, 0).to(tl.int64)  # rows past N read row 0 and are not stored
    G: tl.constexpr = BK // GS  # scale groups a step
    x_ptrs = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm + tl.arange(0, BK)[None, :]
    w_ptrs = w_ptr + rows[:, None] * stride_wn + tl.arange(0, BK // 8)[None, :]
    s_off = rows[:, None] * (stride_sn // 2) + tl.arange(0, G // 2)[None, :]
    s_words = s_ptr.to(tl.pointer_type(tl.int32)) + s_off
    b_words = b_ptr.to(tl.pointer_type(tl.int32)) + s_off
    shifts = (tl.arange(0, 8) * 4)[None, None, None, :]
    X_BF16: tl.constexpr = x_ptr.dtype.element_ty == tl.bfloat16
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(x_ptrs + k0, mask=m_ok[:, None], other=0.0)
        words = tl.load(w_ptrs + k0 // 8)
        S = _group_pairs(tl.load(s_words + k0 // (2 * GS)), X_BF16)  # [BN, G]
        B = _group_pairs(tl.load(b_words + k0 // (2 * GS)), X_BF16)
        q = (tl.reshape(words, [BN, G, GS // 8])[:, :, :, None] >> shifts) & 0xF  # [BN, G, GS / 8, 8]
        w = codes_to_f32(tl.reshape(q, [BN, G, GS])) * S[:, :, None] + B[:, :, None]
        acc = tl.dot(x, tl.trans(tl.reshape(w, [BN, BK]).to(x_ptr.dtype.element_ty)), acc)
    out = out_ptr + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & (offs_n < N)[None, :])


# (BM, BN, BK, num_warps, num_stages); BK: columns a step, at least two groups (step_columns)
CONFIG = (128, 128, 128, 8, 3)
GROUP_M = 8
ROWS = (0, -1)  # calls of this many rows (from, to) that quantized_matmul routes here: none yet (bench sweeps set it)


def step_columns(group_size: int, bk: int = 0) -> int:
    """Columns a loop step: ``bk`` (by default ``CONFIG``'s), at least two groups."""
    return max(bk or CONFIG[2], 2 * group_size)


def supports(m: int, bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, out_dtype: torch.dtype,
             scale_dtype: torch.dtype, k: int, n: int, words: int) -> bool:
    """``m`` rows in ``ROWS``, 4-bit MLX weights with ``transpose=True``, bf16 / fp16 x whose dtype the scales and
    the result share, K a multiple of the step (:func:`step_columns`), int32 word offsets."""
    return (ROWS[0] <= m <= ROWS[1] and bits == 4 and transpose and x_dtype in (torch.bfloat16, torch.float16)
            and out_dtype == x_dtype and scale_dtype == x_dtype and k % step_columns(group_size) == 0
            and words < 2**31 and n * k < 2**31)


class AffineMmLaunch:
    """:func:`affine_mm_kernel` for ``x [m, k]`` (unit column stride), ``w [n, k / 8]`` int32, ``scales`` and
    ``biases [n, k / group_size]`` (row strides of the call's, unit column strides); ``config``: ``(BM, BN, BK,
    num_warps, num_stages)``, by default ``CONFIG``."""

    def __init__(self, m: int, n: int, k: int, group_size: int, dtype: torch.dtype, strides: tuple, device,
                 config: tuple = ()):
        bm, bn, bk, warps, stages = config or CONFIG
        bk = step_columns(group_size, bk)
        self.m, self.n, self.dtype, self.device = m, n, dtype, device
        self.ints = (m, n, k, *strides)
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        self.launch = Launch(affine_mm_kernel, grid, dict(GS=group_size, BM=bm, BN=bn, BK=bk, GROUP_M=GROUP_M),
                             num_warps=warps, num_stages=stages)

    def __call__(self, x, w, s, b, *unused) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.dtype, device=self.device)
        self.launch(x, w, word_aligned(s), word_aligned(b), out, *self.ints)
        return out
