"""Decode mat-vec for MLX affine 4-bit weights and a few rows of x (2-16), by integer dot products.

``out[m, n] = sum_g S[n, g] * sum_{k in g} q[n, k] x[m, k] + B[n, g] * sum_{k in g} x[m, k]``

for ``x [M, K]`` (bf16/fp16, unit column stride, any row stride), ``W [N, K / 8]`` int32 words, scales and
biases ``[N, K / GS]``, ``out [M, N]`` (bf16/fp16). The integer-dot mat-vec of ``affine_idot.py`` (one row)
for the decode of a few tokens at once: each program streams its weight tiles once and does the integer dot
of every loop step against all ``M`` rows of x, so the weights are read once for all rows (the tensor-core
kernel ``mmv.py`` that took these calls before costs about three times the one-row time).

Tiles as in ``affine_idot.py``: ``[4 * CH, BN]`` words per loop step, each thread owns 4 consecutive words
(one 16-byte load, 32 codes, one x chunk) of each of the program's ``BN`` rows. Every row of x is quantized
per chunk of 32 values to int16 with a power-of-two scale (``kernels/idot.py``), by the thread that owns the
chunk, and reused for the ``BN`` weight rows; the code bytes of a word (``w & 0x0F0F0F0F``,
``w & 0xF0F0F0F0``) are extracted once and reused for the ``M`` rows of x. Per chunk, weight row and x row:
4 ``dp2a`` per word into two int32 sums, then ``acc += (S * scale / 16) * float(16 even + odd16) + B * sum(x)``
in fp32 (the chunk's float sum keeps Inf / NaN of x, which the integers cannot carry).

Rows of x: the ``M`` rows run as up to four parts of ``R0 > R1 > R2 > R3`` rows, the binary digits of ``M``
(7 = 4 + 2 + 1), each with an accumulator ``[R, CH, BN]``: rows of x and of the weights in registers, chunks
on the lanes (the one-row kernel's layout with a leading axis). Tensor shapes stay powers of two and no
padded row of x is loaded or computed (one part padded to 8 rows would give 5 rows the cost of 8). Scales
and biases are loaded as ``[BN, CH]`` (chunks last, so on the lanes) and transposed in registers: loaded as
``[CH, BN]`` they took a shared-memory layout conversion every step. x's loads are 16-byte vectors when the
row stride is a multiple of 16 (Triton's specialization; x contiguous: K).

A K split stores fp32 partials ``[split, M, N]``; the last split to arrive on a (row tile, part) counter sums
that part's partials in the same launch (``qmm.store_result``). Rows of whole loop steps only (K a multiple of
1024, ``affine_idot.step_warps``).

Cost (offline sm_90 SASS of the loop, local Triton 3.9, 2 warps, g64): each row of x adds its 4 ``dp2a`` per
word (0.5 instructions per code), its chunk epilogue (5 per chunk and weight row: 0.16 per code) and its
chunk's quantization (about 160 instructions per chunk, shared by the tile's ``BN`` weight rows: 0.6 per code
with 8-row tiles). With 8-row tiles: 3.27 instructions per code at M = 2, 4.59 at 3, 5.98 at 4, 7.32 at 5,
11.4 at 8 (255 registers, a few spilled), about ``2.0 + 1.35 (M - 1)`` (the one-row kernel: 2.00); 16-row tiles
2.59 at M = 2 but spill from M = 3. At the H100's bandwidth a code has about 5 instructions of issue time (every
scheduler issuing every cycle), so this is memory-bound up to M = 3-4; ``bench/affine_mv_sweep.py --rows``
times it against ``mmv.py`` to set ``IDOT_ROWS_MAX`` and the tile.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.dependent import dependent_launch, enter, leave_loop
from ...kernels.idot import HIGH_NIBBLES, LOW_NIBBLES, dp2a, pack_pair, round_int
from ...kernels.loads import pinned
from ...kernels.words import half16, word_aligned
from ...runtime import env
from ...runtime.device import device_info
from ...runtime.memory import empty
from . import affine_idot
from .affine_idot import thread_words, x_stats
from .affine_mv import row_tile, split_count, word_planes
from .qmm import SplitK, run_split, store_result


@triton.jit
def _x_chunks(x_ptr, x_off):
    """The four words of each thread's x chunk in ``R`` rows, ``[R, CH, 8]`` fp32 each, with the chunks'
    quantization scales ``inv, scale`` and sums ``[R, CH]`` (``affine_idot.x_stats``)."""
    x0 = tl.load(x_ptr + x_off).to(tl.float32)
    x1 = tl.load(x_ptr + x_off + 8).to(tl.float32)
    x2 = tl.load(x_ptr + x_off + 16).to(tl.float32)
    x3 = tl.load(x_ptr + x_off + 24).to(tl.float32)
    inv, scale, xsum = x_stats(x0, x1, x2, x3)
    return x0, x1, x2, x3, inv, scale, xsum


@triton.jit
def _word_pairs(x, inv, ASM: tl.constexpr):
    """``[R, CH, 8]`` fp32 values of one word per row and chunk -> its four int16 pairs ``(p02, p46, p13, p57)``,
    each ``[R, CH]``, quantized with ``inv [R, CH]`` (``idot.word_pairs`` with a leading axis)."""
    q0, q1, q2, q3, q4, q5, q6, q7 = word_planes(round_int(x, inv[:, :, None]))
    return pack_pair(q0, q2, ASM), pack_pair(q4, q6, ASM), pack_pair(q1, q3, ASM), pack_pair(q5, q7, ASM)


@triton.jit
def _word_dot(w, x, inv, even, odd16, ASM: tl.constexpr):
    """``(even, odd16) [R, CH, BN]`` plus the integer dot of word ``w [CH, BN]`` with the x word ``x [R, CH, 8]``
    of every row (quantized here with ``inv``), as ``idot.word_idot``; the ``dp2a`` operands broadcast to
    ``[R, CH, BN]``."""
    shape: tl.constexpr = even.shape
    p02, p46, p13, p57 = _word_pairs(x, inv, ASM)
    lo = tl.broadcast_to((w & LOW_NIBBLES)[None, :, :], shape)
    hi = tl.broadcast_to((w & HIGH_NIBBLES)[None, :, :], shape)
    even = dp2a(tl.broadcast_to(p02[:, :, None], shape), lo, even, False, ASM)
    even = dp2a(tl.broadcast_to(p46[:, :, None], shape), lo, even, True, ASM)
    odd16 = dp2a(tl.broadcast_to(p13[:, :, None], shape), hi, odd16, False, ASM)
    odd16 = dp2a(tl.broadcast_to(p57[:, :, None], shape), hi, odd16, True, ASM)
    return even, odd16


@triton.jit
def _part_step(acc, w0, w1, w2, w3, S, B, x_ptr, c_off, stride_x, ROW0: tl.constexpr, ASM: tl.constexpr):
    """``acc [R, CH, BN]`` + one loop step of the x rows ``ROW0 .. ROW0 + R - 1`` (at ``x_ptr + row * stride_x
    + c_off``, ``c_off [CH, 8]``: word 0 of each chunk) against the words ``w0 .. w3 [CH, BN]`` of each
    thread's chunk and their fp32 scales / biases ``S, B [1, CH, BN]``."""
    R: tl.constexpr = acc.shape[0]
    x_off = (tl.arange(0, R) + ROW0)[:, None, None] * stride_x + c_off[None, :, :]
    x0, x1, x2, x3, inv, scale, xsum = _x_chunks(x_ptr, x_off)
    zero = tl.zeros(acc.shape, dtype=tl.int32)
    even, odd16 = _word_dot(w0, x0, inv, zero, zero, ASM)
    even, odd16 = _word_dot(w1, x1, inv, even, odd16, ASM)
    even, odd16 = _word_dot(w2, x2, inv, even, odd16, ASM)
    even, odd16 = _word_dot(w3, x3, inv, even, odd16, ASM)
    dot = (even * 16 + odd16).to(tl.float32)  # 16 x the chunk's integer dot
    acc = tl.fma(S * (scale * 0.0625)[:, :, None], dot, acc)
    return tl.fma(B, xsum[:, :, None], acc)


