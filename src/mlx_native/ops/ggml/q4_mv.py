"""Decode mat-vec for GGUF Q4_0 / Q4_1 weights and one to four rows of x, streamed like ``quant/affine_mv.py``.

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

Rows of x (``MR``, 2 to 4: a few tokens decoded at once; the one-row code above is its own constexpr branch and
compiles as before): the weights are streamed once for all rows, each unit's four nibbles decoded once and
used by every row of x, one ``[8, G, BN]`` accumulator per row (no padded rows: three rows cost three). With
PRESCALE the scales are applied to the decoded units (``d q + m``, ``d (q - 8)``: 4 FMAs a unit and weight row)
and each row of x costs 4 FMAs a unit and weight row; without it each row of x costs the 4 FMAs of ``a``,
``acc += d a`` and for Q4_1 ``+ m xs`` (Q4_0 decodes ``q - 8`` exactly: the 8 folded into the decode's FMA).
Each row of x is loaded as the one row is (``[8, G, 4]`` per step at ``x + row * stride_x``), so x needs no
layout conversion, but only while the unit tiles keep x's layout: Q4_1's 20-byte blocks make unit pairs 4-byte
aligned, the loads of a tile then vectorize into a layout of two units per thread, and x would go through
shared memory every step and row (H100, 4096 x 14336, 4 rows: 57 us against 38). Adding ``zero`` (a runtime 0
the compiler cannot see through) to Q4_1's unit offsets keeps them at 2-byte alignment for more than one row.
The rows' results are joined (``[BN, 2]`` or ``[BN, 2, 2]``) into one ``store_result``: the output ``[MR, N]``,
a K split's partials ``[split, MR, N]`` and one arrival counter per row tile, as with one row.
Cost (sm_90 SASS of the loop, Triton 3.6, 8-row tiles, PRESCALE, per unit and weight row, i.e. 4 codes): 30 / 35
/ 41 instructions for 2 / 3 / 4 rows of x (Q4_1: 31 / 37 / 42; the one-row loop: 24), so 2 rows stay near the
bandwidth-bound one-row time (H100: 25-28 us against 21-23 on Llama-3-8B's MLP shapes) and 4 rows are issue-bound
at about 1.5-1.7x it (33-37 us); no register spills (96-126 registers).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter, leave_loop
from ...kernels.loads import pinned
from ...kernels.words import half_lo
from ..quant.affine_mv import code_f32, row_tile, store_rows


@triton.jit
def _x_planes(xp):
    """One row's x of a step, ``[8, G, 4]`` at the pointers ``xp``, as the fp32 planes ``(x0, x1, x16, x17)``
    ``[8, G]``: values ``2u, 2u + 1, 2u + 16, 2u + 17`` of each unit ``u``."""
    xv = tl.load(xp).to(tl.float32)
    lo, hi = tl.split(tl.reshape(xv, (xv.shape[0], xv.shape[1], 2, 2)))  # 2u, 2u + 1 / 2u + 16, 2u + 17
    x0, x1 = tl.split(lo)
    x16, x17 = tl.split(hi)
    return x0, x1, x16, x17


@triton.jit
def _row_step(acc, v0, v4, v8, v12, d, m, xp, Q4_1: tl.constexpr, PRESCALE: tl.constexpr):
    """``acc [8, G, BN]`` of one row of x (its step's ``[8, G, 4]`` values at the pointers ``xp``) + one step
    against the decoded units ``v0 .. v12`` (the nibbles at bits 0, 4, 8, 12: values ``2u, 2u + 16, 2u + 1,
    2u + 17``). PRESCALE: ``v`` are the weights (scales applied), 4 FMAs; else ``v`` are ``q`` (Q4_1) or
    ``q - 8`` (Q4_0) and ``acc += d a`` (``+ m xs``, Q4_1) follows the 4 FMAs of ``a = sum v x``, with ``d, m
    [1, G, BN]``."""
    x0, x1, x16, x17 = _x_planes(xp)
    if PRESCALE:
        acc = tl.fma(v0, x0[:, :, None], acc)
        acc = tl.fma(v4, x16[:, :, None], acc)
        acc = tl.fma(v8, x1[:, :, None], acc)
        acc = tl.fma(v12, x17[:, :, None], acc)
    else:
        a = v0 * x0[:, :, None]
        a = tl.fma(v4, x16[:, :, None], a)
        a = tl.fma(v8, x1[:, :, None], a)
        a = tl.fma(v12, x17[:, :, None], a)
        acc = tl.fma(d, a, acc)
        if Q4_1:
            acc = tl.fma(m, ((x0 + x1) + (x16 + x17))[:, :, None], acc)
    return acc


@triton.jit
def _step_tiles(w_ptr, w_off, s_off, base, Q4_1: tl.constexpr):
    """A loop step's units ``[8, G, BN]`` and the fp16 bits of its block scales ``d`` (Q4_1: and ``m``; else ``d``
    again) ``[G, BN]``, at ``base`` halves past the offsets, each half widened to int32 (32-bit registers, which a loop
    carries to the next step as loaded; ``kernels.words.half_lo`` converts the scales there)."""
    w = tl.load(w_ptr + w_off + base).to(tl.int32)
    d = tl.load(w_ptr + s_off + base).to(tl.int32)
    m = tl.load(w_ptr + s_off + base + 1).to(tl.int32) if Q4_1 else d
    return w, d, m


@triton.jit(do_not_specialize=["units_per_split", "magic", "zero"])
def q4_mv_kernel(
    x_ptr,  # [MR, K] activations, bf16 or fp16, unit column stride, row stride stride_x
    w_ptr,  # [N * K / 32 * TS / 2] int16 halves of the raw rows
    out_ptr,  # [MR, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, MR, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, stride_x, units_per_split, magic, zero,
    Q4_1: tl.constexpr, STRIDE_H: tl.constexpr, N_UNITS: tl.constexpr, BN: tl.constexpr, UPS: tl.constexpr,
    EVEN_N: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr, MR: tl.constexpr, PRESCALE: tl.constexpr,
    PDL: tl.constexpr = False, ASM: tl.constexpr = True,
):
    """Offsets are in 16-bit halves: ``STRIDE_H`` per row, ``TH`` per block (9 / 10), the nibbles from half
    ``QH`` (1 / 2). ``N_UNITS = K / 4``; ``UPS`` (units per step) and ``units_per_split`` are multiples of 8
    (whole blocks) and ``units_per_split`` of ``UPS``. ``MR`` (1-4) rows of x; ``stride_x``, ``zero`` (0) and
    PRESCALE are read only for ``MR > 1``."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
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
    acc1, acc2, acc3 = acc, acc, acc  # rows 1-3 of x (MR > 1)
    if MR > 1 and Q4_1:
        w_off = w_off + zero  # see the docstring
    base = (j_lo // 8) * TH
    w, d, m = _step_tiles(w_ptr, w_off, s_off, base, Q4_1)
    if MR == 1:  # one row of x: the decode mat-vec
        for j in range(j_lo, j_hi, UPS):  # this step's tiles taken at its top (kernels.loads.pinned)
            w_j, d_j, m_j = pinned(w, ASM), pinned(d, ASM), pinned(m, ASM)
            nxt = (tl.minimum(j + UPS, j_hi - UPS) // 8) * TH
            w, d, m = _step_tiles(w_ptr, w_off, s_off, nxt, Q4_1)
            d_j, m_j = half_lo(d_j), half_lo(m_j)
            xv = tl.load(x_ptr + 4 * j + x_off).to(tl.float32)  # [8, G, 4]: values 2u, 2u + 1, 2u + 16, 2u + 17
            lo, hi = tl.split(tl.reshape(xv, (8, G, 2, 2)))  # 2u, 2u + 1 / 2u + 16, 2u + 17
            x0, x1 = tl.split(lo)
            x16, x17 = tl.split(hi)
            u = w_j & 0xFFFF
            a = code_f32(u, 0, magic) * x0[:, :, None]
            a = tl.fma(code_f32(u, 4, magic), x16[:, :, None], a)
            a = tl.fma(code_f32(u, 8, magic), x1[:, :, None], a)
            a = tl.fma(code_f32(u, 12, magic), x17[:, :, None], a)
            xs = (x0 + x1) + (x16 + x17)
            acc = tl.fma(d_j[None, :, :], a, acc)
            if Q4_1:
                acc = tl.fma(m_j[None, :, :], xs[:, :, None], acc)
            else:
                acc = tl.fma(-8.0 * d_j[None, :, :], xs[:, :, None], acc)
    else:  # 2-4 rows of x: each unit decoded once for all of them, one accumulator per row
        OFF: tl.constexpr = 0.0 if Q4_1 else 8.0  # Q4_0: q - 8 straight from the decode
        for j in range(j_lo, j_hi, UPS):  # this step's tiles taken at its top (kernels.loads.pinned)
            w_j, d_j, m_j = pinned(w, ASM), pinned(d, ASM), pinned(m, ASM)
            nxt = (tl.minimum(j + UPS, j_hi - UPS) // 8) * TH
            w, d, m = _step_tiles(w_ptr, w_off, s_off, nxt, Q4_1)
            u = w_j & 0xFFFF
            v0 = code_f32(u, 0, magic, 4, OFF)
            v4 = code_f32(u, 4, magic, 4, OFF)
            v8 = code_f32(u, 8, magic, 4, OFF)
            v12 = code_f32(u, 12, magic, 4, OFF)
            ds = half_lo(d_j)[None, :, :]
            if Q4_1:
                ms = half_lo(m_j)[None, :, :]
            else:
                ms = ds  # (unused)
            if PRESCALE:
                if Q4_1:
                    v0 = tl.fma(ds, v0, ms)
                    v4 = tl.fma(ds, v4, ms)
                    v8 = tl.fma(ds, v8, ms)
                    v12 = tl.fma(ds, v12, ms)
                else:
                    v0 = ds * v0
                    v4 = ds * v4
                    v8 = ds * v8
                    v12 = ds * v12
            xp = x_ptr + 4 * j + x_off
            acc = _row_step(acc, v0, v4, v8, v12, ds, ms, xp, Q4_1, PRESCALE)
            acc1 = _row_step(acc1, v0, v4, v8, v12, ds, ms, xp + stride_x, Q4_1, PRESCALE)
            if MR > 2:
                acc2 = _row_step(acc2, v0, v4, v8, v12, ds, ms, xp + 2 * stride_x, Q4_1, PRESCALE)
            if MR > 3:
                acc3 = _row_step(acc3, v0, v4, v8, v12, ds, ms, xp + 3 * stride_x, Q4_1, PRESCALE)
    leave_loop(PDL)  # PDL 3: the next launch may be scheduled from here
    store_rows(out_ptr, part_ptr, cnt_ptr + pid_n, acc, acc1, acc2, acc3, pid_n * BN + tl.arange(0, BN).to(tl.int64),
               row_ok, N, MR, SPLIT_K, FUSE, 2)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ..quant.affine_mv import MAGIC, StreamedMvLaunch, largest_step, x_row_stride_of  # noqa: E402

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
# Fewer row tiles than this per SM go to the word-level kernel. One row: none since session 25 (run 8, H100, us,
# word-level -> here: Q4_0 K x N 4096 x 1024 7.84 -> 2.93, 4096 x 512 5.40 -> 2.32, 8192 x 1024 12.12 -> 5.52, 2048 x
# 256 3.18 -> 1.40, 1536 x 576 3.02 -> 3.21; Q4_1 1.13-2.47x, 1536 x 576 3.30 -> 2.92). 2-4 rows: not measured, kept.
MIN_TILES_PER_SM = 0
ROWS_MIN_TILES_PER_SM = 1

# 2 to ROWS_MAX rows of x (a few tokens decoded at once). H100, bf16 x, CUDA graph, weights rotating through
# 130 MB (helper sweep, session 17; one row: 21.6-23.0 us, the routes these calls take today: 53-63 us), us for
# 2 / 3 / 4 rows with 8-row tiles and PRESCALE: Q4_0 4096 x 14336 25.6 / 32.8 / 37.5, 14336 x 4096 25.2 / 27.8 /
# 33.7; Q4_1 4096 x 14336 28.4 / 35.4 / 37.7, 14336 x 4096 28.1 / 31.9 / 34.0. 4-row tiles were 10-60% slower,
# 16-row tiles 10-30% slower (168-252 registers), no PRESCALE within noise for Q4_0 (26.5 / 32.7 / 37.3 and 26.7 /
# 28.3 / 33.2) and 0-15% slower for Q4_1. The K split target is the one-row tiling's (these shapes run unsplit).
ROWS_MAX = 4
ROWS_BN = {2: 8, 3: 8, 4: 8}  # weight rows per program by rows of x
PRESCALE_MIN_ROWS = {2: 2, 3: 2}  # by type (Q4_0, Q4_1): scales applied to the decoded units from this many rows


def tiling(k: int, m: int = 1) -> tuple[int, int]:
    """(rows per program, programs per SM the K split aims for) for ``m`` rows of x and rows of ``k`` columns."""
    pps = LONG_PROGRAMS_PER_SM if k >= LONG_K else PROGRAMS_PER_SM
    if m > 1:
        return ROWS_BN[m], pps
    return (LONG_BN if k >= LONG_K else Q4_BN), pps


def step_units(k: int) -> int:
    """16-bit units per loop step: the most whole blocks, up to Q4_MAX_UPS units, that divide the row (0 if
    that is fewer than Q4_MIN_UPS)."""
    return largest_step(k // 4, Q4_MAX_UPS, Q4_MIN_UPS)


def supports(ggml_type: int, x_dtype: torch.dtype, m: int, n: int, k: int, raw_bytes: int, sms: int) -> bool:
    """``1 <= m <= ROWS_MAX`` rows of bf16/fp16 x against Q4_0/Q4_1 rows long enough for whole
    steps of 8-16 blocks and, for several rows of x, numerous enough for ``ROWS_MIN_TILES_PER_SM`` row tiles per SM
    (their tiles: ``ROWS_BN``; ``MIN_TILES_PER_SM`` for one row). ``MLX_NATIVE_GGUF_MV=0`` turns it off."""
    min_tiles = MIN_TILES_PER_SM if m == 1 else ROWS_MIN_TILES_PER_SM
    return (env.settings.gguf_mv and ggml_type in Q4_IDS and 1 <= m <= ROWS_MAX
            and x_dtype in (torch.bfloat16, torch.float16) and step_units(k) > 0
            and triton.cdiv(n, tiling(k, m)[0]) >= min_tiles * sms and raw_bytes < 2**31)


class Q4MvLaunch(StreamedMvLaunch):
    """:func:`q4_mv_kernel` for ``(x [m, k], raw [n * k / 32 * block_bytes] uint8)`` -> ``[m, n]`` of
    ``out_dtype``; the raw rows are read as 16-bit halves. x: unit column stride, row stride ``x_row_stride``
    (default ``k``; a plan-time constant, as every int Triton specializes on: read only for ``m > 1``). A K
    split stores ``[split, m, n]`` fp32 partials, merged in the launch by the last split of each row tile
    (one counter per tile, shared by the rows of x)."""

    def __init__(self, ggml_type: int, n: int, k: int, out_dtype: torch.dtype, device, m: int = 1,
                 x_row_stride=None):
        stride_x = x_row_stride_of("q4_mv", m, k, x_row_stride, ROWS_MAX)
        ups = step_units(k)
        bn, pps = tiling(k, m)
        tiles = triton.cdiv(n, bn)
        constexprs = dict(Q4_1=ggml_type == 3, STRIDE_H=k // 32 * Q4_IDS[ggml_type], N_UNITS=k // 4, BN=bn, UPS=ups,
                          EVEN_N=n % bn == 0, MR=m, PRESCALE=m > 1 and m >= PRESCALE_MIN_ROWS[ggml_type],
                          ASM=not env.settings.triton_interpret)
        super().__init__(q4_mv_kernel, n, tiles, k // 4 // ups, ups, pps * device_info(device).sm_count, (n, stride_x),
                         constexprs, out_dtype, device, tail_ints=(MAGIC, 0), trigger="late", m=m)

    def __call__(self, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return self.run(x, raw.view(torch.int16))
