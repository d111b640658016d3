"""Decode matmul on tensor cores for MLX affine 4-bit weights: 1 to 16 rows of x, one kernel.

``out[m, n] = sum_k x[m, k] * (S[n, g] * q[n, k] + B[n, g])`` with ``W`` packed as MLX does
(``transpose=True``: ``[N, K / 8]`` words, nibble ``p`` of word ``j`` is column ``8 j + p``).

Why tensor cores for a mat-vec: the multiply-adds are free there, so the cost per code is
only its decoding, and 16 rows of x cost what one row costs. Per packed word the decoding is
three shifts and four LOP3s: ``((w >> 4 i) & 0x000F000F) | MAGIC`` is a pair of 16-bit floats
``(OFF + q_i, OFF + q_{i+4})`` exactly (bf16: ``0x4300`` = 128, fp16: ``0x6400`` = 1024), which
is already a register pair of the MMA's A operand. The dot runs on the raw ``OFF + q`` codes,
one group at a time, and the group's scale is applied to the fp32 result; the bias and the
offset, which need only the group sums of x, are one more (fp32) dot after the loop::

    acc = sum_g S_g * dot(OFF + q_g, x_g)  +  (B - OFF * S) @ [sum_{k in g} x_k]_g

Column order: the dequantized group tile is permuted so that each thread's register pairs
come straight from its own words (column ``col`` holds code ``8 * word + i + 4 e``, see
:func:`_group_columns`); ``x`` is gathered in the same order, so the dot is unchanged.

Grid: axis 0 = tiles of ``BN`` output features, axis 1 = K split (fp32 partials, reduced by
``qmm.splitk_reduce_kernel``). x rows are padded to 16 (the smallest dot); rows ``>= M`` are
masked loads and never stored.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _group_columns(GS: tl.constexpr):
    """``[GS]`` offset within the group of the code held by each column of the dequantized tile."""
    WPG: tl.constexpr = GS // 8
    F: tl.constexpr = WPG // 4
    col = tl.arange(0, GS)
    i = col // (2 * WPG)
    f = (col // 8) % F
    c = (col // 2) % 4
    e = col % 2
    return 8 * (c * F + f) + i + 4 * e


@triton.jit
def _decode_group(w, BN: tl.constexpr, GS: tl.constexpr, X_F16: tl.constexpr):
    """``[BN, GS / 8]`` int32 words -> ``[BN, GS]`` 16-bit floats ``OFF + q`` in column order
    :func:`_group_columns`."""
    WPG: tl.constexpr = GS // 8
    F: tl.constexpr = WPG // 4
    shifts = 4 * tl.arange(0, 4)
    if X_F16:
        t = ((w[:, :, None] >> shifts[None, None, :]) & 0x000F000F) | 0x64006400
        lo = t.to(tl.int16).to(tl.float16, bitcast=True)
        hi = (t >> 16).to(tl.int16).to(tl.float16, bitcast=True)
    else:
        t = ((w[:, :, None] >> shifts[None, None, :]) & 0x000F000F) | 0x43004300
        lo = t.to(tl.int16).to(tl.bfloat16, bitcast=True)
        hi = (t >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    d = tl.join(lo, hi)  # [BN, word, i, e]: code 8 word + i + 4 e
    d = tl.reshape(d, (BN, 4, F, 4, 2))  # word = c F + f
    d = tl.permute(d, (0, 3, 2, 1, 4))  # [BN, i, f, c, e]
    return tl.reshape(d, (BN, GS))


@triton.jit
def _group_step(x_ptr, w_ptr, s_ptr, rows, m, kcol, g, M, stride_xm, stride_wn, stride_sn, acc,
                BN: tl.constexpr, GS: tl.constexpr, X_F16: tl.constexpr):
    """``acc [BN, MP] += S_g * dot(OFF + q_g, x_g)`` for group ``g``."""
    WPG: tl.constexpr = GS // 8
    wj = tl.arange(0, WPG)
    w = tl.load(w_ptr + rows[:, None] * stride_wn + (g * WPG + wj)[None, :])
    S = tl.load(s_ptr + rows * stride_sn + g).to(tl.float32)
    xg = tl.load(x_ptr + m[None, :] * stride_xm + (g * GS + kcol)[:, None], mask=(m < M)[None, :], other=0.0)
    return acc + S[:, None] * tl.dot(_decode_group(w, BN, GS, X_F16), xg)


@triton.jit
def _offset_terms(x_ptr, s_ptr, b_ptr, rows, m, g_lo, g_hi, M, stride_xm, stride_sn, acc,
                  GS: tl.constexpr, X_F16: tl.constexpr, ONE_ROW: tl.constexpr):
    """``acc += sum_g (B_g - OFF * S_g) * sum_{k in g} x[:, k]`` over groups ``[g_lo, g_hi)``, 16 at a
    time, as an fp32 dot (3-pass TF32, about fp32 accuracy: the OFF term cancels against the codes)."""
    OFF: tl.constexpr = 1024.0 if X_F16 else 128.0
    GCH: tl.constexpr = 16
    gc = tl.arange(0, GCH)
    kc = tl.arange(0, GS)
    for g0 in range(g_lo, g_hi, GCH):
        gi = g0 + gc
        ok = gi < g_hi
        S = tl.load(s_ptr + rows[:, None] * stride_sn + gi[None, :], mask=ok[None, :], other=0.0).to(tl.float32)
        B = tl.load(b_ptr + rows[:, None] * stride_sn + gi[None, :], mask=ok[None, :], other=0.0).to(tl.float32)
        if ONE_ROW:  # only row 0 of x is real: sum [GCH, GS], place it in column 0
            x1 = tl.load(x_ptr + (gi * GS)[:, None] + kc[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            xs = tl.where((m == 0)[None, :], tl.sum(x1, axis=1)[:, None], 0.0)  # [GCH, MP]
        else:
            xk = x_ptr + m[:, None, None] * stride_xm + (gi * GS)[None, :, None] + kc[None, None, :]
            xc = tl.load(xk, mask=(m < M)[:, None, None] & ok[None, :, None], other=0.0).to(tl.float32)
            xs = tl.trans(tl.sum(xc, axis=2))  # [GCH, MP]
        acc = tl.dot(B - OFF * S, xs, acc, input_precision="tf32x3")
    return acc


@triton.jit(do_not_specialize=["groups_per_split"])
def mmv_kernel(
    x_ptr,  # [M, K] activations, bf16 or fp16 (unit column stride)
    w_ptr,  # [N, K / 8] int32 words
    s_ptr, b_ptr,  # [N, K / GS] scales / biases
    out_ptr,  # [M, N] output, or [split, M, N] fp32 partials (SPLIT_K)
    M, N, K, stride_xm, stride_wn, stride_sn, groups_per_split,
    BN: tl.constexpr, GS: tl.constexpr, MP: tl.constexpr, GPS: tl.constexpr, X_F16: tl.constexpr,
    SPLIT_K: tl.constexpr, ONE_ROW: tl.constexpr,
):
    """``GPS``: groups per loop step (1 or 2: two dots per step). ``ONE_ROW``: ``M == 1``."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_n * BN + tl.arange(0, BN)
    row_ok = rows < N
    rows = tl.where(row_ok, rows, 0)
    m = tl.arange(0, MP)
    kcol = _group_columns(GS)
    g_lo = pid_k * groups_per_split
    g_hi = tl.minimum(K // GS, g_lo + groups_per_split)
    acc = tl.zeros([BN, MP], dtype=tl.float32)
    for g in range(g_lo, g_hi, GPS):
        acc = _group_step(x_ptr, w_ptr, s_ptr, rows, m, kcol, g, M, stride_xm, stride_wn, stride_sn, acc,
                          BN, GS, X_F16)
        if GPS == 2:
            acc = _group_step(x_ptr, w_ptr, s_ptr, rows, m, kcol, g + 1, M, stride_xm, stride_wn, stride_sn, acc,
                              BN, GS, X_F16)
    acc = _offset_terms(x_ptr, s_ptr, b_ptr, rows, m, g_lo, g_hi, M, stride_xm, stride_sn, acc, GS, X_F16,
                        ONE_ROW)
    mask = row_ok[:, None] & (m < M)[None, :]
    out_off = m[None, :].to(tl.int64) * N + (pid_n * BN + tl.arange(0, BN))[:, None]
    if SPLIT_K:
        tl.store(out_ptr + pid_k.to(tl.int64) * M * N + out_off, acc, mask=mask)
    else:
        tl.store(out_ptr + out_off, acc.to(out_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...kernels.launch import Launch  # noqa: E402
from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ...runtime.memory import empty  # noqa: E402

# From the H100 sweep (bench/mmv_sweep.py, bench/results/2026-11-22-h100-quant-mmv/): 64-feature tiles,
# about 2 programs per SM, 3 pipeline stages for one row of x and 2 for more (M = 16: 44 vs 56 us).
MMV_BN = 64  # output features per program
MMV_WARPS = 4
MMV_STAGES = 3  # one row of x
MMV_STAGES_ROWS = 2  # 2-16 rows
PROGRAMS_PER_SM = 2  # split K until about this many programs per SM
MAX_ROWS = 16


def supports(bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, out_dtype: torch.dtype,
             m: int) -> bool:
    """Weights and activations this kernel takes (``MLX_NATIVE_MMV=0`` turns it off).

    Only 16-bit outputs: the offset ``OFF`` cancels in fp32 (``OFF * sum(x)`` against ``q . x``),
    which costs about ``OFF / 8`` times fp32 rounding, far below a bf16/fp16 ulp but not within
    the error of an fp32 result.
    """
    low = (torch.bfloat16, torch.float16)
    return (env.settings.mmv and bits == 4 and transpose and group_size in (32, 64, 128) and 1 <= m <= MAX_ROWS
            and x_dtype in low and out_dtype in low)


class MmvLaunch:
    """:func:`mmv_kernel` prepared for one signature.

    Args:
        m, n, k: rows of x, output features, input features. group_size: of the weights.
        x_dtype / out_dtype: activations (bf16 or fp16) / output. strides: (stride_xm, stride_wn, stride_sn).
    """

    def __init__(self, m: int, n: int, k: int, group_size: int, x_dtype: torch.dtype, out_dtype: torch.dtype,
                 strides: tuple, device):
        bn = MMV_BN
        groups = k // group_size
        gps = 2 if groups % 2 == 0 else 1
        tiles = triton.cdiv(n, bn)
        target = PROGRAMS_PER_SM * device_info(device).sm_count
        split = 1
        while tiles * split < target and groups // (split * 2) >= 4 * gps and split < 32:
            split *= 2
        per_split = triton.cdiv(groups // gps, split) * gps
        self.split = triton.cdiv(groups, per_split)
        self.m, self.n, self.out_dtype, self.device = m, n, out_dtype, device
        self.ints = (m, n, k, *strides, per_split)
        self.launch = Launch(mmv_kernel, (tiles, self.split), dict(
            BN=bn, GS=group_size, MP=16, GPS=gps, X_F16=x_dtype == torch.float16, SPLIT_K=self.split > 1,
            ONE_ROW=m == 1),
            num_warps=MMV_WARPS, num_stages=MMV_STAGES if m == 1 else MMV_STAGES_ROWS)
        if self.split > 1:
            from .qmm import SplitK

            self.splitk = SplitK(self.split, m, n, False, 0, device)

    def __call__(self, x, w, s, b, *unused) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.out_dtype, device=self.device)
        if self.split == 1:
            self.launch(x, w, s, b, out, *self.ints)
            return out
        part, _ = self.splitk.partials()
        self.launch(x, w, s, b, part, *self.ints)
        return self.splitk.reduce_into(part, part, out)