@triton.jit
def _tiles(w_ptr, s_ptr, b_ptr, w_off, s_off):
    """One step's words ``[4 * CH, BN]`` and scales / biases ``[1, CH, BN]``, the latter loaded as ``[BN, CH]``
    (``s_off``; see the module docstring)."""
    S = tl.trans(tl.load(s_ptr + s_off))[None, :, :]
    B = tl.trans(tl.load(b_ptr + s_off))[None, :, :]
    return tl.load(w_ptr + w_off), S, B


@triton.jit
def _step(acc0, acc1, acc2, acc3, w, S, B, x_ptr, c_off, stride_x, R1: tl.constexpr, R2: tl.constexpr,
          R3: tl.constexpr, ASM: tl.constexpr):
    """The accumulators of the four parts + one loop step: words ``w [4 * CH, BN]``, scales / biases
    ``[1, CH, BN]`` of each chunk, x at ``x_ptr + row * stride_x + c_off``; the parts of 0 rows stay as they
    are."""
    R0: tl.constexpr = acc0.shape[0]
    w0, w1, w2, w3 = thread_words(w)
    S = S.to(tl.float32)
    B = B.to(tl.float32)
    acc0 = _part_step(acc0, w0, w1, w2, w3, S, B, x_ptr, c_off, stride_x, 0, ASM)
    if R1 > 0:
        acc1 = _part_step(acc1, w0, w1, w2, w3, S, B, x_ptr, c_off, stride_x, R0, ASM)
    if R2 > 0:
        acc2 = _part_step(acc2, w0, w1, w2, w3, S, B, x_ptr, c_off, stride_x, R0 + R1, ASM)
    if R3 > 0:
        acc3 = _part_step(acc3, w0, w1, w2, w3, S, B, x_ptr, c_off, stride_x, R0 + R1 + R2, ASM)
    return acc0, acc1, acc2, acc3


