"""Decode mat-vec for MLX affine 4-bit weights and one row of x, by integer dot products.

``out[n] = sum_g S[n, g] * sum_{k in g} q[n, k] x[k] + B[n, g] * sum_{k in g} x[k]``

Like ``affine_mv.py`` this streams the packed weights at memory bandwidth, but the inner product runs on
integers (``kernels/idot.py``): x is quantized per chunk of 32 values to int16 with a power-of-two scale,
and ``dp2a`` multiplies two codes by two x values per instruction, so a code costs about one instruction
instead of three (extract, convert, FMA).

Tiles are ``[4 * CH, BN]`` words: each thread owns 4 consecutive words (one 16-byte load, 32 codes, one
x chunk) of every one of the program's ``BN`` rows, the ``CH`` chunks of a loop step lie on consecutive
lanes (``CH`` = 32 x warps, so a step is ``4 * CH`` words of each row). A thread quantizes its own chunk
of x (no reduction across lanes) and reuses it for its ``BN`` rows. Per chunk and row: 16 ``dp2a`` into
two int32 sums, then ``acc += (S * scale / 16) * float(16 even + odd16) + B * sum(x)`` in fp32 (the
chunk's float sum keeps Inf / NaN of x). Optional register prefetch of the next step's words, scales and
biases as in ``affine_mv.py``; a K split is summed in the launch by the last split to arrive
(``qmm.store_result``). Offline sm_90 SASS (Triton 3.6, ``scripts/sass_probe.py``): 2.1 instructions per
code with 8-row tiles, 2.9 with 4 (x's quantization is shared by fewer rows), no shared memory in the loop.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter
from ...kernels.idot import chunk_scale, word_idot, word_pairs
from ...kernels.loads import load_or_zero, pinned
from ...kernels.words import half16, word_aligned, word_ptrs
from ...kernels.norm_handoff import handoff_rstd
from .affine_mv import row_tile
from .qmm import store_or_hand_off


@triton.jit
def x_stats(x0, x1, x2, x3):
    """``(inv, scale, xsum)`` of the x chunks whose four words are ``x0 .. x3`` (fp32, ``[..., 8]``): the int16
    quantization scales and the float sums, over the last axis."""
    amax = tl.maximum(tl.maximum(tl.max(tl.abs(x0), axis=-1), tl.max(tl.abs(x1), axis=-1)),
                      tl.maximum(tl.max(tl.abs(x2), axis=-1), tl.max(tl.abs(x3), axis=-1)))
    xsum = (tl.sum(x0, axis=-1) + tl.sum(x1, axis=-1)) + (tl.sum(x2, axis=-1) + tl.sum(x3, axis=-1))
    inv, scale = chunk_scale(amax)
    return inv, scale, xsum


@triton.jit
def thread_words(w):
    """``[4 * CH, BN]`` -> the four ``[CH, BN]`` words of each thread's chunk (``[4 * CH, G, R]`` -> ``[CH, G, R]``,
    ``ggml/q6k_idot.py``)."""
    C: tl.constexpr = w.shape[0] // 4
    A: tl.constexpr = w.shape[1]
    if len(w.shape) == 2:
        w = tl.permute(tl.reshape(w, (C, 4, A)), (0, 2, 1))
        e, o = tl.split(tl.reshape(w, (C, A, 2, 2)))  # words 0 2 / 1 3
    else:
        B: tl.constexpr = w.shape[2]
        w = tl.permute(tl.reshape(w, (C, 4, A, B)), (0, 2, 3, 1))
        e, o = tl.split(tl.reshape(w, (C, A, B, 2, 2)))
    w0, w2 = tl.split(e)
    w1, w3 = tl.split(o)
    return w0, w1, w2, w3


@triton.jit
def _chunk_dot(w, x, inv, even, odd16, ASM: tl.constexpr):
    """``word_idot`` of word ``w [CH, BN]`` with the x word ``x [CH, 8]`` (quantized here with ``inv``)."""
    p02, p46, p13, p57 = word_pairs(x, inv)
    return word_idot(w, p02[:, None], p46[:, None], p13[:, None], p57[:, None], even, odd16, ASM)


@triton.jit
def step_x(acc, w, S, B, x0, x1, x2, x3, ASM: tl.constexpr):
    """``acc [CH, BN]`` + one loop step: words ``w [4 * CH, BN]``, scales / biases ``[CH, BN]`` of each chunk,
    the four x words ``x0 .. x3 [CH, 8]`` (fp32) of each chunk."""
    inv, scale, xsum = x_stats(x0, x1, x2, x3)
    w0, w1, w2, w3 = thread_words(w)
    zero = tl.zeros(acc.shape, dtype=tl.int32)
    even, odd16 = _chunk_dot(w0, x0, inv, zero, zero, ASM)
    even, odd16 = _chunk_dot(w1, x1, inv, even, odd16, ASM)
    even, odd16 = _chunk_dot(w2, x2, inv, even, odd16, ASM)
    even, odd16 = _chunk_dot(w3, x3, inv, even, odd16, ASM)
    dot = (even * 16 + odd16).to(tl.float32)  # 16 x the chunk's integer dot
    acc = tl.fma(S.to(tl.float32) * (scale * 0.0625)[:, None], dot, acc)
    return tl.fma(B.to(tl.float32), xsum[:, None], acc)


@triton.jit
def _x_words(x_ptr, x_off, mask=None):
    """The four x words ``[CH, 8]`` (fp32) of each chunk at ``x_ptr + x_off`` (word 0 of each chunk; ``mask
    [CH, 1]``: chunks to load, 0 elsewhere)."""
    return (load_or_zero(x_ptr + x_off, mask).to(tl.float32), load_or_zero(x_ptr + x_off + 8, mask).to(tl.float32),
            load_or_zero(x_ptr + x_off + 16, mask).to(tl.float32),
            load_or_zero(x_ptr + x_off + 24, mask).to(tl.float32))


@triton.jit
def _step(acc, w, S, B, x_ptr, x_off, ASM: tl.constexpr, x_mask=None):
    """:func:`step_x` with x at ``x_ptr + x_off`` (:func:`_x_words`)."""
    x0, x1, x2, x3 = _x_words(x_ptr, x_off, x_mask)
    return step_x(acc, w, S, B, x0, x1, x2, x3, ASM)


@triton.jit
def _tiles(wp, sp, bp, wup, sup, bup, dw, ds, HAS_UP: tl.constexpr):
    """One step's words ``[4 * CH, BN]`` at ``wp + dw`` and scales / biases ``[CH, BN]`` at ``sp + ds`` /
    ``bp + ds``; with HAS_UP the gate's and the up projection's rows interleaved, ``[.., 2 * BN]`` (gate row r at
    column 2 r, up row r at 2 r + 1).

    In this kernel ``wp .. bup`` are the pointer tiles of the first step, ``dw`` / ``ds`` the step's scalar
    offsets (``moe/idot.py`` passes base pointers and offset tiles instead, as measured there): with the
    offset added to a loop-invariant pointer tile, ptxas issues every load of a step before the step's first
    ``dp2a`` (one memory latency per step). Added to the offset tile first (``w_ptr + (w_off + i * STEP)``) the
    scales' loads went after the words' first use (two latencies per step: 14336 x 4096 at 18.4 instead of
    15.6 us on the H100, session 18; offline SASS: 64 instead of 96 registers)."""
    w = tl.load(wp + dw)
    S = tl.load(sp + ds)
    B = tl.load(bp + ds)
    if HAS_UP:
        w = tl.reshape(tl.join(w, tl.load(wup + dw)), (w.shape[0], 2 * w.shape[1]))
        S = tl.reshape(tl.join(S, tl.load(sup + ds)), (S.shape[0], 2 * S.shape[1]))
        B = tl.reshape(tl.join(B, tl.load(bup + ds)), (B.shape[0], 2 * B.shape[1]))
    return w, S, B


@triton.jit
def _half_of(sw, half, HAS_UP: tl.constexpr, DT: tl.constexpr):
    """The 16-bit values of type ``DT`` in half ``half`` (0 or 16, ``[CH, BN]``) of the words ``sw`` (``[CH, BN]``,
    or ``[CH, 2 BN]`` gate / up interleaved with HAS_UP)."""
    if HAS_UP:
        half = tl.reshape(tl.join(half, half), sw.shape)
    return half16(sw, half, DT)


@triton.jit
def masked_tiles(w_ptr, s_ptr, b_ptr, wu_ptr, su_ptr, bu_ptr, w_off, s_off, w_ok, s_ok, HAS_UP: tl.constexpr):
    """:func:`_tiles` at ``w_ptr + w_off`` / ``s_ptr + s_off`` ... with the words past the row (``w_ok [4 * CH,
    1]``, ``s_ok [CH, 1]``) read as 0."""
    w = tl.load(w_ptr + w_off, mask=w_ok, other=0)
    S = tl.load(s_ptr + s_off, mask=s_ok, other=0.0)
    B = tl.load(b_ptr + s_off, mask=s_ok, other=0.0)
    if HAS_UP:
        w = tl.reshape(tl.join(w, tl.load(wu_ptr + w_off, mask=w_ok, other=0)), (w.shape[0], 2 * w.shape[1]))
        S = tl.reshape(tl.join(S, tl.load(su_ptr + s_off, mask=s_ok, other=0.0)), (S.shape[0], 2 * S.shape[1]))
        B = tl.reshape(tl.join(B, tl.load(bu_ptr + s_off, mask=s_ok, other=0.0)), (B.shape[0], 2 * B.shape[1]))
    return w, S, B


@triton.jit(do_not_specialize=["steps_per_split"])
def affine_idot_kernel(
    x_ptr,  # [K] activations, bf16 or fp16
    w_ptr,  # [N, K / 8] int32 words (nibble p of word j: column 8 j + p)
    s_ptr, b_ptr,  # [N, K / GS] scales / biases
    wu_ptr, su_ptr, bu_ptr,  # the up projection's, same shapes (HAS_UP: out = act(x W^T) * (x Wu^T))
    out_ptr,  # [N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, N] fp32 partials (SPLIT_K)
    cnt_ptr,  # [cdiv(N, BN)] int32 arrival counters (FUSE)
    N, K, steps_per_split,
    res_ptr, nw_ptr, scaled_ptr,  # NORM_OUT: [N] residual, [N] norm weight, [N] h * (weight + w_offset)
    parts_ptr,  # NORM_OUT: [tiles] fp32 sums of h^2 (written); NORM_IN: [NPARTS] (read)
    eps, w_offset,  # NORM_IN / NORM_OUT
    STRIDE_W: tl.constexpr, STRIDE_S: tl.constexpr, BN: tl.constexpr, CH: tl.constexpr, GS: tl.constexpr,
    EVEN_N: tl.constexpr, PREFETCH: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr, ASM: tl.constexpr,
    HAS_UP: tl.constexpr = False, ACT: tl.constexpr = 0,
    NORM_OUT: tl.constexpr = False,  # hand off a norm: out = h = out + residual, normed = h * w, parts of sum(h^2)
    NORM_IN: tl.constexpr = False, PARTS: tl.constexpr = 1, NPARTS: tl.constexpr = 1,  # x is a handed-off h * w
    PDL: tl.constexpr = False, TAIL: tl.constexpr = 0, S_WORDS: tl.constexpr = False,
):  # S_WORDS (with PREFETCH): 16-bit scales / biases as int32 words, 4-byte aligned
    """Steps of ``4 * CH`` words: ``steps_per_split`` whole ones, then (``TAIL``, unsplit K, no ``HAS_UP``) one step
    of only its first ``TAIL`` words, loaded with the first step's."""
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    STEP: tl.constexpr = 4 * CH  # words of a row per loop step
    CPG: tl.constexpr = GS // 32  # x chunks per scale group
    rows, row_ok = row_tile(N, BN, EVEN_N)
    c = tl.arange(0, CH)
    # [4 * CH, BN]: contiguous along the row, so each thread's 4 words are one 16-byte load and the
    # chunks of a step lie on consecutive lanes; rows last (in registers), as for the scales [CH, BN]
    w_off = tl.arange(0, 4 * CH)[:, None] + rows[None, :] * STRIDE_W
    s_off = (c // CPG)[:, None] + rows[None, :] * STRIDE_S
    x_off = c[:, None] * 32 + tl.arange(0, 8)[None, :]  # [CH, 8]: word 0 of each chunk
    i_lo = pid_k * steps_per_split
    i_hi = i_lo + steps_per_split
    SSTEP: tl.constexpr = STEP * 8 // GS  # scale groups of a row per loop step
    acc = tl.zeros([CH, 2 * BN if HAS_UP else BN], dtype=tl.float32)
    wp, sp, bp = w_ptr + w_off, s_ptr + s_off, b_ptr + s_off  # the first step's pointer tiles (see _tiles)
    wup, sup, bup = wu_ptr + w_off, su_ptr + s_off, bu_ptr + s_off
    if not PREFETCH:
        w, S, B = _tiles(wp, sp, bp, wup, sup, bup, i_lo * STEP, i_lo * SSTEP, HAS_UP)
    if TAIL:  # the row's last, partial step: its words, scales and biases in flight with the first step's
        tail_chunk = (c < TAIL // 4)[:, None]
        w_t, S_t, B_t = masked_tiles(wp, sp, bp, wup, sup, bup, i_hi * STEP, i_hi * SSTEP,
                                     (tl.arange(0, 4 * CH) < TAIL)[:, None], tail_chunk, False)
    if NORM_IN:  # read while the first weights are in flight
        rstd = handoff_rstd(parts_ptr, K, eps, PARTS, NPARTS)
    if PREFETCH:  # the next step's tiles loaded during this one, taken at the top of the next (kernels.loads.pinned)
        SW: tl.constexpr = S_WORDS and s_ptr.dtype.element_ty.primitive_bitwidth == 16
        if SW:  # 16-bit scales / biases as the int32 words holding them (each half-select is loop-invariant)
            half = (s_off & 1) * 16
            sp, bp = word_ptrs(s_ptr, s_off), word_ptrs(b_ptr, s_off)
            sup, bup = word_ptrs(su_ptr, s_off), word_ptrs(bu_ptr, s_off)
        ds_scale: tl.constexpr = 2 if SW else 1
        w, S, B = _tiles(wp, sp, bp, wup, sup, bup, i_lo * STEP, i_lo * SSTEP // ds_scale, HAS_UP)
        for i in range(i_lo, i_hi):
            w_i, S_i, B_i = pinned(w, ASM), pinned(S, ASM), pinned(B, ASM)
            nxt = tl.minimum(i + 1, i_hi - 1)  # the last step reloads itself
            w, S, B = _tiles(wp, sp, bp, wup, sup, bup, nxt * STEP, nxt * SSTEP // ds_scale, HAS_UP)
            if SW:
                S_i = _half_of(S_i, half, HAS_UP, s_ptr.dtype.element_ty)
                B_i = _half_of(B_i, half, HAS_UP, s_ptr.dtype.element_ty)
            acc = _step(acc, w_i, S_i, B_i, x_ptr + i * (STEP * 8), x_off, ASM)
    else:
        acc = _step(acc, w, S, B, x_ptr + i_lo * (STEP * 8), x_off, ASM)
        for i in range(i_lo + 1, i_hi):
            w, S, B = _tiles(wp, sp, bp, wup, sup, bup, i * STEP, i * SSTEP, HAS_UP)
            acc = _step(acc, w, S, B, x_ptr + i * (STEP * 8), x_off, ASM)
    if TAIL:
        acc = _step(acc, w_t, S_t, B_t, x_ptr + i_hi * (STEP * 8), x_off, ASM, tail_chunk)
    res = tl.sum(acc, axis=0)
    res_up = res
    if HAS_UP:
        res, res_up = tl.split(tl.reshape(res, (BN, 2)))
    if NORM_IN:  # the norm's 1 / rms is a factor of the whole (linear) product
        res = res * rstd
        res_up = res_up * rstd
    store_or_hand_off(out_ptr, part_ptr, cnt_ptr + pid_n, res, res_up, pid_n * BN + tl.arange(0, BN).to(tl.int64),
                      row_ok, N, res_ptr, nw_ptr, scaled_ptr, parts_ptr + pid_n, w_offset, SPLIT_K, FUSE, HAS_UP, ACT,
                      NORM_OUT)


# ----------------------------------------------------------------------------- launch plans

from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from . import affine_mv  # noqa: E402
from ...kernels import idot  # noqa: E402

# From the H100 sweeps (bench/affine_mv_sweep.py --kernel idot, bench/results/2026-11-22-h100-session8/): 4-row
# tiles of 2 warps, no K split and no register prefetch were within 5% of the best configuration on every 8B
# shape (4096 x 14336 14.8 us, 14336 x 4096 15.6, 4096 x 4096 6.6); prefetch paid only with few tiles per SM
# (4096 x 1024, 256 tiles: 3.77 against 3.95 us) and cost 5-15% elsewhere.
IDOT_BN = 4  # rows per program
IDOT_MAX_WARPS = 2  # a loop step is 128 words of each row per warp
PROGRAMS_PER_SM = 1  # split K only below one program per SM
# Register prefetch (the next step's tiles loaded during this one) on rows of several steps. Until session 29 the
# copies into the loop's registers sat at the end of each step, right after the loads they wait for (the prefetch
# hid nothing: 5-15% slower than none, session 8), so it ran only below 4 row tiles per SM; taken at the top of the
# next step (kernels.loads.pinned), session 29 run 7 (H100, us, none -> prefetch): 14336 x 4096 14.4 -> 13.9, with
# 16-bit scales / biases as int32 words 13.6 (``PREFETCH_S_WORDS``; rows of a partial step lost with the words:
# 11008 x 4096 12.1 -> 12.6, 5376 x 4096 7.5 -> 7.75, so those keep 16-bit loads), 11008 x 4096 12.5 -> 12.1.
PREFETCH_S_WORDS = True  # prefetched 16-bit scales / biases loaded as the int32 words that hold them (no TAIL)
# Gate/up pairs (scripts/glu_probe.py, bench/results/2026-11-22-h100-session9/): 2 rows of each projection per
# program, the same 4 rows per tile as a single matrix. K 4096 x I 14336: 25.2 us against 27.1 with 4 + 4 rows
# and 28.5 for the [2 I, K] mat-vec plus silu_mul.
IDOT_GLU_BN = 2
# Whole-row steps (bench/results/2026-11-26-session25, runs 3-4, H100, us, default -> whole row): a row of 256, 512 or
# 1024 words is one loop step of 2, 4 or 8 warps, so a program issues all its loads at once; 8-row tiles where that
# still gives a tile per SM. K x N 4096 x 1024 3.34 -> 2.73 (4 rows), 4096 x 4096 5.88 -> 5.28, 4096 x 14336 14.16 ->
# 13.96, 2048 x 8192 5.78 -> 5.17, 8192 x 8192 17.04 -> 16.64, 8192 x 2048 7.84 -> 5.40; beyond 32 tiles per SM
# (the 128k-vocab head, 4096 x 128256: 97.7 -> 98.6) the 2-warp steps stay. 14336 (1792 words) has no whole-row step.
WHOLE_ROW_WORDS = (256, 512, 1024)
WHOLE_ROW_BN = 8
WHOLE_ROW_MAX_TILES_PER_SM = 32
# Rows of no whole number of 128-word steps (any whole number of 32-column chunks from 1024 columns on) end in a
# partial step (the kernel's TAIL), of steps of up to PARTIAL_MAX_WARPS warps; before session 25 they ran
# affine_mv. Run 11 (H100, us, affine_mv -> here): K x N 11008 x 4096 (Llama-2-7B's down projection) 40.6 -> 12.4,
# 5376 x 4096 14.0 -> 7.5, 5376 x 21504 39.8 -> 28.6, 2880 x 2880 9.2 -> 4.3, 1536 x 576 3.2 -> 2.0.
PARTIAL_MAX_WARPS = 2
# Long rows and fewer than FEW_TILES_PER_SM 4-row tiles per SM: 8-warp steps (run 10: 14336 x 1024, 1.9 tiles per
# SM, 9.50 -> 5.58 us; 14336 x 4096, 7.8 tiles per SM, stays at 2 warps: 14.9 against 15.9-16.1)
FEW_TILES_PER_SM = 4


def step_warps(k: int) -> int:
    """Warps for rows of ``k`` columns (``kernels.idot.step_warps``; 128 words of a row per warp and step)."""
    return idot.step_warps(k // 8, 128, IDOT_MAX_WARPS)


def tile_shape(n: int, k: int, sms: int) -> tuple[int, int]:
    """``(rows per program, warps)`` of an ``n x k`` matrix on ``sms`` SMs: whole-row steps (see
    ``WHOLE_ROW_WORDS``) where they apply, with ``WHOLE_ROW_BN`` rows when that gives a tile per SM; else
    ``IDOT_BN`` rows and :func:`step_warps` (8 warps for long rows of few tiles, ``PARTIAL_MAX_WARPS`` for rows of no
    whole step). (Not for gate/up pairs: with whole-row steps the 8B-shaped MLX decode lost 3%, session 25 run 5:
    2760 against 2844-2853 tok/s; plain matrices only: 2863.)"""
    words = k // 8
    if words in WHOLE_ROW_WORDS and triton.cdiv(n, WHOLE_ROW_BN) <= WHOLE_ROW_MAX_TILES_PER_SM * sms:
        return (WHOLE_ROW_BN if triton.cdiv(n, WHOLE_ROW_BN) >= sms else IDOT_BN), words // 128
    if words >= 1024 and triton.cdiv(n, IDOT_BN) < FEW_TILES_PER_SM * sms:
        return IDOT_BN, 8
    return IDOT_BN, step_warps(k) or min(PARTIAL_MAX_WARPS, words // 128)


def supports(bits: int, group_size: int, transpose: bool, x_dtype: torch.dtype, out_dtype: torch.dtype, m: int,
             k: int, words: int, pairs: bool = False) -> bool:
    """``affine_mv.one_row_call`` (one row of bf16/fp16 x, MLX affine 4-bit), with a bf16/fp16 result (fp32
    scales ask for an fp32 result, which x's int16 quantization would not meet) and rows of at least one 128-word
    step, whole 32-column chunks (a partial last step); ``pairs``: for gate/up pairs (``act``) and the multi-row
    kernel, which take rows of whole steps only. ``MLX_NATIVE_AFFINE_IDOT=0`` turns it off."""
    steps = step_warps(k) > 0 or not pairs and k % 32 == 0 and k // 8 >= 128
    return (env.settings.affine_idot and out_dtype != torch.float32 and steps
            and affine_mv.one_row_call(bits, group_size, transpose, x_dtype, m, words))


class AffineIdotLaunch(affine_mv.HandoffMvLaunch):
    """:func:`affine_idot_kernel` for ``(x [1, k], w [n, k / 8] int32, scales, biases [n, k / group_size])``,
    all contiguous. With ``act`` (an activation code of ``qmm.ACT_CODES``) calls take the up projection's
    ``(w_up, scales_up, biases_up)`` too and return ``act(x W^T) * (x Wu^T)``; K is not split then."""

    def __init__(self, n: int, k: int, group_size: int, out_dtype: torch.dtype, device, bn: int = 0,
                 warps: int = 0, programs_per_sm: int = 0, prefetch: Optional[bool] = None,
                 act: Optional[int] = None, hand_off: bool = False, take_parts: int = 0):
        """``hand_off``: the producer of a norm handoff (:meth:`hand_off`); ``take_parts``: a consumer of a handoff
        with this many parts (:meth:`take`)."""
        sms = device_info(device).sm_count
        auto_bn, auto_warps = tile_shape(n, k, sms) if act is None else (IDOT_GLU_BN, step_warps(k))
        bn, warps = bn or auto_bn, warps or auto_warps
        programs_per_sm = programs_per_sm or PROGRAMS_PER_SM
        step = 128 * warps
        tail = k // 8 % step  # words of a last, partial step (then K is not split)
        if tail and (act is not None or k // 8 < step):
            raise ValueError(f"affine_idot: {warps}-warp steps of a {k}-column row leave a partial step")
        tiles = triton.cdiv(n, bn)
        if prefetch is None:  # rows of several steps (a row of one whole step would only reload it)
            prefetch = k // 8 // step > 1
        self.s_words = prefetch and PREFETCH_S_WORDS and not tail
        constexprs = dict(STRIDE_W=k // 8, STRIDE_S=k // group_size, BN=bn, CH=32 * warps, GS=group_size,
                          EVEN_N=n % bn == 0, PREFETCH=prefetch, ASM=not env.settings.triton_interpret,
                          S_WORDS=self.s_words,
                          HAS_UP=act is not None, TAIL=tail, **self.role_constexprs(hand_off, take_parts, act))
        # gate/up pairs, the handoff producer and rows with a partial step: one program per row tile (no K split)
        target = 1 if act is not None or hand_off or tail else programs_per_sm * sms
        self.tiles = tiles
        super().__init__(affine_idot_kernel, n, tiles, k // 8 // step, 1, target, (n, k), constexprs, out_dtype,
                         device, tail_ints=affine_mv.NO_NORM_ARGS, num_warps=warps, trigger=True)

    def _weights(self, w, s, b, w_up, s_up, b_up) -> tuple:
        """``(w, s, b, w_up, s_up, b_up)`` for the kernel (the up projection's are ``w, s, b`` without one); with
        ``s_words`` the scales / biases 4-byte aligned (:func:`~mlx_native.kernels.words.word_aligned`)."""
        if self.s_words:
            s, b = word_aligned(s), word_aligned(b)
            if w_up is not None:
                s_up, b_up = word_aligned(s_up), word_aligned(b_up)
        if w_up is None:
            w_up, s_up, b_up = w, s, b
        return w, s, b, w_up, s_up, b_up

    def __call__(self, x, w, s, b, w_up=None, s_up=None, b_up=None) -> torch.Tensor:
        return self.run(x, *self._weights(w, s, b, w_up, s_up, b_up))

    def hand_off(self, x, w, s, b, residual, norm_weight,
                 weight_offset: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The producer of a norm handoff (a plan built with ``hand_off``): see
        :meth:`~mlx_native.ops.quant.affine_mv.HandoffMvLaunch.run_hand_off`."""
        return self.run_hand_off((x, *self._weights(w, s, b, None, None, None)), residual, norm_weight,
                                 weight_offset)

    def take(self, scaled, parts, eps: float, w, s, b, w_up=None, s_up=None, b_up=None) -> torch.Tensor:
        """The consumer of a norm handoff (a plan built with ``take_parts``): ``rms_norm(h) * weight`` times
        ``W^T`` (and the up projection's, as :meth:`__call__`) from ``scaled = h * weight`` and ``h``'s parts."""
        return self.run_take(scaled, parts, eps, self._weights(w, s, b, w_up, s_up, b_up))
