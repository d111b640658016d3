"""Decode mat-vec for GGUF Q4_0 / Q4_1 weights and one row of x, streamed like ``quant/affine_mv.py``.

A block holds 32 values: ``d`` (fp16; Q4_1 also ``m``, fp16) and 16 bytes of nibbles, byte ``i`` holding
value ``i`` in its low and ``i + 16`` in its high nibble; value ``= d * (q - 8)`` (Q4_0) or ``d * q + m``
(Q4_1). Q4_0's 18-byte blocks are only 2-byte aligned, so both types are read as 16-bit units: unit ``u``
(bytes ``2u, 2u + 1``) holds values ``2u``, ``2u + 16`` (bits 0-3, 4-7) and ``2u + 1``, ``2u + 17``
(bits 8-11, 12-15).

Tiles are ``[8 units of a block, G blocks, BN rows]``: one unit per thread and row, rows in registers, the
units of a block on adjacent lanes; x comes as ``[8, G, 4]`` (two 4-byte runs per unit) split into planes in
registers. Per unit and row: 4 nibble decodes (one LOP3 + one FMA each), 4 FMAs for ``a = sum q x``, and
``acc += d a + c xs`` with ``xs`` the unit's x sum and ``c = -8 d`` (Q4_0) or ``m`` (Q4_1), loaded once per
block, row and step. The next step's units and scales are loaded before the current one is decoded
(register prefetch); a K split is summed in the same launch (``qmm.store_result``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..quant.affine_mv import _nib, row_tile
from ..quant.qmm import store_result


@triton.jit
def _f16(p):
    return tl.load(p).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit(do_not_specialize=["units_per_split", "magic"])
def q4_mv_kernel(
    x_ptr,  # [K] activations, bf16 or fp16
    w_ptr,  # [N * K / 32 * TS / 2] int16 halves of the raw rows
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, units_per_split, magic,
    Q4_1: tl.constexpr, STRIDE_H: tl.constexpr, N_UNITS: tl.constexpr, BN: tl.constexpr, UPS: tl.constexpr,
    EVEN_N: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr,
):
    """Offsets are in 16-bit halves: ``STRIDE_H`` per row, ``TH`` per block (9 / 10), the nibbles from half
    ``QH`` (1 / 2). ``N_UNITS = K / 4``; ``UPS`` (units per step) and ``units_per_split`` are multiples of 8
    (whole blocks) and ``units_per_split`` of ``UPS``."""
    TH: tl.constexpr = 10 if Q4_1 else 9
    QH: tl.constexpr = 2 if Q4_1 else 1
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    G: tl.constexpr = UPS // 8  # blocks per step
    rows, row_ok = row_tile(N, BN, EVEN_N)
    ui = tl.arange(0, 8)
    gi = tl.arange(0, G)
    s_off = (gi * TH)[:, None] + rows[None, :] * STRIDE_H  # [G, BN] d of each block at the step's first block
    w_off = QH + ui[:, None, None] + s_off[None, :, :]  # [8, G, BN]
    p = tl.arange(0, 4)
    x_off = (gi * 32)[None, :, None] + (ui * 2)[:, None, None] + ((p // 2) + (p % 2) * 16)[None, None, :]
    j_lo = pid_k * units_per_split
    j_hi = tl.minimum(N_UNITS, j_lo + units_per_split)
    acc = tl.zeros([8, G, BN], dtype=tl.float32)
    base = (j_lo // 8) * TH
    w = tl.load(w_ptr + w_off + base)
    d = _f16(w_ptr + s_off + base)
    if Q4_1:
        m = _f16(w_ptr + s_off + base + 1)
    for j in range(j_lo, j_hi, UPS):
        nxt = (tl.minimum(j + UPS, j_hi - UPS) // 8) * TH
        w_n = tl.load(w_ptr + w_off + nxt)
        d_n = _f16(w_ptr + s_off + nxt)
        if Q4_1:
            m_n = _f16(w_ptr + s_off + nxt + 1)
        xv = tl.load(x_ptr + 4 * j + x_off).to(tl.float32)  # [8, G, 4]: values 2u, 2u + 1, 2u + 16, 2u + 17
        lo, hi = tl.split(tl.reshape(xv, (8, G, 2, 2)))  # 2u, 2u + 1 / 2u + 16, 2u + 17
        x0, x1 = tl.split(lo)
        x16, x17 = tl.split(hi)
        u = w.to(tl.int32) & 0xFFFF
        a = _nib(u, 0, magic) * x0[:, :, None]
        a = tl.fma(_nib(u, 4, magic), x16[:, :, None], a)
        a = tl.fma(_nib(u, 8, magic), x1[:, :, None], a)
        a = tl.fma(_nib(u, 12, magic), x17[:, :, None], a)
        xs = (x0 + x1) + (x16 + x17)
        acc = tl.fma(d[None, :, :], a, acc)
        if Q4_1:
            acc = tl.fma(m[None, :, :], xs[:, :, None], acc)
        else:
            acc = tl.fma(-8.0 * d[None, :, :], xs[:, :, None], acc)
        w = w_n
        d = d_n
        if Q4_1:
            m = m_n
    res = tl.sum(tl.sum(acc, axis=0), axis=0)
    store_result(out_ptr, part_ptr, part_ptr, cnt_ptr + pid_n, res, res, pid_n * BN + tl.arange(0, BN).to(tl.int64),
                 row_ok, N, SPLIT_K, FUSE, False, 0)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import StreamedMvLaunch  # noqa: E402

# From the H100 sweep (bench/gguf_mv_sweep.py, bench/results/2026-11-22-h100-session5/gguf_sweep.log): 8-row
# tiles unsplit on rows of 4096 (Q4_1 4096 x 4096 8.9 us against 10.5 with 16-row tiles, the word-level kernel
# 14.6), 16-row tiles split to 2 programs per SM on long rows (Q4_0 14336 x 4096: 23.0 us against 28.3).
Q4_IDS = {2: 9, 3: 10}  # Q4_0, Q4_1 -> 16-bit halves per block
Q4_MAX_UPS = 128  # 16-bit units per row and loop step (16 blocks)
Q4_MIN_UPS = 64  # rows that take no step of at least 8 blocks stay on the word-level kernel
Q4_BN = 8  # rows per program ...
PROGRAMS_PER_SM = 1  # ... and the K split target (programs per SM)
LONG_K = 8192  # from this many columns:
LONG_BN = 16
LONG_PROGRAMS_PER_SM = 2
MIN_TILES_PER_SM = 1  # fewer row tiles than this per SM: latency bound, the word-level kernel's small tiles


def tiling(k: int) -> tuple[int, int]:
    """(rows per program, programs per SM the K split aims for) for rows of ``k`` columns."""
    return (LONG_BN, LONG_PROGRAMS_PER_SM) if k >= LONG_K else (Q4_BN, PROGRAMS_PER_SM)


def step_units(k: int) -> int:
    """16-bit units per loop step: the most whole blocks, up to Q4_MAX_UPS units, that divide the row (0 if
    that is fewer than Q4_MIN_UPS)."""
    ups = Q4_MAX_UPS
    while ups >= Q4_MIN_UPS:
        if (k // 4) % ups == 0:
            return ups
        ups //= 2
    return 0


def supports(ggml_type: int, x_dtype: torch.dtype, m: int, n: int, k: int, raw_bytes: int, sms: int) -> bool:
    """One row of bf16/fp16 x against Q4_0/Q4_1 rows long enough for whole steps of 8-16 blocks and numerous
    enough for ``MIN_TILES_PER_SM`` row tiles per SM (the small matrices of SmolLM2-like models are latency
    bound: the word-level kernel's small tiles serve them better). ``MLX_NATIVE_GGUF_MV=0`` turns it off."""
    return (env.settings.gguf_mv and ggml_type in Q4_IDS and m == 1 and x_dtype in (torch.bfloat16, torch.float16)
            and step_units(k) > 0 and triton.cdiv(n, tiling(k)[0]) >= MIN_TILES_PER_SM * sms and raw_bytes < 2**31)


class Q4MvLaunch(StreamedMvLaunch):
    """:func:`q4_mv_kernel` for ``(x [1, k], raw [n * k / 32 * block_bytes] uint8)``; the raw rows are read as
    16-bit halves."""

    def __init__(self, ggml_type: int, n: int, k: int, out_dtype: torch.dtype, device):
        ups = step_units(k)
        bn, pps = tiling(k)
        super().__init__(q4_mv_kernel, n, triton.cdiv(n, bn), k // 4 // ups, ups, pps * device_info(device).sm_count,
                         (n,), dict(Q4_1=ggml_type == 3, STRIDE_H=k // 32 * Q4_IDS[ggml_type], N_UNITS=k // 4, BN=bn,
                                    UPS=ups, EVEN_N=n % bn == 0), out_dtype, device)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(x, raw.view(torch.int16))