@triton.jit
def _store_part(out_ptr, part_ptr, cnt_ptr, acc, cols, col_ok, N, ROW0: tl.constexpr, M: tl.constexpr,
                SPLIT_K: tl.constexpr, FUSE: tl.constexpr):
    """Rows ``ROW0 .. ROW0 + R - 1`` of the result, ``acc [R, CH, BN]`` summed over the chunks, at the output
    columns ``cols [BN]`` (int64; ``col_ok``: inside N); ``cnt_ptr``: the part's counter (FUSE)."""
    R: tl.constexpr = acc.shape[0]
    res = tl.sum(acc, axis=1)
    offs = (tl.arange(0, R) + ROW0).to(tl.int64)[:, None] * N + cols[None, :]
    mask = tl.broadcast_to(col_ok[None, :], res.shape)
    store_result(out_ptr, part_ptr, part_ptr, cnt_ptr, res, res, offs, mask, M * N, SPLIT_K, FUSE, False, 0)


@triton.jit
def part_accs(R0: tl.constexpr, R1: tl.constexpr, R2: tl.constexpr, R3: tl.constexpr, CH: tl.constexpr,
              BN: tl.constexpr):
    """Zero fp32 accumulators ``[R_i, CH, BN]`` of the parts of the rows of x; a part of 0 rows carries a one-row
    placeholder that no step changes."""
    acc0 = tl.zeros([R0, CH, BN], dtype=tl.float32)
    acc1 = tl.zeros([R1 if R1 > 0 else 1, CH, BN], dtype=tl.float32)
    acc2 = tl.zeros([R2 if R2 > 0 else 1, CH, BN], dtype=tl.float32)
    acc3 = tl.zeros([R3 if R3 > 0 else 1, CH, BN], dtype=tl.float32)
    return acc0, acc1, acc2, acc3


