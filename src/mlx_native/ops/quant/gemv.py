"""The mat-vec kernel for one row of x (decode), on packed words, for the formats that matter most:
MLX affine with 2/4/8 bits and GGUF Q4_0, Q4_1, Q8_0, Q4_K, Q5_K.

Decode is bound by the weight bytes only if the dequantization costs a few
instructions per code. Per packed word (an MLX uint32, a 16-bit half of a
Q4_0/Q4_1/Q8_0 block's codes, a 32-bit word of a K-quant chunk) and per code
plane ``p`` (the bits ``[lo, lo + nb)`` of the word):

* the code is masked *in place* and read as a float with the magic-number
  trick: ``(w & (M << lo)) | 0x4B000000`` is ``2**23 + q * 2**lo`` exactly, so one
  LOP3 and one FADD give ``q * 2**lo`` (planes above bit 23 use ``w >> 16`` first);
* the matching ``x`` is pre-scaled by ``2**-lo`` (exact, and shared by all rows
  of the tile), so ``a += q' * x'`` is one FFMA and ``a = sum_p q_p x_p``;
* the word's scale and offset are applied once per word:
  ``acc += S * a + B * sum_p x_p`` (affine: ``S, B = scale, bias``; Q4_0:
  ``d, -8 d``; Q4_1: ``d, m``; Q8_0 (codes xor 0x80): ``d, -128 d``; K-quants:
  per sub-block ``d * sc, -dmin * m``).

That is three instructions per code plus a few per word, all in fp32 with exact
products. Rows come plain (row ``r`` of x) or routed (one row per program: x row
``xrow[r]`` or ``r // x_div`` times expert ``erow[r]``, for MoE decode), with an
optional second weight (fused gate/up) and split K.

Split K: each program stores its fp32 partial tile (and the up projection's) and,
with ``FUSE``, counts in on the arrival counter of its (row, column tile); the
last split to arrive sums the tile's partials (``qmm.splitk_sum``), applies
``act(gate) * up``, stores the output and rearms the counter, in the same launch
(``qmm.SplitK`` owns the counters: one plan must not run on two streams at once).
Without ``FUSE`` a second launch (``qmm.splitk_reduce_kernel``) does that sum.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.dependent import enter, leave_loop
from .qmm import store_result

AFFINE: tl.constexpr = tl.constexpr(-1)
Q4_0: tl.constexpr = tl.constexpr(2)
Q4_1: tl.constexpr = tl.constexpr(3)
Q8_0: tl.constexpr = tl.constexpr(8)
Q4_K: tl.constexpr = tl.constexpr(12)
Q5_K: tl.constexpr = tl.constexpr(13)

GEMV_FORMATS = (2, 3, 8, 12, 13)  # GGUF types with this kernel (plus affine 2/4/8 bits)


@triton.jit
def _code(w, LO: tl.constexpr, NB: tl.constexpr):
    """Bits ``[LO, LO + NB)`` of ``w`` as fp32 ``q * 2**LO`` (``q * 2**(LO - 16)`` above bit 23)."""
    if LO + NB <= 23:
        m: tl.constexpr = ((1 << NB) - 1) << LO
        return ((w & m) | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0
    else:
        m2: tl.constexpr = ((1 << NB) - 1) << (LO - 16)
        return (((w >> 16) & m2) | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0


@triton.jit
def _xscale(LO: tl.constexpr, NB: tl.constexpr):
    if LO + NB <= 23:
        return 1.0 / (1 << LO)
    else:
        return 1.0 / (1 << (LO - 16))


@triton.jit
def _f16(p, mask):
    return tl.load(p.to(tl.pointer_type(tl.uint16)), mask=mask, other=0).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _k_scale(sb_ptr, j, mask):
    """Q4_K/Q5_K six-bit scale and min of sub-block ``j`` (tensor), bytes at ``sb_ptr``."""
    low = j < 4
    bj = tl.load(sb_ptr + j, mask=mask, other=0).to(tl.int32)
    bj4 = tl.load(sb_ptr + j + 4, mask=mask, other=0).to(tl.int32)
    bjm4 = tl.load(sb_ptr + j - 4, mask=mask & (j >= 4), other=0).to(tl.int32)
    sc = tl.where(low, bj & 63, (bj4 & 15) | ((bjm4 >> 6) << 4))
    mn = tl.where(low, bj4 & 63, (bj4 >> 4) | ((bj >> 6) << 4))
    return _code(sc, 0, 8), _code(mn, 0, 8)


@triton.jit
def _ld(ptr, mask, EVEN: tl.constexpr):
    if EVEN:
        return tl.load(ptr)
    else:
        return tl.load(ptr, mask=mask, other=0)


@triton.jit
def _xp(x_row, k, k_hi, EVEN: tl.constexpr):
    if EVEN:
        return tl.load(x_row + k).to(tl.float32)
    else:
        return tl.load(x_row + k, mask=k < k_hi, other=0.0).to(tl.float32)


@triton.jit
def gemv_step(wb, sb, bb_ptr, w_off, s_off, n_ok, c, k0, k_hi, x_row, acc,
              FMT: tl.constexpr, BITS: tl.constexpr, GS: tl.constexpr, EVEN: tl.constexpr):
    """``acc [BN, NW]`` += the contribution of K columns ``k0 ..`` of this step, word by word.

    ``wb``/``sb``/``bb_ptr``: scalar base pointers (expert applied); ``w_off``/``s_off``: int32
    ``[BN, NW]`` offsets of the words (affine: in words; GGUF: in bytes of the word, for
    ``k0 = 0``) and of the per-word scales (affine; GGUF: of the block or super-block).
    """
    if FMT == AFFINE:
        # [BN, G, WPG] words of G groups: scales and biases are loaded once per group
        PER: tl.constexpr = 32 // BITS
        WPG: tl.constexpr = GS // PER
        G: tl.constexpr = c.shape[0] // WPG
        kg = k0 + tl.arange(0, G) * GS  # first column of each group
        wi = tl.arange(0, WPG)
        okg = n_ok[:, None] & (kg < k_hi)[None, :]
        w = _ld(wb + k0 // PER + w_off, okg[:, :, None], EVEN)
        S = _ld(sb + k0 // GS + s_off, okg, EVEN).to(tl.float32)[:, :, None]
        B = _ld(bb_ptr + k0 // GS + s_off, okg, EVEN).to(tl.float32)[:, :, None]
        a = tl.zeros(w.shape, dtype=tl.float32)
        xs = tl.zeros([G, WPG], dtype=tl.float32)
        xk = kg[:, None] + PER * wi[None, :]
        for p in tl.static_range(PER):
            xp = _xp(x_row, xk + p, k_hi, EVEN)
            xs += xp
            a += _code(w, p * BITS, BITS) * (xp * _xscale(p * BITS, BITS))[None, :, :]
        part = S * a + B * xs[None, :, :]
        return acc + tl.reshape(part, acc.shape)
    elif FMT == Q4_0 or FMT == Q4_1 or FMT == Q8_0:
        # [BN, NB, WPB] 16-bit words of NB blocks' codes: Q4_0/Q4_1: 8 per block, nibble p of word i
        # -> value 2i + (p >> 1) + 16 (p & 1); Q8_0: 16 per block, byte p of word i -> value 2i + p
        WPB: tl.constexpr = 16 if FMT == Q8_0 else 8
        TS: tl.constexpr = 34 if FMT == Q8_0 else (18 if FMT == Q4_0 else 20)
        NB: tl.constexpr = c.shape[0] // WPB
        kb = k0 + tl.arange(0, NB) * 32  # first column of each block
        wi = tl.arange(0, WPB)
        okb = n_ok[:, None] & (kb < k_hi)[None, :]
        ok = okb[:, :, None]
        base = (k0 // 32) * TS
        w = _ld((wb + base + w_off).to(tl.pointer_type(tl.uint16)), ok, EVEN).to(tl.int32)
        d = _ld((wb + base + s_off).to(tl.pointer_type(tl.uint16)), okb, EVEN).to(tl.float16, bitcast=True)
        d = d.to(tl.float32)[:, :, None]
        a = tl.zeros(w.shape, dtype=tl.float32)
        xs = tl.zeros([NB, WPB], dtype=tl.float32)
        xk = kb[:, None] + 2 * wi[None, :]  # [NB, WPB]
        if FMT == Q8_0:
            w = w ^ 0x8080  # int8 -> code + 128
            for p in tl.static_range(2):
                xp = _xp(x_row, xk + p, k_hi, EVEN)
                xs += xp
                a += _code(w, 8 * p, 8) * (xp * _xscale(8 * p, 8))[None, :, :]
            part = d * a - (128.0 * d) * xs[None, :, :]
        else:
            for p in tl.static_range(4):
                xp = _xp(x_row, xk + (p >> 1) + 16 * (p & 1), k_hi, EVEN)
                xs += xp
                a += _code(w, 4 * p, 4) * (xp * _xscale(4 * p, 4))[None, :, :]
            if FMT == Q4_0:
                part = d * a - (8.0 * d) * xs[None, :, :]
            else:
                m = _ld((wb + base + s_off + 2).to(tl.pointer_type(tl.uint16)), okb, EVEN)
                m = m.to(tl.float16, bitcast=True).to(tl.float32)[:, :, None]
                part = d * a + m * xs[None, :, :]
        return acc + tl.reshape(part, acc.shape)
    else:  # Q4_K, Q5_K: 32-bit words of 64-value chunks; nibble (t, h) of word i -> value 32h + 4i + t
        # tensors are [BN, NC, 8]: chunk scales are computed once per chunk, not per word
        TS: tl.constexpr = 144 if FMT == Q4_K else 176
        NC: tl.constexpr = c.shape[0] // 8
        chl = tl.arange(0, NC)
        ch = k0 // 64 + chl  # global chunk index [NC]
        wi = tl.arange(0, 8)
        cc = ch % 4
        kb = ch * 64
        okc = n_ok[:, None] & (kb < k_hi)[None, :]  # [BN, NC]
        ok = okc[:, :, None]
        base = (k0 // 256) * TS
        w = _ld((wb + base + w_off).to(tl.pointer_type(tl.int32)), ok, EVEN)  # [BN, NC, 8]
        sbp = wb + base + s_off  # [BN, NC] super-block of each chunk
        d = _ld(sbp.to(tl.pointer_type(tl.uint16)), okc, EVEN).to(tl.float16, bitcast=True).to(tl.float32)
        dmin = _ld((sbp + 2).to(tl.pointer_type(tl.uint16)), okc, EVEN).to(tl.float16, bitcast=True)
        dmin = dmin.to(tl.float32)
        sc0, mn0 = _k_scale(sbp + 4, (2 * cc)[None, :], okc)
        sc1, mn1 = _k_scale(sbp + 4, (2 * cc + 1)[None, :], okc)
        S0 = (d * sc0)[:, :, None]
        B0 = (dmin * mn0)[:, :, None]
        S1 = (d * sc1)[:, :, None]
        B1 = (dmin * mn1)[:, :, None]
        if FMT == Q5_K:
            qh = _ld((sbp[:, :, None] + 16 + (4 * wi)[None, None, :]).to(tl.pointer_type(tl.int32)), ok, EVEN)
        a0 = tl.zeros(w.shape, dtype=tl.float32)
        a1 = tl.zeros(w.shape, dtype=tl.float32)
        xs0 = tl.zeros([NC, 8], dtype=tl.float32)
        xs1 = tl.zeros([NC, 8], dtype=tl.float32)
        xk = kb[:, None] + 4 * wi[None, :]  # [NC, 8]
        for t in tl.static_range(4):
            x0 = _xp(x_row, xk + t, k_hi, EVEN)
            x1 = _xp(x_row, xk + 32 + t, k_hi, EVEN)
            xs0 += x0
            xs1 += x1
            a0 += _code(w, 8 * t, 4) * (x0 * _xscale(8 * t, 4))[None, :, :]
            a1 += _code(w, 8 * t + 4, 4) * (x1 * _xscale(8 * t + 4, 4))[None, :, :]
            if FMT == Q5_K:  # fifth bit of value 32h + 4i + t: bit 8t + 2cc + h of qh word i
                hsh = (8 * t + 2 * cc)[None, :, None]
                a0 += _code(qh >> hsh, 0, 1) * (16.0 * x0)[None, :, :]
                a1 += _code(qh >> (hsh + 1), 0, 1) * (16.0 * x1)[None, :, :]
        part = S0 * a0 - B0 * xs0[None, :, :] + S1 * a1 - B1 * xs1[None, :, :]
        return acc + tl.reshape(part, acc.shape)


@triton.jit
def gemv_offsets(rows, c, stride_wr, stride_sr, FMT: tl.constexpr, BITS: tl.constexpr, GS: tl.constexpr):
    """int32 ``[BN, NW]`` offsets of each word and of its scales at ``k0 = 0`` (see :func:`gemv_step`)."""
    if FMT == AFFINE:
        PER: tl.constexpr = 32 // BITS
        WPG: tl.constexpr = GS // PER
        G: tl.constexpr = c.shape[0] // WPG
        g = tl.arange(0, G)
        s_off = rows[:, None] * stride_sr + g[None, :]  # [BN, G]
        w_off = (rows[:, None] * stride_wr + g[None, :] * WPG)[:, :, None] + tl.arange(0, WPG)[None, None, :]
    elif FMT == Q4_0 or FMT == Q4_1 or FMT == Q8_0:
        WPB: tl.constexpr = 16 if FMT == Q8_0 else 8
        TS: tl.constexpr = 34 if FMT == Q8_0 else (18 if FMT == Q4_0 else 20)
        QS: tl.constexpr = 4 if FMT == Q4_1 else 2
        NB: tl.constexpr = c.shape[0] // WPB
        s_off = rows[:, None] * stride_wr + (tl.arange(0, NB) * TS)[None, :]  # [BN, NB] blocks
        w_off = s_off[:, :, None] + (QS + 2 * tl.arange(0, WPB))[None, None, :]
    else:  # [BN, NC, 8] words, [BN, NC] super-block of each chunk
        TS: tl.constexpr = 144 if FMT == Q4_K else 176
        QS: tl.constexpr = 16 if FMT == Q4_K else 48
        NC: tl.constexpr = c.shape[0] // 8
        ch = tl.arange(0, NC)
        s_off = rows[:, None] * stride_wr + ((ch // 4) * TS)[None, :]
        w_off = s_off[:, :, None] + (QS + 32 * (ch % 4))[None, :, None] + (4 * tl.arange(0, 8))[None, None, :]
    return w_off, s_off


@triton.jit(do_not_specialize=["n_rows", "k_per_split"])
def gemv_kernel(
    x_ptr,  # [Rx, K] activations (row stride stride_xm, unit column stride)
    w_ptr,  # affine: [E, N, K * BITS / 32] int32 words; GGUF: [E * N * row_bytes] uint8
    s_ptr, b_ptr,  # affine: [E, N, K / GS] scales / biases (GGUF: unused)
    w2_ptr, s2_ptr, b2_ptr,  # the up projection (HAS_UP)
    out_ptr,  # [R, N] output (written unless SPLIT_K without FUSE)
    part_ptr,  # [split, R, N] fp32 partials (SPLIT_K)
    part2_ptr,  # [split, R, N] fp32 partials of the up projection (HAS_UP and SPLIT_K)
    cnt_ptr,  # [R * cdiv(N, BN)] int32 arrival counters, zero between launches (FUSE)
    erow_ptr,  # ROUTED: [R] expert of each output row
    xrow_ptr,  # ROUTED and HAS_XROW: [R] x row of each output row
    n_rows, N, K, stride_xm, x_div,
    stride_we, stride_wr, stride_se, stride_sr,
    n_experts, k_per_split,
    FMT: tl.constexpr, BITS: tl.constexpr, GS: tl.constexpr, ROUTED: tl.constexpr, HAS_XROW: tl.constexpr,
    HAS_UP: tl.constexpr, ACT: tl.constexpr, SPLIT_K: tl.constexpr, FUSE: tl.constexpr, BN: tl.constexpr,
    NW: tl.constexpr, KSTEP: tl.constexpr, EVEN: tl.constexpr,
    PDL: tl.constexpr,  # kernels/dependent.py
):
    """Programs: axis 0 = (row, column tile) with rows outermost; axis 1 = K split.

    ``KSTEP``: columns of K per loop step (NW words). ``EVEN``: every step is whole and
    every row exists (no masks). ``FUSE`` (with ``SPLIT_K``): the last split of each axis-0
    program to arrive sums its tile's partials into ``out``.
    """
    enter(PDL)
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_n = tl.cdiv(N, BN)
    r = pid // num_n
    pid_n = pid % num_n
    bad = False
    e = 0
    if ROUTED:
        e = tl.load(erow_ptr + r).to(tl.int64)
        bad = (e < 0) | (e >= n_experts)
        e = tl.where(bad, 0, e)
        if HAS_XROW:
            xr = tl.load(xrow_ptr + r).to(tl.int64)
        else:
            xr = (r // x_div).to(tl.int64)
    else:
        xr = r.to(tl.int64)
    x_row = x_ptr + xr * stride_xm
    rows = pid_n * BN + tl.arange(0, BN)
    n_ok = rows < N
    rows = tl.where(n_ok, rows, 0)
    c = tl.arange(0, NW)
    w_off, s_off = gemv_offsets(rows, c, stride_wr, stride_sr, FMT, BITS, GS)
    wb = w_ptr + e * stride_we
    sb = s_ptr + e * stride_se
    bb = b_ptr + e * stride_se
    wb2 = w2_ptr + e * stride_we
    sb2 = s2_ptr + e * stride_se
    bb2 = b2_ptr + e * stride_se
    k_lo = pid_k * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)
    acc = tl.zeros([BN, NW], dtype=tl.float32)
    acc2 = tl.zeros([BN, NW], dtype=tl.float32)
    for k0 in range(k_lo, k_hi, KSTEP):
        acc = gemv_step(wb, sb, bb, w_off, s_off, n_ok, c, k0, k_hi, x_row, acc, FMT, BITS, GS, EVEN)
        if HAS_UP:
            acc2 = gemv_step(wb2, sb2, bb2, w_off, s_off, n_ok, c, k0, k_hi, x_row, acc2, FMT, BITS, GS, EVEN)
    leave_loop(PDL)
    res = tl.sum(acc, axis=1)
    res2 = tl.sum(acc2, axis=1)
    if ROUTED:
        res = tl.where(bad, float("nan"), res)
        res2 = tl.where(bad, float("nan"), res2)
    offs_n = pid_n * BN + tl.arange(0, BN)
    out_off = r.to(tl.int64) * N + offs_n
    store_result(out_ptr, part_ptr, part2_ptr, cnt_ptr + pid, res, res2, out_off, n_ok, n_rows * N, SPLIT_K, FUSE,
                 HAS_UP, ACT)


# ----------------------------------------------------------------------------- launch plans

import torch  # noqa: E402

from ...kernels.dependent import dependent_launch  # noqa: E402
from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ...runtime.memory import empty  # noqa: E402
from ..common import next_pow2  # noqa: E402
from .qmm import SplitK  # noqa: E402

# The default for one-row mat-vecs of the formats below (MLX_NATIVE_WORD_GEMV=0 turns it off): it is
# what the GPU tests verified. It issues about half the instructions per code of the general kernel
# (qmm.py) but, without prefetching, measured slower than that kernel with tiles from the H100 sweep
# (e.g. 4-bit affine, M = 1, K 4096 x N 14336: 37.4 us vs 34.5 us); switching the default needs a GPU
# run that checks those configs (see bench/results/2026-11-22-h100-quant/NOTES.md).
#
# Row tiles and K splits (bench/gemv_small_sweep.py, bench/results/2026-11-22-h100-session5/): SmolLM2's
# 0.2-2 MB matrices are latency, not bandwidth. There the most programs win (4-row tiles: K 576 x N 960
# 3.45 -> 2.74 us, 1536 x 576 5.52 -> 4.09 us) and a K split loses (its merge adds a dependent store,
# arrival and reload: 576 x 3072 at 8-row tiles 3.88 us unsplit, 4.90 us split in four).
# Both apply to the GGUF formats only: MLX affine words with fewer than 8 words per group (2-bit, 4-bit
# group 32) gave wrong results on the H100 with 4-row tiles (Triton 3.6; right under the interpreter), so
# affine rows keep the rule the GPU tests verified before (16-row tiles, a K split from any K).
# Session 23 run 8 (H100, SmolLM2-shaped decode, gemv a PDL dependent): 2-row tiles and 4 tiles per SM 1568 ->
# 1580 tok/s; 2 or 1 warps, 64-word steps, (16, 8) tiles or 1 tile per SM all slower (1405-1537).
GEMV_BNS = (16, 8, 4, 2)  # row tiles, largest first: the largest giving TILES_PER_SM tiles per SM
TILES_PER_SM = 4
GEMV_WORDS = 128  # words per row per K step
GEMV_WARPS = 4
# PDL (kernels/dependent.py): session 23 run 4, H200, SmolLM2-shaped decode tok/s: plain launches 1272, waiting
# only 1558, trigger at the start 1453, after the loop 1573.
GEMV_TRIGGER = "late"
PROGRAMS_PER_SM = 4  # split K until about this many programs per SM ...
SPLIT_MIN_K = 2048  # ... in rows of at least this many columns


def supports(family: int, fmt: int, bits: int, trans: bool) -> bool:
    """Formats the mat-vec kernel takes (others run the general qmm kernel); none with
    ``MLX_NATIVE_WORD_GEMV=0``."""
    if not env.settings.word_gemv:
        return False
    if family == 0:
        return trans and bits in (2, 4, 8)
    return fmt in GEMV_FORMATS


def words_geometry(family: int, fmt: int, bits: int, group_size: int, k: int) -> tuple[int, int, int]:
    """(kernel format code, words per step NW, K columns per step) for a K of ``k``."""
    if family == 0:
        per = 32 // bits
        unit_words, unit_cols = group_size // per, group_size
        code = -1
    elif fmt in (2, 3):
        unit_words, unit_cols, code = 8, 32, fmt
    elif fmt == 8:
        unit_words, unit_cols, code = 16, 32, fmt
    else:
        unit_words, unit_cols, code = 8, 64, fmt
    total = triton.cdiv(k, unit_cols)
    cap = max(1, GEMV_WORDS // unit_words)
    units = 1
    while units * 2 <= cap and total % (units * 2) == 0:  # whole steps when possible
        units *= 2
    if units < 4:  # few units per step: take the cap (masked tail) instead
        units = max(1, min(cap, next_pow2(total)))
    return code, units * unit_words, units * unit_cols


class GemvLaunch:
    """:func:`gemv_kernel` prepared for one signature.

    Args:
        family, fmt, bits, group_size: the weight format (see ``qmm.WeightSpec``).
        n, k: output / input features; n_rows: output rows (plain: rows of x; routed: rows).
        routed: rows are (x row, expert) pairs; has_xrow: the x row comes from a tensor.
        has_up, act: fused gate/up. out_dtype: output dtype.
        strides: (stride_xm, x_div, stride_we, stride_wr, stride_se, stride_sr, n_experts) in the
            kernel's units (affine: words / elements; GGUF: bytes).

    A K split (``split > 1``) is summed in the same launch by default (``qmm.SplitK``: this plan
    owns the arrival counters, so it must not run on two streams at once).
    """

    def __init__(self, family: int, fmt: int, bits: int, group_size: int, n: int, k: int, n_rows: int, routed: bool,
                 has_xrow: bool, has_up: bool, act: int, out_dtype: torch.dtype, strides: tuple, device):
        code, nw, kstep = words_geometry(family, fmt, bits, group_size, k)
        sms = device_info(device).sm_count
        gguf = family != 0
        bns = GEMV_BNS if gguf else GEMV_BNS[:1]
        bn = next(b for b in bns if b == bns[-1] or triton.cdiv(n, b) * n_rows >= TILES_PER_SM * sms)
        bn = max(1, min(bn, next_pow2(n)))
        self.n, self.n_rows, self.out_dtype, self.device = n, n_rows, out_dtype, device
        tiles = triton.cdiv(n, bn) * n_rows
        steps = triton.cdiv(k, kstep)
        target = PROGRAMS_PER_SM * sms if k >= SPLIT_MIN_K or not gguf else 0
        split = 1
        while tiles * split < target and steps % (split * 2) == 0 and steps // (split * 2) >= 1 and split < 16:
            split *= 2
        self.split = split
        k_per_split = steps // split * kstep if steps % split == 0 else triton.cdiv(steps, split) * kstep
        self.split = triton.cdiv(k, k_per_split)
        even = n % bn == 0 and k % kstep == 0 and k_per_split * self.split == k
        stride_xm, x_div, stride_we, stride_wr, stride_se, stride_sr, n_experts = strides
        self.ints = (n_rows, n, k, stride_xm, x_div, stride_we, stride_wr, stride_se, stride_sr, n_experts, k_per_split)
        self.splitk = SplitK(self.split, n_rows, n, has_up, act, device, tiles=tiles) if self.split > 1 else None
        self.launch = dependent_launch(gemv_kernel, (tiles, self.split), dict(
            FMT=code, BITS=bits, GS=group_size, ROUTED=routed, HAS_XROW=has_xrow, HAS_UP=has_up, ACT=act,
            SPLIT_K=self.split > 1, FUSE=self.splitk is not None and self.splitk.fused, BN=bn, NW=nw, KSTEP=kstep,
            EVEN=even), device, GEMV_TRIGGER, num_warps=GEMV_WARPS, num_stages=1)

    def __call__(self, x, w, s, b, w2=None, s2=None, b2=None, erow=None, xrow=None) -> torch.Tensor:
        out = empty((self.n_rows, self.n), dtype=self.out_dtype, device=self.device)
        w2 = w2 if w2 is not None else w
        s2 = s2 if s2 is not None else s
        b2 = b2 if b2 is not None else b
        erow = erow if erow is not None else x
        xrow = xrow if xrow is not None else x
        if self.splitk is None:
            self.launch(x, w, s, b, w2, s2, b2, out, out, out, out, erow, xrow, *self.ints)
            return out
        part, part2, cnt = self.splitk.partials()
        self.launch(x, w, s, b, w2, s2, b2, out, part, part2, cnt, erow, xrow, *self.ints)
        return self.splitk.reduce_into(part, part2, out)


class WithFallback:
    """The mat-vec launch, falling back (with a warning, once) to the general kernel if this
    Triton build fails to compile it. Only compile errors are caught."""

    def __init__(self, primary: GemvLaunch, make_fallback, what: str):
        self.primary, self.make_fallback, self.what = primary, make_fallback, what
        self.fallback = None
        self.checked = False

    def __call__(self, *args, **kwargs):
        if self.fallback is not None:
            return self.fallback(*args, **kwargs)
        if self.checked:
            return self.primary(*args, **kwargs)
        try:
            out = self.primary(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - triton.CompilationError and friends
            if "ompil" not in type(exc).__name__ and "ompil" not in str(exc)[:200]:
                raise
            import warnings

            warnings.warn(f"{self.what}: the mat-vec kernel failed to compile ({exc!r:.300}); "
                          f"using the general kernel")
            self.fallback = self.make_fallback()
            return self.fallback(*args, **kwargs)
        self.checked = True
        return out
