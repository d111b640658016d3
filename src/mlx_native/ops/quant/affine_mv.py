"""Decode mat-vec for MLX affine 4-bit weights and one row of x, streamed at memory bandwidth.

``out[n] = sum_g S[n, g] * sum_{k in g} q[n, k] x[k] + B[n, g] * sum_{k in g} x[k]``

Each program owns ``BN`` output features and a K range (``words_per_split`` packed words); a loop
step reads ``WPS`` words of each of its rows. Two things keep the loads in flight:

* register prefetch: the words and scales of step ``j + 1`` are loaded before step ``j`` is
  computed (the last step reloads itself, so no mask is needed), so every warp has a step of
  weights on the way while it decodes the previous one;
* x comes as one 16-byte load per word (its 8 bf16/fp16 values), split into the 8 code planes in
  registers, instead of 8 strided 2-byte gathers.

Decoding, per code: ``(w & (15 << s)) | 0x4B000000`` is the fp32 ``2**23 + q * 2**s`` exactly
(``s`` = 0, 4, ..., 16 for nibbles 0-4 of the word, 4, 8, 12 for nibbles 5-7 read from ``w >> 16``; the
magic number is a runtime argument so that mask and or compile to one LOP3), and one FMA with constants,
``f * 2**-s - 2**(23 - s)``, is ``q`` exactly; a second FMA accumulates ``q * x``. Per word and row:
``acc += S * a + B * xs`` with ``xs`` the sum of the word's 8 x values (shared by all rows of a
thread). Split K: the fp32 partials are summed in the launch by the last split to arrive
(``qmm.store_result``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter
from .qmm import store_or_hand_off, store_result


@triton.jit
def word_planes(x):
    """``[A, C, 8]`` (the 8 values of each word) -> the 8 ``[A, C]`` planes (value ``p`` of every word)."""
    A: tl.constexpr = x.shape[0]
    C: tl.constexpr = x.shape[1]
    e, o = tl.split(tl.reshape(x, (A, C, 4, 2)))  # values 0 2 4 6 / 1 3 5 7
    e0, e1 = tl.split(tl.reshape(e, (A, C, 2, 2)))  # 0 4 / 2 6
    o0, o1 = tl.split(tl.reshape(o, (A, C, 2, 2)))  # 1 5 / 3 7
    x0, x4 = tl.split(e0)
    x2, x6 = tl.split(e1)
    x1, x5 = tl.split(o0)
    x3, x7 = tl.split(o1)
    return x0, x1, x2, x3, x4, x5, x6, x7


@triton.jit
def code_f32(w, S: tl.constexpr, magic, BITS: tl.constexpr = 4, OFF: tl.constexpr = 0.0):
    """fp32 ``q - OFF`` of the unsigned ``BITS``-bit code at bits ``[S, S + BITS)`` of ``w`` (``S + BITS <= 23``),
    exactly (``magic``: 0x4B000000 as a runtime value, so that mask and or are one LOP3 with a register operand;
    the or makes the fp32 ``2**23 + q 2**S``, one FMA scales it back and subtracts ``2**23`` and ``OFF``, exact
    for the small integer offsets of the formats)."""
    f = ((w & (((1 << BITS) - 1) << S)) | magic).to(tl.float32, bitcast=True)
    return tl.fma(f, 1.0 / (1 << S), -(8388608.0 / (1 << S) + OFF))


@triton.jit
def _word_dot(w, x0, x1, x2, x3, x4, x5, x6, x7, magic):
    """``[WPG, G, BN]`` sum over the 8 codes of each word of ``q_p * x_p`` (x planes ``[WPG, G]``)."""
    hi = w >> 16
    a = code_f32(w, 0, magic) * x0[:, :, None]
    a = tl.fma(code_f32(w, 4, magic), x1[:, :, None], a)
    a = tl.fma(code_f32(w, 8, magic), x2[:, :, None], a)
    a = tl.fma(code_f32(w, 12, magic), x3[:, :, None], a)
    a = tl.fma(code_f32(w, 16, magic), x4[:, :, None], a)
    a = tl.fma(code_f32(hi, 4, magic), x5[:, :, None], a)
    a = tl.fma(code_f32(hi, 8, magic), x6[:, :, None], a)
    a = tl.fma(code_f32(hi, 12, magic), x7[:, :, None], a)
    return a


@triton.jit
def row_tile(N, BN: tl.constexpr, EVEN_N: tl.constexpr):
    """``(rows, row_ok)``: the ``BN`` output rows of this program (axis 0) and their mask; in a ragged last tile
    the rows past ``N`` read row 0 instead (their results are not stored)."""
    rows = tl.program_id(0) * BN + tl.arange(0, BN)
    row_ok = rows < N
    if not EVEN_N:
        rows = tl.where(row_ok, rows, 0)
    return rows, row_ok


@triton.jit
def _row_sums(acc, ROWS_AXIS: tl.constexpr):
    """``[BN]`` sums of a 3-d accumulator tile over its axes other than ``ROWS_AXIS`` (0 or 2)."""
    if ROWS_AXIS == 0:
        return tl.sum(tl.sum(acc, axis=2), axis=1)
    else:
        return tl.sum(tl.sum(acc, axis=0), axis=0)


@triton.jit
def store_rows(out_ptr, part_ptr, cnt_ptr, acc0, acc1, acc2, acc3, cols, row_ok, N, MR: tl.constexpr,
               SPLIT_K: tl.constexpr, FUSE: tl.constexpr, ROWS_AXIS: tl.constexpr):
    """``qmm.store_result`` of a streamed mat-vec's fp32 accumulator tiles ``acc_i`` of ``MR`` (1-4) rows of x (the
    output rows along axis ``ROWS_AXIS``, 0 or 2), summed, at the program's columns ``cols`` (int64) of an output
    ``[MR, N]`` (a K split's partials ``[split, MR, N]``, one arrival counter ``cnt_ptr`` for all rows): two rows are
    joined as ``[BN, 2]``, three or four as ``[BN, 2, 2]`` with row ``i + 2 j`` at ``[:, i, j]`` (row 3 of ``MR = 3``
    not stored)."""
    r0 = _row_sums(acc0, ROWS_AXIS)
    if MR == 1:
        store_result(out_ptr, part_ptr, part_ptr, cnt_ptr, r0, r0, cols, row_ok, N, SPLIT_K, FUSE, False, 0)
    else:
        r1 = _row_sums(acc1, ROWS_AXIS)
        if MR == 2:
            res = tl.join(r0, r1)
            r = tl.arange(0, 2)[None, :]
            offs = r.to(tl.int64) * N + cols[:, None]
            mask = tl.broadcast_to(row_ok[:, None], offs.shape)
        else:
            res = tl.join(tl.join(r0, r1), tl.join(_row_sums(acc2, ROWS_AXIS), _row_sums(acc3, ROWS_AXIS)))
            r = (tl.arange(0, 2)[:, None] + 2 * tl.arange(0, 2)[None, :])[None, :, :]
            offs = r.to(tl.int64) * N + cols[:, None, None]
            mask = row_ok[:, None, None] & (r < MR)
        store_result(out_ptr, part_ptr, part_ptr, cnt_ptr, res, res, offs, mask, MR * N, SPLIT_K, FUSE, False, 0)


@triton.jit
def glu_row_tile(N, BN: tl.constexpr, EVEN_N: tl.constexpr):
    """:func:`row_tile` of a gate/up pair stacked in one ``[2 N, K]`` matrix: the program's ``BN // 2`` outputs
    ``i`` each take gate row ``i`` (even tile rows) and up row ``N + i`` (odd ones); ``EVEN_N``: ``N`` is a multiple
    of ``BN // 2``. Returns ``(rows [BN], row_ok [BN])``; :func:`glu_outputs` gives the result's tiles."""
    j = tl.arange(0, BN)
    out = tl.program_id(0) * (BN // 2) + j // 2
    row_ok = out < N
    if not EVEN_N:
        out = tl.where(row_ok, out, 0)
    return out + (j % 2) * N, row_ok


@triton.jit
def glu_outputs(res, N, BN: tl.constexpr):
    """The results ``res [BN]`` of :func:`glu_row_tile`'s rows -> ``(gate [BN // 2], up [BN // 2], outputs
    [BN // 2] int64, mask)``."""
    gate, up = tl.split(tl.reshape(res, (BN // 2, 2)))
    outs = tl.program_id(0) * (BN // 2) + tl.arange(0, BN // 2)
    return gate, up, outs.to(tl.int64), outs < N


@triton.jit
def store_row_tile(out_ptr, part_ptr, cnt_ptr, res, row_ok, N, res_ptr, nw_ptr, scaled_ptr, parts_ptr, w_offset,
                   BN: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr, NORM_OUT: tl.constexpr,
                   GLU: tl.constexpr, ACT: tl.constexpr):
    """The GGUF integer-dot mat-vecs' epilogue: the program's fp32 results ``res [BN]`` of :func:`row_tile`'s rows
    (``qmm.store_or_hand_off``: stored, split-K partials or a norm handoff's producer tile) or, with ``GLU``, of
    :func:`glu_row_tile`'s (``act(gate) * up`` of its ``BN // 2`` outputs; no K split)."""
    pid_n = tl.program_id(0)
    if GLU:
        res, res2, offs, mask = glu_outputs(res, N, BN)
    else:
        res2, offs, mask = res, pid_n * BN + tl.arange(0, BN).to(tl.int64), row_ok
    store_or_hand_off(out_ptr, part_ptr, cnt_ptr + pid_n, res, res2, offs, mask, N, res_ptr, nw_ptr, scaled_ptr,
                      parts_ptr + pid_n, w_offset, SPLIT_K, FUSE, GLU, ACT, NORM_OUT)


@triton.jit(do_not_specialize=["words_per_split", "magic"])
def affine_mv_kernel(
    x_ptr,  # [K] activations, bf16 or fp16
    w_ptr,  # [N, K / 8] int32 words (nibble p of word j: column 8 j + p)
    s_ptr, b_ptr,  # [N, K / GS] scales / biases
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, K, words_per_split, magic,
    STRIDE_W: tl.constexpr, STRIDE_S: tl.constexpr, BN: tl.constexpr, WPS: tl.constexpr, GS: tl.constexpr,
    EVEN_N: tl.constexpr, PREFETCH: tl.constexpr,
    SPLIT_K: tl.constexpr, FUSE: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """``words_per_split``: a multiple of ``WPS``, and ``K / 8`` a multiple of it (whole steps)."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    WPG: tl.constexpr = GS // 8
    G: tl.constexpr = WPS // WPG
    rows, row_ok = row_tile(N, BN, EVEN_N)
    wi = tl.arange(0, WPG)
    gi = tl.arange(0, G)
    # tiles are [WPG, G, BN]: one word per thread and row, words of a group on adjacent lanes,
    # rows in registers; x as [WPG, G, 8] spreads the same way (no layout conversion)
    w_off = (gi[None, :] * WPG + wi[:, None])[:, :, None] + rows[None, None, :] * STRIDE_W
    s_off = gi[:, None] + rows[None, :] * STRIDE_S  # [G, BN]
    x_off = (gi[None, :, None] * GS + wi[:, None, None] * 8) + tl.arange(0, 8)[None, None, :]
    j_lo = pid_k * words_per_split
    j_hi = tl.minimum(K // 8, j_lo + words_per_split)
    acc = tl.zeros([WPG, G, BN], dtype=tl.float32)
    w = tl.load(w_ptr + w_off + j_lo)
    S = tl.load(s_ptr + s_off + j_lo // WPG)
    B = tl.load(b_ptr + s_off + j_lo // WPG)
    for j in range(j_lo, j_hi, WPS):
        if PREFETCH:
            jn = tl.minimum(j + WPS, j_hi - WPS)
            w_n = tl.load(w_ptr + w_off + jn)
            S_n = tl.load(s_ptr + s_off + jn // WPG)
            B_n = tl.load(b_ptr + s_off + jn // WPG)
        else:
            w = tl.load(w_ptr + w_off + j)
            S = tl.load(s_ptr + s_off + j // WPG)
            B = tl.load(b_ptr + s_off + j // WPG)
        x0, x1, x2, x3, x4, x5, x6, x7 = word_planes(tl.load(x_ptr + 8 * j + x_off).to(tl.float32))
        xs = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))
        a = _word_dot(w, x0, x1, x2, x3, x4, x5, x6, x7, magic)
        acc = tl.fma(S.to(tl.float32)[None, :, :], a, acc)
        acc = tl.fma(B.to(tl.float32)[None, :, :], xs[:, :, None], acc)
        if PREFETCH:
            w = w_n
            S = S_n
            B = B_n
    res = tl.sum(tl.sum(acc, axis=0), axis=0)
    store_result(out_ptr, part_ptr, part_ptr, cnt_ptr + pid_n, res, res, pid_n * BN + tl.arange(0, BN).to(tl.int64),
                 row_ok, N, SPLIT_K, FUSE, False, 0)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...kernels.dependent import dependent_launch  # noqa: E402
from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ...runtime.memory import empty  # noqa: E402
from .qmm import SplitK, run_split  # noqa: E402

# From the H100 sweeps (bench/affine_mv_sweep.py, bench/results/2026-11-22-h100-session4/): 4 warps, register
# prefetch, 128-word steps, 16-row tiles from 4 tiles per SM (8-row tiles below), and a K split only up to
# 2 programs per SM (most 8B-model shapes run unsplit), 4 for long rows (14336 x 4096: 2 splits, 19.0 us
# against 20.4 unsplit; 256-word steps measured 21.8 us there). Rows of 576 columns (8-word steps) measured
# 0.82-0.84x the previous route: rows that take no step of >= 32 words are not taken.
AMV_WARPS = 4
AMV_MAX_WPS = 128  # words per row and loop step
AMV_MIN_WPS = 32
BIG_TILE_PER_SM = 4  # 16-row tiles from this many tiles per SM
PROGRAMS_PER_SM = 2  # split K until about this many programs per SM...
LONG_PROGRAMS_PER_SM = 4  # ... this many from LONG_K columns
LONG_K = 8192
MAGIC = 0x4B000000  # fp32 2**23


def one_row_call(bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, m: int, words: int) -> bool:
    """The calls the one-row MLX 4-bit mat-vecs (this kernel, ``affine_idot``) serve, whatever their rows' steps:
    one row of bf16/fp16 x against MLX affine 4-bit weights (``transpose=True``), groups of 32, 64 or 128;
    ``words``: elements of the packed weight (int32 offsets). ``MLX_NATIVE_AFFINE_MV=0`` turns them off."""
    return (env.settings.affine_mv and bits == 4 and transpose and m == 1 and group_size in (32, 64, 128)
            and x_dtype in (torch.bfloat16, torch.float16) and words < 2**31)


def supports(bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, m: int, k: int, words: int) -> bool:
    """:func:`one_row_call` against rows that split into whole loop steps of this kernel."""
    return one_row_call(bits, group_size, transpose, x_dtype, m, words) and step_words(k, group_size) > 0


def largest_step(units: int, most: int, least: int = 1) -> int:
    """Loop step of a streamed mat-vec whose rows hold ``units`` units: the largest power of two from ``most`` (a
    power of two) down to ``least`` that divides ``units``; 0 when none does."""
    step = most
    while step >= max(least, 1):
        if units % step == 0:
            return step
        step //= 2
    return 0


def step_words(k: int, group_size: int) -> int:
    """Words per loop step for rows of ``k`` columns: the largest power of two up to AMV_MAX_WPS that is a
    multiple of the group's words and divides the row (0 when none of at least AMV_MIN_WPS does)."""
    return largest_step(k // 8, AMV_MAX_WPS, max(AMV_MIN_WPS, group_size // 8))


def split_count(steps: int, tiles: int, target: int) -> int:
    """K splits of a streamed mat-vec: the smallest divisor of ``steps`` giving ``tiles * split >= target``
    programs (all ``steps`` when none does)."""
    return next(d for d in range(1, steps + 1) if steps % d == 0 and (tiles * d >= target or d == steps))


def step_with_tail(units: int, most: int, least: int, tiles, target: int) -> tuple[int, int]:
    """``(units per loop step, units of a last partial step)`` for a streamed mat-vec whose rows hold ``units``:
    the :func:`largest_step` that divides them, except where that is at most ``most / 4`` (or none) or its K split
    (:func:`split_count` for ``target`` programs, ``tiles(step)`` row tiles) runs one step a program: then, for rows
    of at least one ``most`` step, steps of ``most`` and a partial one of the units left. Not where only those
    whole steps of ``most`` would split one a program (and a dividing step exists). The kernel holds the partial
    step's loads in registers through its loop, which costs where whole steps of ``most / 2`` exist.

    H100 session 26 run 2 (us, dividing steps -> with a partial one): Q6_K 11008 x 4096 (1-super-block steps, 43
    K splits) 37.9 -> 24.1, 18944 x 3584 (2-super-block steps, 37 K splits) 52.6 -> 35.2, but 3584 x 18944
    (2-super-block steps, unsplit) 29.1 -> 44.0; Q5_K 11008 x 4096 (1-super-block steps) 36.5 -> 19.5, 3584 x
    18944 (2) 28.5 -> 32.1; Q8_0 11008 x 4096 (4-pair steps) 30.8 -> 25.1, 3584 x 18944 (8) 31.3 -> 35.2.
    Session 27 runs 1-2 (us, with a partial one of one-step splits -> dividing steps): MLX 3-bit 5376 x 4096 (5 K
    splits of one 32-unit step) 14.4 -> 10.6; rows of 1024-2048 features: Q6_K 5376 x 2048 17.5 -> 8.6, 14080 x
    1536 32.9 -> 12.3, Q5_K 11520 x 2048 24.8 -> 16.8, Q8_0 14080 x 1536 18.7 -> 13.8, but Q8_0 17664 x 1024
    16.7 -> 18.1."""
    def one_step_splits(step: int) -> bool:  # a K split of one whole step a program
        steps = units // step
        return steps > 1 and split_count(steps, tiles(step), target) == steps

    step = largest_step(units, most, least)
    if units < most or units % most == 0:
        return step, 0
    if step == 0 or one_step_splits(step) or step <= most // 4 and not one_step_splits(most):
        return most, units % most
    return step, 0


class StreamedMvLaunch:
    """A streamed mat-vec (this kernel, ``ggml/q4k_mv.py``, ``ggml/q4_mv.py``, ...) prepared for one signature and
    ``m`` rows of x: ``tiles`` programs of ``BN`` rows each run ``steps`` loop steps of ``step`` units, split over
    K (the smallest divisor of ``steps`` giving about ``target`` programs) and summed in the same launch
    (``qmm.SplitK``: partials ``[split, m, n]``; the plan owns the arrival counters, one per row tile shared by the
    rows of x, so it must not run on two streams at once). The kernel takes ``(*inputs, out, part, cnt,
    *lead_ints, units_per_split, *tail_ints)`` and the ``PDL`` constexpr (it starts with
    ``kernels.dependent.enter``: on sm_90 a programmatic dependent launch; ``trigger`` True: one that lets the next
    launch be scheduled at its start, ``"late"``: after its main loop (the kernel calls
    ``kernels.dependent.leave_loop``), chosen per kernel from session 22 run 6); calls return ``[m, n]`` of
    ``out_dtype``."""

    def __init__(self, kernel, n: int, tiles: int, steps: int, step: int, target: int, lead_ints: tuple,
                 constexprs: dict, out_dtype: torch.dtype, device, tail_ints: tuple = (MAGIC,), num_warps=AMV_WARPS,
                 trigger=False, m: int = 1):
        split = split_count(steps, tiles, target)
        self.m, self.n, self.out_dtype, self.device, self.split = m, n, out_dtype, device, split
        self.ints = (*lead_ints, steps // split * step, *tail_ints)
        self.splitk = SplitK(split, m, n, False, 0, device, tiles=tiles) if split > 1 else None
        self.launch = dependent_launch(kernel, (tiles, split), dict(
            constexprs, SPLIT_K=split > 1, FUSE=self.splitk is not None and self.splitk.fused), device, trigger,
            num_warps=num_warps, num_stages=1)

    def run(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = empty((self.m, self.n), dtype=self.out_dtype, device=self.device)
        return run_split(self.launch, self.splitk, inputs, out, self.ints)


def x_row_stride_of(kernel: str, m: int, k: int, x_row_stride, rows_max: int, words: bool = False) -> int:
    """The x row stride a streamed mat-vec plan for ``m`` rows of x passes its kernel: ``k`` for one row (one
    compiled variant whatever the caller's stride) or without ``x_row_stride``, else ``x_row_stride``. ``ValueError``
    naming ``kernel`` for ``m`` outside ``1 .. rows_max``, or with ``words`` (x read as int32 words of two values)
    for an odd stride."""
    if not 1 <= m <= rows_max:
        raise ValueError(f"{kernel}: {m} rows of x (1 to {rows_max})")
    stride = k if m == 1 or x_row_stride is None else x_row_stride
    if words and stride % 2:
        raise ValueError(f"{kernel}: x row stride {stride} is odd (x is read in words of two values)")
    return stride


# a norm-handoff kernel's norm arguments (residual, weight, scaled, parts, eps, weight offset), last among its ints,
# in launches that neither hand off nor take a norm (``kernels/norm_handoff.py``)
NO_NORM_ARGS = (0, 0, 0, 0, 0.0, 0.0)


class HandoffMvLaunch(StreamedMvLaunch):
    """A streamed one-row mat-vec whose kernel can hand off a norm or take one (``kernels/norm_handoff.py``; its
    ints end with :data:`NO_NORM_ARGS`): a plan built as the producer (``NORM_OUT``, one program per row tile,
    ``tiles`` of them) runs :meth:`run_hand_off`, one built as a consumer (``NORM_IN``) :meth:`run_take`."""

    tiles: int

    @staticmethod
    def role_constexprs(hand_off: bool, take_parts: int, act) -> dict:
        """The kernel's ``NORM_OUT``, ``NORM_IN``, ``PARTS``, ``NPARTS`` and ``ACT`` constexprs for a plan built as
        a producer (``hand_off``), a consumer of ``take_parts`` parts, and/or with an activation code ``act``."""
        return dict(NORM_OUT=hand_off, NORM_IN=take_parts > 0, PARTS=triton.next_power_of_2(max(take_parts, 1)),
                    NPARTS=max(take_parts, 1), ACT=act or 0)

    def run_hand_off(self, inputs: tuple, residual: torch.Tensor, norm_weight: torch.Tensor,
                     weight_offset: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``h = x @ W^T + residual`` from ``inputs`` (x first) -> ``(h * (norm_weight + weight_offset) [1, n],
        h [1, n], parts [tiles])``, ``parts`` fp32 sums of ``h^2``."""
        h = empty((1, self.n), dtype=self.out_dtype, device=self.device)
        scaled = empty((1, self.n), dtype=self.out_dtype, device=self.device)
        parts = empty((self.tiles,), dtype=torch.float32, device=self.device)
        self.launch(*inputs, h, h, h, *self.ints[:-len(NO_NORM_ARGS)], residual, norm_weight, scaled, parts, 0.0,
                    weight_offset)
        return scaled, h, parts

    def run_take(self, scaled: torch.Tensor, parts: torch.Tensor, eps: float, weights: tuple) -> torch.Tensor:
        """``rms_norm(h) * weight`` times the weights' ``W^T`` from ``scaled = h * weight`` and ``h``'s parts."""
        out = empty((1, self.n), dtype=self.out_dtype, device=self.device)
        return run_split(self.launch, self.splitk, (scaled, *weights), out,
                         (*self.ints[:-len(NO_NORM_ARGS)], 0, 0, 0, parts, eps, 0.0))


class AffineMvLaunch(StreamedMvLaunch):
    """:func:`affine_mv_kernel` for ``(x [1, k], w [n, k / 8] int32, scales, biases [n, k / group_size])``, all
    contiguous (the row strides are compile-time constants)."""

    def __init__(self, n: int, k: int, group_size: int, out_dtype: torch.dtype, device):
        sms = device_info(device).sm_count
        wps = step_words(k, group_size)
        bn = 16 if triton.cdiv(n, 16) >= BIG_TILE_PER_SM * sms else 8
        target = (LONG_PROGRAMS_PER_SM if k >= LONG_K else PROGRAMS_PER_SM) * sms
        super().__init__(affine_mv_kernel, n, triton.cdiv(n, bn), k // 8 // wps, wps, target, (n, k), dict(
            STRIDE_W=k // 8, STRIDE_S=k // group_size, BN=bn, WPS=wps, GS=group_size, EVEN_N=n % bn == 0,
            PREFETCH=True), out_dtype, device)

    def __call__(self, x, w, s, b, *unused) -> torch.Tensor:
        return self.run(x, w, s, b)