@triton.jit
def store_parts(out_ptr, part_ptr, cnt, acc0, acc1, acc2, acc3, pid_n, row_ok, N, R1: tl.constexpr,
                R2: tl.constexpr, R3: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr):
    """Every part's rows of the result (:func:`_store_part`): ``acc0 .. acc3 [R_i, CH, BN]`` of row tile ``pid_n``
    (``row_ok [BN]``), the parts' counters from ``cnt``; parts of 0 rows (``R_i == 0``) store nothing."""
    BN: tl.constexpr = acc0.shape[2]
    R0: tl.constexpr = acc0.shape[0]
    M: tl.constexpr = R0 + R1 + R2 + R3
    cols = pid_n * BN + tl.arange(0, BN).to(tl.int64)
    _store_part(out_ptr, part_ptr, cnt, acc0, cols, row_ok, N, 0, M, SPLIT_K, FUSE)
    if R1 > 0:
        _store_part(out_ptr, part_ptr, cnt + 1, acc1, cols, row_ok, N, R0, M, SPLIT_K, FUSE)
    if R2 > 0:
        _store_part(out_ptr, part_ptr, cnt + 2, acc2, cols, row_ok, N, R0 + R1, M, SPLIT_K, FUSE)
    if R3 > 0:
        _store_part(out_ptr, part_ptr, cnt + 3, acc3, cols, row_ok, N, R0 + R1 + R2, M, SPLIT_K, FUSE)


@triton.jit(do_not_specialize=["steps_per_split"])
def affine_idot_rows_kernel(
    x_ptr,  # [M, K] activations, bf16 or fp16, row stride stride_x
    w_ptr,  # [N, K / 8] int32 words (nibble p of word j: column 8 j + p)
    s_ptr, b_ptr,  # [N, K / GS] scales / biases
    out_ptr,  # [M, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, M, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN) * parts] int32 arrival counters, one per row tile and part (FUSE)
    N, K, stride_x, steps_per_split,
    STRIDE_W: tl.constexpr, STRIDE_S: tl.constexpr, BN: tl.constexpr, CH: tl.constexpr, GS: tl.constexpr,
    EVEN_N: tl.constexpr, PREFETCH: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr, ASM: tl.constexpr,
    R0: tl.constexpr, R1: tl.constexpr = 0, R2: tl.constexpr = 0, R3: tl.constexpr = 0,
    PDL: tl.constexpr = False,
):
    """Steps of ``4 * CH`` words; ``K / 8`` is a whole number of steps and of ``steps_per_split``. The rows of x
    are ``R0 > R1 > R2 > R3`` (powers of two, or 0: no such part), ``M = R0 + R1 + R2 + R3``."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    STEP: tl.constexpr = 4 * CH  # words of a row per loop step
    CPG: tl.constexpr = GS // 32  # x chunks per scale group
    SSTEP: tl.constexpr = STEP * 8 // GS  # scale groups of a row per loop step
    PARTS: tl.constexpr = (R0 > 0) + (R1 > 0) + (R2 > 0) + (R3 > 0)
    rows, row_ok = row_tile(N, BN, EVEN_N)
    c = tl.arange(0, CH)
    # as affine_idot_kernel: [4 * CH, BN] words, contiguous along the row, chunks on consecutive lanes
    w_off = tl.arange(0, 4 * CH)[:, None] + rows[None, :] * STRIDE_W
    s_off = rows[:, None] * STRIDE_S + (c // CPG)[None, :]  # [BN, CH]: chunks last, so that they go to the lanes
    c_off = c[:, None] * 32 + tl.arange(0, 8)[None, :]  # [CH, 8]: word 0 of each chunk
    i_lo = pid_k * steps_per_split
    i_hi = i_lo + steps_per_split
    acc0, acc1, acc2, acc3 = part_accs(R0, R1, R2, R3, CH, BN)
    if PREFETCH:  # the next step's tiles loaded during this one, taken at the top of the next (kernels.loads.pinned);
        # 16-bit scales / biases as the int32 words that hold them (4-byte aligned; the half-select is loop-invariant)
        sw_ptr, bw_ptr = s_ptr.to(tl.pointer_type(tl.int32)), b_ptr.to(tl.pointer_type(tl.int32))
        half = tl.trans((s_off & 1) * 16)[None, :, :]
        sw_off = s_off >> 1
        dt: tl.constexpr = s_ptr.dtype.element_ty  # 16-bit (a 16-bit result: affine_idot.supports)
        w, S, B = _tiles(w_ptr, sw_ptr, bw_ptr, w_off + i_lo * STEP, sw_off + i_lo * (SSTEP // 2))
        for i in range(i_lo, i_hi):
            w_i, S_i, B_i = pinned(w, ASM), pinned(S, ASM), pinned(B, ASM)
            nxt = tl.minimum(i + 1, i_hi - 1)  # the last step reloads itself
            w, S, B = _tiles(w_ptr, sw_ptr, bw_ptr, w_off + nxt * STEP, sw_off + nxt * (SSTEP // 2))
            S_i, B_i = half16(S_i, half, dt), half16(B_i, half, dt)
            acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, w_i, S_i, B_i, x_ptr + i * (STEP * 8), c_off,
                                           stride_x, R1, R2, R3, ASM)
    else:
        w, S, B = _tiles(w_ptr, s_ptr, b_ptr, w_off + i_lo * STEP, s_off + i_lo * SSTEP)
        acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, w, S, B, x_ptr + i_lo * (STEP * 8), c_off, stride_x,
                                       R1, R2, R3, ASM)
        for i in range(i_lo + 1, i_hi):
            w, S, B = _tiles(w_ptr, s_ptr, b_ptr, w_off + i * STEP, s_off + i * SSTEP)
            acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, w, S, B, x_ptr + i * (STEP * 8), c_off, stride_x,
                                           R1, R2, R3, ASM)
    leave_loop(PDL)  # PDL 3: the next launch may be scheduled from here
    store_parts(out_ptr, part_ptr, cnt_ptr + pid_n * PARTS, acc0, acc1, acc2, acc3, pid_n, row_ok, N, R1, R2, R3,
                SPLIT_K, FUSE)


# ----------------------------------------------------------------------------- launch plans

# Rows of x taken here: 2 to IDOT_ROWS_MAX, in 8-row weight tiles. H100, session 12 run 5
# (bench/affine_mv_sweep.py --rows), against mmv.py: M 2 / 3 / 4 at 1.34-1.56x / 1.60-2.04x / 1.87-2.21x the one-row
# time (mmv 2.06-2.73x); M 8 spills, 116-118 us against mmv's 42, so M 5-16 stay on mmv.
IDOT_ROWS_MAX = 4
IDOT_ROWS_BN = 8  # weight rows per program
PROGRAMS_PER_SM = 1  # split K only below one program per SM
PREFETCH_ROWS_PER_SM = (12, 24)  # register prefetch with output rows per SM in [lo, hi). Session 30 run 2 (H100,
# M2, us, off / on): K x N 4096 x 2048 5.40 / 4.97, 14336 x 2048 21.0 / 14.9, 2048 x 2048 3.32 / 3.32; fewer rows:
# 4096 x 1024 4.94 / 5.48, 4096 x 512 4.02 / 4.20, 14336 x 1024 9.84 / 10.28; more: 4096 x 4096 7.20 / 7.21,
# 4096 x 6144 11.1 / 14.1 (2048 x 8192 8.73 / 8.45)
MAX_PARTS = 4  # the kernel's row parts (R0 .. R3)


def row_parts(m: int) -> tuple[int, ...]:
    """The kernel's parts of ``m`` rows of x: the powers of two of ``m``'s binary digits, largest first
    (7 -> (4, 2, 1)); at most :data:`MAX_PARTS` of them (``m <= 16``)."""
    parts = tuple(1 << b for b in reversed(range(m.bit_length())) if m >> b & 1)
    if not 0 < len(parts) <= MAX_PARTS:
        raise ValueError(f"affine_idot_rows: {m} rows of x do not fit {MAX_PARTS} power-of-two parts")
    return parts


def supports_rows(bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, out_dtype: torch.dtype, m: int,
                  k: int, words: int) -> bool:
    """``2 <= m <= IDOT_ROWS_MAX`` rows of x where one row would take the integer-dot mat-vec
    (:func:`affine_idot.supports`: MLX affine 4-bit, bf16/fp16 x and result, rows of whole steps;
    ``MLX_NATIVE_AFFINE_IDOT=0`` and ``MLX_NATIVE_AFFINE_MV=0`` turn it off)."""
    return 2 <= m <= IDOT_ROWS_MAX and affine_idot.supports(bits, group_size, transpose, x_dtype, out_dtype, 1, k,
                                                            words, pairs=True)


class RowsLaunch:
    """A multi-row integer-dot mat-vec (:func:`affine_idot_rows_kernel`, ``ggml/q4k_idot_rows.py``) prepared for
    one signature: ``cdiv(n, bn)`` programs of ``bn`` weight rows each run ``steps`` loop steps, split over K
    (the smallest divisor of the steps giving about ``programs`` programs) and summed in the same launch
    (``qmm.SplitK`` with a counter per row tile and part: the plan owns them, so it must not run on two streams
    at once). The kernel takes ``(*inputs, out, part, cnt, *lead_ints, steps_per_split, *tail_ints)``, the
    ``constexprs`` given and BN, CH, EVEN_N, PREFETCH, SPLIT_K, FUSE, ASM, R0-R3, PDL (``trigger``: as
    ``affine_mv.StreamedMvLaunch``'s); :meth:`run` returns ``[m, n]`` of ``out_dtype``."""

    def __init__(self, kernel, m: int, n: int, bn: int, steps: int, warps: int, programs: int, prefetch: bool,
                 lead_ints: tuple, tail_ints: tuple, constexprs: dict, out_dtype: torch.dtype, device,
                 trigger=False):
        parts = row_parts(m)
        tiles = triton.cdiv(n, bn)
        split = split_count(steps, tiles, programs)
        self.m, self.n, self.out_dtype, self.device, self.split = m, n, out_dtype, device, split
        self.ints = (*lead_ints, steps // split, *tail_ints)
        self.splitk = SplitK(split, m, n, False, 0, device, tiles=tiles * len(parts)) if split > 1 else None
        constexprs = dict(constexprs, BN=bn, CH=32 * warps, EVEN_N=n % bn == 0, PREFETCH=prefetch, SPLIT_K=split > 1,
                          FUSE=self.splitk is not None and self.splitk.fused, ASM=not env.settings.triton_interpret,
                          **{f"R{i}": parts[i] if i < len(parts) else 0 for i in range(4)})  # all: Launch passes
        # every constexpr to the compiled kernel, defaults included
        self.launch = dependent_launch(kernel, (tiles, split), constexprs, device, trigger, num_warps=warps,
                                       num_stages=1)

    def run(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.out_dtype, device=self.device)
        return run_split(self.launch, self.splitk, inputs, out, self.ints)


class AffineIdotRowsLaunch(RowsLaunch):
    """:func:`affine_idot_rows_kernel` for ``(x [m, k] with row stride stride_x, w [n, k / 8] int32, scales,
    biases [n, k / group_size])``, weights contiguous; calls return ``[m, n]`` of ``out_dtype``. Loop steps of
    ``1024 warps`` values, split over K to about ``programs_per_sm`` programs per SM (:class:`RowsLaunch`).
    ``bn``, ``warps``, ``programs_per_sm``, ``prefetch``: the sweep's knobs (0 / None: the module's rules)."""

    def __init__(self, m: int, n: int, k: int, group_size: int, out_dtype: torch.dtype, stride_x: int, device,
                 bn: int = 0, warps: int = 0, programs_per_sm: int = 0, prefetch: Optional[bool] = None):
        sms = device_info(device).sm_count
        warps = warps or affine_idot.step_warps(k)
        if prefetch is None:
            prefetch = PREFETCH_ROWS_PER_SM[0] * sms <= n < PREFETCH_ROWS_PER_SM[1] * sms
        self.prefetch = prefetch  # scales / biases then read as int32 words: 4-byte aligned
        super().__init__(affine_idot_rows_kernel, m, n, bn or IDOT_ROWS_BN, k // 8 // (128 * warps), warps,
                         (programs_per_sm or PROGRAMS_PER_SM) * sms, prefetch, (n, k, stride_x), (),
                         dict(STRIDE_W=k // 8, STRIDE_S=k // group_size, GS=group_size), out_dtype, device,
                         trigger="late")

    def __call__(self, x, w, s, b, *unused) -> torch.Tensor:
        if self.prefetch:
            s, b = word_aligned(s), word_aligned(b)
        return self.run(x, w, s, b)
