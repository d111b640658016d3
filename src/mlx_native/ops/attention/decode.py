"""Split-KV decode attention (flash-decoding) with GQA packing; the splits are merged in the same launch.

Decode is memory bound: each step reads the whole visible KV cache once. To
keep every SM streaming even at batch 1, the visible range of each sequence
is cut into contiguous chunks, one program per (chunk, batch, KV head). The
split count and the longest split (``chunk`` positions) come from the SM count and the static shapes (batch, heads,
capacity, window), never from host reads of ``kv_lens``, so a call needs no host
sync and replays from a CUDA graph with new lengths. In the kernel, a sequence
that sees fewer positions than the span takes shorter splits (not under
``MIN_SPLIT_KEYS``), and only the splits that hold positions run: the others
exit at once, and a sequence with one live split skips the merge. In a batch,
every split is about the batch's mean share instead (the programs read the
batch's lengths): a long sequence takes more splits than the plan's count and a
short one fewer, so all splits are about equally long and a ragged batch keeps
the SMs evenly busy to the end.

GQA packing: the ``G = Hq / Hkv`` query heads of one KV head (times the
``Lq`` query tokens) are the rows of one ``[BLOCK_M, D]`` tile, so each K/V
tile is read once for all of them and ``q @ k^T`` is a real matrix product.

Each split writes its normalized partial output and its log2-sum-exp (fp32); a merge combines them:
``out = sum_s w_s o_s / sum_s w_s`` with ``w_s = exp2(lse_s - max lse)``. Splits that saw no key write
``lse = -inf`` and zeros. With one split the decode kernel writes the output directly. The merge runs one of
two ways (:func:`merge_mode`):

* **fused** (:func:`_merge_splits`): the splits of one row block count their arrivals on an atomic counter,
  and the last to arrive merges, in the decode launch (see :class:`DecodePlan`). Where the grid is several
  waves (batches), the merging programs overlap other programs' streaming, and no second launch is paid.
* **second launch** (:func:`_reduce_kernel`, one program per output row, all splits of a row per load): where
  every program has an SM of its own (batch 1) all splits end together, and the fused merge, one program
  looping over the splits, is the whole tail: B1 Hkv8 kv8k D128 on the H100 took 20.6 us in the fused decode
  kernel against 15.7 us without the merge + 2.2 us for the reduce launch. On sm_90+ the reduce is a
  programmatic dependent launch (PDL): its programs are resident before the splits end and wait in the kernel.

On sm_90+ the decode launch is itself a programmatic dependent of the launch before it (``kernels/dependent.py``):
it is scheduled while that one finishes and waits for it in the kernel.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from ...kernels.arrival import arrive_last, can_fuse, counters, rearm
from ...kernels.dependent import dependent_launch, enter
from ...kernels.launch import Launch, pdl_available
from ...kernels.math import tanh
from ...kernels.rotary import rope_operands, rope_rotate
from ...runtime import env
from ...runtime.device import device_info
from ...runtime.memory import empty
from ..common import next_pow2
from ..rope.kernel import inv_freq_table

LOG2E = 1.4426950408889634

SMEM_PER_SM = 228 * 1024  # H100 / H200 shared memory per SM
MIN_SPLIT_KEYS = 128  # fewest cache positions per split (see num_splits), whatever the head dim
SPLITS_OVERRIDE = None  # benchmarks / sweeps: force a split count
MERGE_OVERRIDE = None  # benchmarks / tests: "fused", "pdl" or "launch" instead of merge_mode's choice
SHORTEN_SPLITS = True  # False: every sequence takes the plan's split length (benchmark comparisons)
BALANCE_SPLITS = 4  # batch > 1: mean live splits per sequence (see DecodePlan; None: no balance)
MAX_SPLITS = 64
RAGGED_SPLITS = 16  # batch > 1: split granularity for ragged lengths (1/16 of the span per program) ...
RAGGED_WAVES = 4  # ... but no more than this many programs per slot (SMs x occupancy) ...
RAGGED_MIN_KEYS = 2048  # ... and no shorter splits than this (see num_splits)
MAX_BLOCK_M = 64
# (BLOCK_N, num_warps, num_stages) by BLOCK_D, 16-bit inputs on CUDA ...
GPU_CONFIGS = {16: (64, 4, 4), 32: (64, 4, 4), 64: (64, 4, 4), 128: (64, 4, 4), 256: (32, 4, 4), 512: (16, 4, 3)}
# ... and where the span is at least LONG_SPAN positions: D=128 takes 128-key tiles (one program per SM, so the
# split rule picks half the splits). Session 7, H100: B8 kv32k 372 -> 360 us (with BALANCE_SPLITS), kv128k 1424 ->
# 1387, B32 kv32k / 128k 1418 -> 1392 / 5608 -> 5510, B1 kv32k / 128k equal; below 16k they lost (B8 kv8k 98.6 ->
# 101.0, a 16-position sequence in a 1k cache 4.4 -> 5.5 us).
LONG_SPAN = 16384
GPU_CONFIGS_LONG = {128: (128, 4, 3)}
# ... and at batch 1 (one program per SM, the merge in a second launch): three stages of 64-key tiles at any span.
# Session 14, H100, B1 Hkv8 kv 1k (Hq32) / 8k / 32k / 128k: 8.19 -> 7.99, 18.31 -> 17.96, 52.11 -> 50.55, 180.6 -> 179.2
# us (4 stages -> 3, and 128-key tiles -> 64 from 32k); two stages lose from 8k (23.4 us).
GPU_CONFIGS_BATCH1 = {128: (64, 4, 3)}
# ... but four stages on the H200 (4.3 TB/s: the same time holds 1.4x the H100's bytes in flight). Session 33 run 4
# (bench/decode_merge_sweep.py, H200, B1 Hkv8 kv 8k / 32k / 128k): 14.93 / 38.69 / 131.60 -> 14.89 / 37.88 / 126.68 us,
# cuDNN 15.49 / 38.43 / 127.92; 128-key tiles 15.86 / 38.89 / 127.53; 24 or 32 splits lost 3-40%.
GPU_CONFIGS_BATCH1_H200 = {128: (64, 4, 4)}
GPU_CONFIGS_F32 = {16: (32, 4, 3), 32: (32, 4, 3), 64: (32, 4, 3), 128: (32, 4, 3), 256: (16, 4, 2),
                   512: (16, 4, 1)}
INTERPRETER = dict(block_n=16, min_split_keys=16, max_splits=4)


@triton.jit
def _load_rows(base, slot, stride, offs_d, kv_ok, d_ok, MASKED: tl.constexpr, EVEN_D: tl.constexpr):
    """``[BLOCK_N, BLOCK_D]`` cache rows ``slot`` of K or V; masks only where the tile (MASKED: positions
    ``kv_ok``) or the head dim (not EVEN_D: columns ``d_ok``) is partial."""
    ptrs = base + slot[:, None] * stride + offs_d[None, :]
    if MASKED:
        if EVEN_D:
            rows = tl.load(ptrs, mask=kv_ok[:, None], other=0.0)
        else:
            rows = tl.load(ptrs, mask=kv_ok[:, None] & d_ok[None, :], other=0.0)
    elif EVEN_D:
        rows = tl.load(ptrs)
    else:
        rows = tl.load(ptrs, mask=d_ok[None, :], other=0.0)
    return rows


@triton.jit
def _scores(q, k, qk_scale, softcap_in, softcap_out, SOFTCAP: tl.constexpr, PRECISION: tl.constexpr):
    """``[BLOCK_M, BLOCK_N]`` log2-domain scores of ``q`` against the key rows ``k`` (softcapped if SOFTCAP)."""
    qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)
    if SOFTCAP:
        return tanh(qk * softcap_in) * softcap_out
    return qk * qk_scale


@triton.jit
def _softmax_step(s, m_i, l_i):
    """One online-softmax step over the masked scores ``s``: ``(p, alpha, l_i, m_new)``; rows that have seen no
    key yet (max ``-inf``) keep ``p = 0``."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    return p, alpha, l_i * alpha + tl.sum(p, axis=1), m_new


@triton.jit
def _decode_tiles(acc, l_i, m_i, q, k_base, v_base, sk_s, sv_s, lo, hi, end, qpos, C, window, qk_scale, softcap_in,
                  softcap_out, MASKED: tl.constexpr, WINDOW: tl.constexpr, MULTI_Q: tl.constexpr,
                  SOFTCAP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_D: tl.constexpr,
                  EVEN_D: tl.constexpr, PRECISION: tl.constexpr):
    """Online softmax over positions ``[lo, hi)``; MASKED: the last, partial tile (positions >= ``end`` dropped)."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_D
    for start_n in range(lo, hi, BLOCK_N):
        pos = start_n + offs_n
        if WINDOW:
            slot = (pos % C).to(tl.int64)
        else:
            slot = pos.to(tl.int64)
        kv_ok = pos < end
        k = _load_rows(k_base, slot, sk_s, offs_d, kv_ok, d_ok, MASKED, EVEN_D)
        s = _scores(q, k, qk_scale, softcap_in, softcap_out, SOFTCAP, PRECISION)
        if MULTI_Q:
            vis = (pos[None, :] <= qpos[:, None]) & kv_ok[None, :]
            if WINDOW:
                vis = vis & (pos[None, :] > qpos[:, None] - window)
            s = tl.where(vis, s, float("-inf"))
        elif MASKED:
            s = tl.where(kv_ok[None, :], s, float("-inf"))
        p, alpha, l_i, m_new = _softmax_step(s, m_i, l_i)
        v = _load_rows(v_base, slot, sv_s, offs_d, kv_ok, d_ok, MASKED, EVEN_D)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _append_attend(acc, l_i, m_i, q, qpos, kn, vn, kpos, k_ok, k_base, v_base, sk_s, sv_s, C, window, qk_scale,
                   softcap_in, softcap_out, WRITE, WINDOW: tl.constexpr, SOFTCAP: tl.constexpr,
                   BLOCK_D: tl.constexpr, HEAD_D: tl.constexpr, PRECISION: tl.constexpr):
    """The new tokens' K / V rows ``kn, vn [BLOCK_L, BLOCK_D]`` (already rotated; positions ``kpos``, rows
    ``k_ok``): written to their cache slots when WRITE (slot ``pos % C`` with WINDOW, else ``pos``, dropped from
    ``C`` on) and attended from the registers (causal among themselves)."""
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_D
    if WRITE:
        if WINDOW:
            slot = (kpos % C).to(tl.int64)
            st_ok = k_ok[:, None] & d_ok[None, :]
        else:
            slot = kpos.to(tl.int64)
            st_ok = (k_ok & (kpos < C))[:, None] & d_ok[None, :]
        tl.store(k_base + slot[:, None] * sk_s + offs_d[None, :], kn, mask=st_ok)
        tl.store(v_base + slot[:, None] * sv_s + offs_d[None, :], vn, mask=st_ok)
    s = _scores(q, kn, qk_scale, softcap_in, softcap_out, SOFTCAP, PRECISION)
    vis = (kpos[None, :] <= qpos[:, None]) & k_ok[None, :]
    if WINDOW:
        vis = vis & (kpos[None, :] > qpos[:, None] - window)
    s = tl.where(vis, s, float("-inf"))
    p, alpha, l_i, m_i = _softmax_step(s, m_i, l_i)
    acc = tl.dot(p.to(vn.dtype), vn, acc * alpha[:, None], input_precision=PRECISION)
    return acc, l_i, m_i


@triton.jit
def _visible(lens, Lq, C, window, WINDOW: tl.constexpr):
    """``(n, lo)`` int32 of sequence lengths ``lens``: the cache holds positions ``[0, n)`` and the queries see
    ``[lo, n)`` (a linear cache holds at most ``C``; a window, or a ring of ``C`` slots, hides the older ones)."""
    n = tl.maximum(lens.to(tl.int32), 0)
    if WINDOW:
        lo = tl.maximum(tl.maximum(n - Lq - window + 1, n - C), 0)
    else:
        n = tl.minimum(n, C)
        lo = tl.zeros_like(n)
    return n, lo


@triton.jit
def _merge_splits(po_ptr, plse_ptr, rows, r_ok, R, n_splits, BLOCK_S: tl.constexpr, BLOCK_R: tl.constexpr,
                  BLOCK_D: tl.constexpr, HEAD_D: tl.constexpr):
    """Merge the ``n_splits`` partials of ``rows`` ([BLOCK_R] int64 row indices into ``R``, ``r_ok`` their mask).

    ``po_ptr``: [n_splits, R, HEAD_D] fp32 normalized partial outputs; ``plse_ptr``: [n_splits, R] fp32 partial
    log2-sum-exp (``-inf``: the split saw no key). ``BLOCK_S >= n_splits``. Returns the [BLOCK_R, BLOCK_D] fp32
    output ``sum_s w_s o_s / sum_s w_s``, ``w_s = exp2(lse_s - max_s lse_s)``; a row no split saw gets zeros.
    The loads bypass L1 (``.cg``): other SMs wrote the partials during the same launch in the fused path.
    """
    s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    ld_mask = r_ok[:, None] & (offs_d < HEAD_D)[None, :]
    lse = tl.load(plse_ptr + s[:, None].to(tl.int64) * R + rows[None, :],
                  mask=(s < n_splits)[:, None] & r_ok[None, :], other=float("-inf"), cache_modifier=".cg")  # [S, R]
    mx = tl.max(lse, axis=0)
    mx = tl.where(mx == float("-inf"), 0.0, mx)
    tot = tl.zeros_like(mx)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    for sp in range(n_splits):
        pr = sp * R + rows
        w = tl.math.exp2(tl.load(plse_ptr + pr, mask=r_ok, other=float("-inf"), cache_modifier=".cg") - mx)
        o = tl.load(po_ptr + pr[:, None] * HEAD_D + offs_d[None, :], mask=ld_mask, other=0.0, cache_modifier=".cg")
        tot += w
        acc += w[:, None] * o
    return acc / tl.where(tot > 0.0, tot, 1.0)[:, None]


@triton.jit
def _decode_kernel(
    q_ptr,  # [B, Hq, Lq, D] (strides sq_*)
    k_ptr,  # [B, Hkv, C, D] cache (strides sk_*)
    v_ptr,  # [B, Hkv, C, D] cache (strides sv_*)
    lens_ptr,  # [B] int32/int64: tokens in the cache, current queries included
    o_ptr,  # [B, Hq, Lq, D] contiguous output (SINGLE or FUSE)
    po_ptr,  # [n_splits, B*Hq*Lq, D] fp32 partial outputs (not SINGLE)
    plse_ptr,  # [n_splits, B*Hq*Lq] fp32 partial log2-sum-exp (not SINGLE)
    cnt_ptr,  # [B*Hkv, m_blocks] int32 arrival counters, zero between launches (FUSE)
    kn_ptr,  # [B, Hkv, Lq, D] new K rows, not rotated yet if ROPE (APPEND; strides skn_*)
    vn_ptr,  # [B, Hkv, Lq, D] new V rows (APPEND; strides svn_*)
    freq_ptr,  # [rope_half] fp32 inverse frequencies, or MLX freqs (ROPE_FREQS) (ROPE)
    sq_b, sq_h, sq_l,
    sk_b, sk_h, sk_s,
    sv_b, sv_h, sv_s,
    skn_b, skn_h, skn_l,
    svn_b, svn_h, svn_l,
    Hq, Lq, C, window, R,
    chunk,  # positions per split (a multiple of BLOCK_N, from the static shapes): the longest a split takes
    min_chunk,  # fewest positions per split of a sequence shorter than the span (a multiple of BLOCK_N)
    n_seqs,  # B (BALANCE)
    mean_splits,  # BALANCE: splits of a sequence of the batch's mean length
    qk_scale,  # scale * log2(e)
    softcap_in,  # scale / softcap
    softcap_out,  # softcap * log2(e)
    rope_half,  # rotated pairs per head row (ROPE)
    rope_scale,  # positions are multiplied by this before the frequencies (ROPE)
    G: tl.constexpr,  # query heads per KV head
    SINGLE: tl.constexpr,  # one split: write the output directly
    FUSE: tl.constexpr,  # several splits: the last program of each (batch*KV head, row block) merges them
    WINDOW: tl.constexpr,  # sliding window; the cache may be a ring (slot = pos % C)
    MULTI_Q: tl.constexpr,  # Lq > 1: causal mask among the new tokens
    SOFTCAP: tl.constexpr,
    BALANCE: tl.constexpr,  # batch > 1: splits of the batch's mean length (see DecodePlan)
    BLOCK_B: tl.constexpr,  # next_pow2(B) (BALANCE)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_S: tl.constexpr,  # next_pow2(n_splits) (FUSE)
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
    EVEN_D: tl.constexpr,
    PRECISION: tl.constexpr,
    APPEND: tl.constexpr,  # lens_ptr counts the cached tokens; the Lq new ones come from kn/vn and are written
    ROPE: tl.constexpr,  # rotate q and the new K rows (positions of the queries / new tokens)
    ROPE_TRADITIONAL: tl.constexpr,
    ROPE_FREQS: tl.constexpr,
    BLOCK_L: tl.constexpr,  # next_pow2(Lq), at least 16 (APPEND)
    PDL: tl.constexpr,  # kernels/dependent.py: 1 a programmatic dependent launch, 2 one that also lets the reduce
    # launch (a programmatic dependent) be scheduled at its start
):
    enter(PDL)
    pid_s = tl.program_id(0)
    pid_bh = tl.program_id(1)
    pid_m = tl.program_id(2)
    hkv = Hq // G
    b = pid_bh // hkv
    hk = pid_bh % hkv
    new = Lq if APPEND else 0  # tokens this launch appends
    n, lo = _visible(tl.load(lens_ptr + b) + new, Lq, C, window, WINDOW)
    n_c = n - new  # the splits read cached positions [lo, n_c); the new ones are attended from registers
    n_splits = tl.num_programs(0)
    live = n_splits
    if not SINGLE:
        # a sequence that sees fewer positions than the span is cut into shorter splits (not under min_chunk)
        per = tl.cdiv(n_c - lo, n_splits)
        if BALANCE:  # ... and no shorter than the batch's mean share of a split: splits of equal length
            lens = tl.load(lens_ptr + tl.arange(0, BLOCK_B), mask=tl.arange(0, BLOCK_B) < n_seqs, other=0) + new
            n_all, lo_all = _visible(lens, Lq, C, window, WINDOW)
            per = tl.maximum(per, tl.cdiv(tl.sum(n_all - lo_all), n_seqs * mean_splits))
        per = tl.cdiv(per, BLOCK_N) * BLOCK_N
        chunk = tl.minimum(chunk, tl.maximum(per, min_chunk))
        if FUSE:  # only the splits that hold positions run and arrive (at least one: it writes the zeros)
            live = tl.maximum(tl.cdiv(n_c - lo, chunk), 1)
    if pid_s < live:
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < G * Lq
        g = rows // Lq
        qi = rows % Lq
        h = hk * G + g
        offs_d = tl.arange(0, BLOCK_D)
        d_ok = offs_d < HEAD_D
        q_off = b.to(tl.int64) * sq_b + h.to(tl.int64) * sq_h + qi.to(tl.int64) * sq_l
        qpos = n - Lq + qi
        if ROPE:  # Lq = 1: one position for all rows, the angles once per column
            x, xp, inv = rope_operands(q_ptr, q_off, row_ok, offs_d, d_ok, freq_ptr, rope_half, ROPE_FREQS,
                                       ROPE_TRADITIONAL)
            q_at = qpos if MULTI_Q else n - Lq
            q = rope_rotate(x, xp, inv, q_at, offs_d, rope_half, rope_scale, ROPE_TRADITIONAL,
                            MULTI_Q).to(q_ptr.dtype.element_ty)
        else:
            q = tl.load(q_ptr + q_off[:, None] + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        start = lo + pid_s * chunk
        end = tl.minimum(start + chunk, n_c)
        full_end = start + tl.maximum(end - start, 0) // BLOCK_N * BLOCK_N

        k_base = k_ptr + b.to(tl.int64) * sk_b + hk.to(tl.int64) * sk_h
        v_base = v_ptr + b.to(tl.int64) * sv_b + hk.to(tl.int64) * sv_h
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        if APPEND:  # the last split also takes the new tokens: their loads go out before the cache tiles'
            take = pid_s == live - 1
            j = tl.arange(0, BLOCK_L)
            k_ok = j < tl.where(take, Lq, 0)  # no rows (no loads) in the other splits
            kn_off = b.to(tl.int64) * skn_b + hk.to(tl.int64) * skn_h + j.to(tl.int64) * skn_l
            vn_off = b.to(tl.int64) * svn_b + hk.to(tl.int64) * svn_h + j.to(tl.int64) * svn_l
            nd_ok = k_ok[:, None] & d_ok[None, :]
            if ROPE:
                kx, kxp, kinv = rope_operands(kn_ptr, kn_off, k_ok, offs_d, d_ok, freq_ptr, rope_half, ROPE_FREQS,
                                              ROPE_TRADITIONAL)
            else:
                kn = tl.load(kn_ptr + kn_off[:, None] + offs_d[None, :], mask=nd_ok, other=0.0)
            vn = tl.load(vn_ptr + vn_off[:, None] + offs_d[None, :], mask=nd_ok, other=0.0)
        # whole tiles without bounds checks, then the partial tail tile (if any)
        acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_base, v_base, sk_s, sv_s, start, full_end, end, qpos, C,
                                      window, qk_scale, softcap_in, softcap_out, False, WINDOW, MULTI_Q, SOFTCAP,
                                      BLOCK_N, BLOCK_D, HEAD_D, EVEN_D, PRECISION)
        acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_base, v_base, sk_s, sv_s, full_end, end, end, qpos, C,
                                      window, qk_scale, softcap_in, softcap_out, True, WINDOW, MULTI_Q, SOFTCAP,
                                      BLOCK_N, BLOCK_D, HEAD_D, EVEN_D, PRECISION)

        if APPEND:
            if take:  # rotate, write (once per KV head) and attend the new tokens
                if ROPE:
                    kn = rope_rotate(kx, kxp, kinv, n_c + j if MULTI_Q else n_c, offs_d, rope_half, rope_scale,
                                     ROPE_TRADITIONAL, MULTI_Q).to(kn_ptr.dtype.element_ty)
                acc, l_i, m_i = _append_attend(acc, l_i, m_i, q, qpos, kn, vn, n_c + j, k_ok, k_base, v_base, sk_s,
                                               sv_s, C, window, qk_scale, softcap_in, softcap_out, pid_m == 0, WINDOW,
                                               SOFTCAP, BLOCK_D, HEAD_D, PRECISION)
        seen = l_i > 0.0
        out = acc / tl.where(seen, l_i, 1.0)[:, None]
        r = (b.to(tl.int64) * Hq + h) * Lq + qi
        st_mask = row_ok[:, None] & d_ok[None, :]
        o_offs = r[:, None] * HEAD_D + offs_d[None, :]
        if SINGLE:
            tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=st_mask)
        elif not FUSE:  # the reduce launch merges
            _store_partial(po_ptr, plse_ptr, pid_s * R + r, out, m_i, l_i, row_ok, st_mask, offs_d, HEAD_D)
        elif live == 1:  # the only split of this sequence: no partials, no merge
            tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=st_mask)
        else:
            _store_partial(po_ptr, plse_ptr, pid_s * R + r, out, m_i, l_i, row_ok, st_mask, offs_d, HEAD_D)
            # every live split arrives (kernels/arrival.py: ordering and rules)
            cnt = cnt_ptr + pid_bh * tl.num_programs(2) + pid_m
            if arrive_last(cnt, live):
                merged = _merge_splits(po_ptr, plse_ptr, r, row_ok, R, live, BLOCK_S, BLOCK_M, BLOCK_D, HEAD_D)
                tl.store(o_ptr + o_offs, merged.to(o_ptr.dtype.element_ty), mask=st_mask)
                rearm(cnt)


@triton.jit
def _store_partial(po_ptr, plse_ptr, pr, out, m_i, l_i, row_ok, st_mask, offs_d, HEAD_D: tl.constexpr):
    """A split's normalized partial output ``out`` and log2-sum-exp (``-inf`` for rows that saw no key) at
    partial rows ``pr``."""
    seen = l_i > 0.0
    tl.store(po_ptr + pr[:, None] * HEAD_D + offs_d[None, :], out, mask=st_mask)
    tl.store(plse_ptr + pr, tl.where(seen, m_i + tl.log2(tl.where(seen, l_i, 1.0)), float("-inf")), mask=row_ok)


@triton.jit(do_not_specialize=["n_splits"])
def _reduce_kernel(
    po_ptr,  # [n_splits, R, D] fp32 partial outputs
    plse_ptr,  # [n_splits, R] fp32 partial log2-sum-exp
    o_ptr,  # [R, D] output, q's dtype
    R, n_splits,
    BLOCK_S: tl.constexpr,  # next_pow2(n_splits)
    CHUNK_S: tl.constexpr,  # splits read per step ([CHUNK_S, BLOCK_D] partials at once)
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
    PDL: tl.constexpr,  # launched as a programmatic dependent of the decode launch: wait for its partials
):
    """Program ``r``: output row ``r`` from its ``n_splits`` partials, ``CHUNK_S`` splits per load step."""
    if PDL:
        gdc_wait()
    r = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    lse = tl.load(plse_ptr + s.to(tl.int64) * R + r, mask=s < n_splits, other=float("-inf"))
    mx = tl.max(lse, axis=0)
    mx = tl.where(mx == float("-inf"), 0.0, mx)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    tot = 0.0
    for s0 in range(0, n_splits, CHUNK_S):
        sc = s0 + tl.arange(0, CHUNK_S)
        pr = sc.to(tl.int64) * R + r
        w = tl.math.exp2(tl.load(plse_ptr + pr, mask=sc < n_splits, other=float("-inf")) - mx)
        o = tl.load(po_ptr + pr[:, None] * HEAD_D + offs_d[None, :], mask=(sc < n_splits)[:, None] & d_ok[None, :],
                    other=0.0)
        tot += tl.sum(w, axis=0)
        acc += tl.sum(w[:, None] * o, axis=0)
    out = acc / tl.where(tot > 0.0, tot, 1.0)
    tl.store(o_ptr + r * HEAD_D + offs_d, out.to(o_ptr.dtype.element_ty), mask=d_ok)


def tile_config(block_d: int, span: int, dtype: torch.dtype, batch: int, device_name: str = "") -> tuple[int, int, int]:
    """``(BLOCK_N, num_warps, num_stages)`` on CUDA for a padded head dim ``block_d``, a span of ``span`` positions,
    the inputs' dtype, the batch size and the device's name (``GPU_CONFIGS``; ``GPU_CONFIGS_BATCH1`` at batch 1,
    ``GPU_CONFIGS_BATCH1_H200`` there on an H200, ``GPU_CONFIGS_LONG`` from ``LONG_SPAN`` positions,
    ``GPU_CONFIGS_F32``)."""
    if dtype == torch.float32:
        return GPU_CONFIGS_F32[block_d]
    batch1 = GPU_CONFIGS_BATCH1_H200 if "H200" in device_name else GPU_CONFIGS_BATCH1
    if batch == 1 and block_d in batch1:
        return batch1[block_d]
    if span >= LONG_SPAN and block_d in GPU_CONFIGS_LONG:
        return GPU_CONFIGS_LONG[block_d]
    return GPU_CONFIGS[block_d]


def occupancy(block_m: int, block_n: int, block_d: int, stages: int, esize: int) -> int:
    """Programs per SM that the shared memory allows (K and V tiles of ``stages - 1`` pipeline buffers + q)."""
    smem = max(stages - 1, 1) * 2 * block_n * block_d * esize + block_m * block_d * esize + 1024
    return max(1, min(4, SMEM_PER_SM // smem))


def num_splits(base: int, span: int, block_n: int, *, sms: int, slots: int, batch: int, on_cuda: bool) -> int:
    """Split count from the device and the static shapes (never from the ``kv_lens`` values: no host sync).

    ``base``: programs per split (batch x KV heads x query-row blocks); ``span``: most positions a query can see
    (cache capacity, or the window); ``sms``: the device's SM count; ``slots``: programs it runs at once (SMs x
    occupancy); ``batch``: sequences in the batch. The rule takes the larger of two counts, then caps it:

    * **fill**: ``sms // base`` (at least 1), the most splits that keep every program on an SM of its own in a
      single wave. At batch 1 more programs than SMs lose even while they still fit the slots: on the H100 (132
      SMs, 2 slots each at D=128) B1 Hkv8 measured 16 splits (128 programs) at 56.0 us for kv 32k and 190.0 us for
      kv 128k, against 62.6 / 195.3 us with 32 / 33 splits (256 / 264 programs, two per SM) and 87.9 / 217.0 us
      with 64. Each extra program pays its own prologue (q load, pipeline fill) and the partials grow.
    * **ragged balance** (batch > 1 only): ``min(RAGGED_SPLITS, RAGGED_WAVES * slots // base,
      span // RAGGED_MIN_KEYS)``. The split length is fixed by the span, so a sequence of ``n`` positions keeps
      ``ceil(n / chunk)`` programs busy and the others exit at once: with batch > 1 the lengths may differ, and
      a few long splits then finish long after the SMs that held the short sequences went idle. Splits of about
      1/16 of the span let the block scheduler spread the real work over the SMs: B8 Hkv8 kv 32k with lengths
      1k-32k measured 251.4 us with 4 splits (the old one-wave rule), 253.2 with 8, 205.7 with 16 and 214.3 with
      32 (64-key tiles, two programs per SM). The shapes cannot tell ragged from equal lengths, and equal
      lengths prefer fewer, longer splits (372 us with 16, 361 with 4): the plan's balance (see DecodePlan)
      sizes the live splits from the real lengths within this grid.
      ``RAGGED_WAVES`` fades the balance out at large batches, where ``base`` alone is several programs per slot
      and the scheduler already balances (B32 Hkv8: 2-4 splits, B >= 128 none); ``RAGGED_MIN_KEYS`` keeps the
      fp32 partials + merge (``G * D * 4`` bytes written and read per program, against ``chunk * D * 4``
      bytes of K/V: under 1% at 2048 positions and G = 8) and the per-program prologue small, and keeps short
      caches (under 4k positions) at the fill count, where the whole call is launch and latency bound.

    Caps: ``ceil(span / max(MIN_SPLIT_KEYS, block_n))`` and ``MAX_SPLITS``. These counts come from the span
    (the capacity); a sequence that sees fewer positions takes shorter splits in the kernel (``n / splits``
    rounded up to ``BLOCK_N``, at least ``MIN_SPLIT_KEYS``: ``SHORTEN_SPLITS``) and only the splits that hold
    positions run, so a short sequence pays neither idle programs nor a merge: with one live split the
    program writes the output directly. A split that has work pays a fixed tail (partials, the arrival, the
    merge: about 1.5 us on the H100), and splits of 128 positions measured best on the short caches of the
    model runner (bench/decode_small.py, bench/results/2026-11-22-h100-session5/; graph replay, cache of
    1024): B1 Hkv8 D=128 kv 1024 8.75 us with 8 splits against 9.73 / 9.88 with 4 / 16 and 18.5 with one;
    D=256 (G=2) 12.0 us with 8 against 13.9 / 12.9 with 4 / 16; SmolLM2 (D=64, 3 KV heads) kv 600 6.4 us with
    8 against 7.2 / 9.6 with 4 / 1. Sequences of a few positions take one live split whatever the count
    (3.3-3.4 us at kv 16), and a 600-position sequence in a 32k cache 8.0 us against 12.6 with the plan's
    split length (the fill count's 2k positions).
    On the H100 (132 SMs, bf16 D=128: 64-key tiles, at batch > 1 from 16k positions 128-key tiles and one
    program per SM) this gives B1 Hkv8: 8 / 16 / 16 / 16 splits at kv 1k / 8k / 32k / 128k; B8 Hkv8: 2 / 4 / 8 / 8; B32 Hkv8:
    1 / 4 / 2 / 2. The measured shapes and
    the predictions are tabulated in bench/results/2026-11-22-h100-attention/NOTES.md,
    bench/results/2026-11-22-h100-session5/NOTES.md and bench/results/2026-11-22-h100-session7/NOTES.md.

    ``SPLITS_OVERRIDE`` (benchmarks, sweeps, tests) forces a count, capped at one ``block_n`` tile per split;
    off CUDA (the interpreter) a few short splits keep the tests fast and still exercise the merge.
    """
    if SPLITS_OVERRIDE is not None:
        return max(1, min(SPLITS_OVERRIDE, triton.cdiv(span, block_n)))
    if not on_cuda:
        return max(1, min(INTERPRETER["max_splits"], triton.cdiv(span, INTERPRETER["min_split_keys"])))
    splits = max(1, sms // base)
    if batch > 1:
        splits = max(splits, min(RAGGED_SPLITS, RAGGED_WAVES * slots // base, span // RAGGED_MIN_KEYS))
    by_len = triton.cdiv(span, max(MIN_SPLIT_KEYS, block_n))
    return max(1, min(splits, by_len, MAX_SPLITS))


def merge_mode(programs: int, sms: int, device: torch.device) -> str:
    """How the splits are merged: ``"fused"`` (the last split of a row block, in the decode launch), ``"pdl"``
    (a second launch, programmatic dependent) or ``"launch"`` (a plain second launch).

    ``programs``: the decode grid; ``sms``: the device's SM count. One program per SM at most (batch 1) takes
    the second launch, PDL where the device has it (:func:`~mlx_native.kernels.launch.pdl_available`); larger
    grids merge fused. The fused merge needs its counters zeroed outside a CUDA-graph capture
    (:func:`~mlx_native.kernels.arrival.can_fuse`): a plan first built during a capture merges in a second
    launch. H100, graph replay (session 14, ``bench/decode_merge_sweep.py``): B1 Hkv8 D128 kv 8k / 32k / 128k
    21.1 / 54.5 / 184.0 us fused, 18.3 / 52.2 / 180.8 with PDL, 18.5 / 52.0 / 180.3 plain; B8 kv32k 360.6 fused
    against 364.5 with PDL (ragged lengths 214.3 / 218.5).
    """
    mode = MERGE_OVERRIDE or ("pdl" if programs <= sms else "fused")
    if mode == "fused" and not can_fuse(device):
        return "launch"
    if mode == "pdl" and not pdl_available(device):
        return "launch"
    return mode


def split_layout(span: int, splits: int, block_n: int) -> tuple[int, int]:
    """``(chunk, splits)``: positions per split (a multiple of ``block_n``) and the split count that chunk gives
    (rounding the chunk up can leave fewer splits than asked, e.g. 33 asked over 32k positions -> 32)."""
    chunk = triton.cdiv(triton.cdiv(span, splits), block_n) * block_n
    return chunk, triton.cdiv(span, chunk)


def decode_geometry(q: torch.Tensor, k_cache: torch.Tensor, window: int) -> tuple[int, ...]:
    """``(B, Hq, Lq, D, Hkv, C, G, BLOCK_D, BLOCK_M, m_blocks, span)`` of a decode call: ``G`` query heads per KV
    head, the ``G x Lq`` query rows of a KV head in ``m_blocks`` blocks of ``BLOCK_M``, ``span`` the cache positions
    one query can see (the capacity ``C``, or the window)."""
    b, hq, lq, d = q.shape
    hkv, cap = k_cache.shape[1], k_cache.shape[2]
    g = hq // hkv
    block_m = min(MAX_BLOCK_M, max(16, next_pow2(g * lq)))
    span = cap if window <= 0 else min(cap, window + lq - 1)
    return b, hq, lq, d, hkv, cap, g, max(16, next_pow2(d)), block_m, triton.cdiv(g * lq, block_m), span


class DecodePlan:
    """The decode kernel (and, when :func:`merge_mode` says so, the reduce kernel) prepared for one signature of
    (q, caches, kv_lens) and options.

    Grid ``(splits, B * Hkv, m_blocks)``: axis 0 the split of the visible range, axes 1-2 one "column" per
    (sequence, KV head, block of ``BLOCK_M`` packed query rows).

    Batches (B > 1, more splits than ``BALANCE_SPLITS``) are balanced: in the kernel a sequence of ``n`` visible
    positions takes splits of ``max(total / (B * BALANCE_SPLITS), n / splits)`` positions (``total``: the
    batch's visible positions, summed from ``kv_lens`` by every program; rounded up to ``BLOCK_N``, at least
    ``MIN_SPLIT_KEYS``, at most the span / ``BALANCE_SPLITS``). A batch of equal lengths runs ``BALANCE_SPLITS``
    long splits per sequence (fewer programs, each paying its prologue and merge once); in a ragged batch the
    long sequences take more splits, the short ones fewer. The programs beyond a sequence's live splits exit at
    once. Measured on the H100 (B8 Hkv8 kv 32k D=128, session 7): 8 splits of 128-key tiles balanced to a mean
    of 4 ran 359.8 us on equal lengths and 202.3 us on lengths 1k-32k, against 372.1 / 201.8 us for 16 splits of
    64-key tiles without balancing; a mean of 2 lost on both (400.8 / 219.9 with 64-key tiles), and a grid of
    twice the plan's count (room for more splits of the long sequences) never paid (session 6).

    With several splits each program writes its
    fp32 partials (``po [splits, B*Hq*Lq, D]``, ``plse [splits, B*Hq*Lq]``, fresh buffers every call). A
    fused merge (:func:`merge_mode`) combines them in the same launch:

    * The plan owns ``counters``: int32 ``[B * Hkv, m_blocks]``, one per column, zeroed once when the plan is
      built. The splits of a column that hold positions of its sequence (``live``, computed in the kernel
      from the sequence length: the others exit at once) each store their partials and increment the
      column's counter; the one that reads ``live - 1`` arrived last, merges the column's partials into the
      output (:func:`_merge_splits`) and stores 0 back. With one live split that program writes the output
      directly and no counter is touched. A launch therefore
      leaves every counter at zero, so the next call, and a CUDA-graph replay (which reuses the counters of
      the captured call), starts from zero without a memset.
    * Memory ordering: a CTA barrier orders all the program's partial stores before the atomic increment
      (issued by one thread, ``sem="acq_rel", scope="gpu"``). Its release half publishes the partials GPU-wide;
      the increments of one counter form a release sequence, so the acquire half of the last increment makes
      every other split's partials visible to the merging program, which reads them with L1-bypassing
      (``.cg``) loads. The counter reset needs no ordering: no other program of this launch touches that
      counter any more, and the next launch on the stream starts after this one ends.
    * One plan must not run concurrently with itself: two launches in flight at once (two streams, or two
      replays of graphs captured from it on different streams) would share the counters. Build the plan
      (the first call) outside a CUDA-graph capture: the counters are zeroed there; a plan first built
      during a capture merges in a second launch instead (no state kept between calls).

    Otherwise :func:`_reduce_kernel` merges them in a second launch; as a programmatic dependent launch the
    decode programs let it launch at their start (``PDL``) and it waits for the whole decode grid in the
    kernel. With one split the decode kernel writes the output and no merge runs.
    """

    def __init__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_lens: torch.Tensor, *,
                 window: int, softcap: float, k_new: Optional[torch.Tensor] = None,
                 v_new: Optional[torch.Tensor] = None, rope: Optional[tuple[int, bool, float, bool]] = None):
        b, hq, lq, d, hkv, cap, g, block_d, block_m, m_blocks, span = decode_geometry(q, k_cache, window)
        self.shape, self.dtype, self.device = (b, hq, lq, d), q.dtype, q.device
        on_cuda = q.is_cuda and not env.settings.triton_interpret
        if on_cuda:
            info = device_info(q.device)
            block_n, warps, stages = tile_config(block_d, span, q.dtype, b, info.name)
            sm_count = info.sm_count
        else:
            block_n, warps, stages, sm_count = INTERPRETER["block_n"], 4, 1, 1
        slots = sm_count * occupancy(block_m, block_n, block_d, stages, q.element_size())
        min_keys = MIN_SPLIT_KEYS if on_cuda else INTERPRETER["min_split_keys"]
        splits = num_splits(b * hkv * m_blocks, span, block_n, sms=sm_count, slots=slots, batch=b, on_cuda=on_cuda)
        chunk, seq_splits = split_layout(span, splits, block_n)
        self.rows = b * hq * lq
        min_chunk = min(chunk, triton.cdiv(min_keys, block_n) * block_n) if SHORTEN_SPLITS else chunk
        multi = seq_splits > 1
        mean_splits = min(seq_splits, BALANCE_SPLITS or seq_splits)
        balance = multi and b > 1 and SHORTEN_SPLITS and mean_splits < seq_splits
        if balance:  # splits up to the span / mean_splits
            chunk = split_layout(span, mean_splits, block_n)[0]
        self.splits = seq_splits
        append = k_new is not None
        self.ints = (*q.stride()[:3], *k_cache.stride()[:3], *v_cache.stride()[:3],
                     *(k_new.stride()[:3] if append else (0, 0, 0)), *(v_new.stride()[:3] if append else (0, 0, 0)),
                     hq, lq, cap, window, self.rows, chunk, min_chunk, b, mean_splits)
        rope_dims, traditional, base, has_freqs = rope or (0, False, 0.0, False)
        self.rope_half = rope_dims // 2
        self.table = inv_freq_table(rope_dims, base, q.device) if rope and not has_freqs else None
        mode = merge_mode(self.splits * b * hkv * m_blocks, sm_count, q.device) if multi else None
        fuse, reduce_pdl = mode == "fused", mode == "pdl"
        block_s = next_pow2(self.splits)
        self.counters = counters((b * hkv, m_blocks), q.device) if fuse else None
        self.launch = dependent_launch(
            _decode_kernel, (self.splits, b * hkv, m_blocks),
            dict(G=g, SINGLE=not multi, FUSE=fuse, WINDOW=window > 0, MULTI_Q=lq > 1, SOFTCAP=softcap > 0,
                 BALANCE=balance, BLOCK_B=next_pow2(b) if balance else 1, BLOCK_M=block_m, BLOCK_N=block_n,
                 BLOCK_S=block_s, BLOCK_D=block_d, HEAD_D=d, EVEN_D=block_d == d,
                 PRECISION="ieee" if q.dtype == torch.float32 else "tf32", APPEND=append, ROPE=rope is not None,
                 ROPE_TRADITIONAL=traditional, ROPE_FREQS=has_freqs, BLOCK_L=max(16, next_pow2(lq))),
            q.device, reduce_pdl, num_warps=warps, num_stages=stages,
        )
        self.reduce = None
        if multi and not fuse:
            self.reduce = Launch(
                _reduce_kernel, (self.rows,),
                dict(BLOCK_S=block_s, CHUNK_S=min(block_s, max(1, 4096 // block_d)), BLOCK_D=block_d, HEAD_D=d,
                     PDL=reduce_pdl),
                num_warps=4, pdl=reduce_pdl,
            )

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_lens: torch.Tensor,
                 scale: float, softcap: float, k_new: Optional[torch.Tensor] = None,
                 v_new: Optional[torch.Tensor] = None, freqs: Optional[torch.Tensor] = None,
                 rope_scale: float = 1.0) -> torch.Tensor:
        """``out [B, Hq, Lq, D]`` in q's dtype (one launch, or two without the fused merge); with ``k_new``,
        ``v_new`` (the plan's APPEND) the new tokens are written to the caches too."""
        out = empty(self.shape, dtype=self.dtype, device=self.device)
        d = self.shape[3]
        if self.splits == 1:
            po = plse = out
        else:
            po = empty((self.splits, self.rows, d), dtype=torch.float32, device=self.device)
            plse = empty((self.splits, self.rows), dtype=torch.float32, device=self.device)
        cnt = self.counters if self.counters is not None else out
        cap_in = scale / softcap if softcap > 0 else 0.0
        # the kernel reads freqs with unit stride (memory.strided_vector); the plan does not see the tensor, and
        # contiguous() of a contiguous vector is the tensor itself
        table = freqs.contiguous() if freqs is not None else self.table
        self.launch(q, k_cache, v_cache, kv_lens, out, po, plse, cnt, k_new if k_new is not None else q,
                    v_new if v_new is not None else q, table if table is not None else q, *self.ints, scale * LOG2E,
                    cap_in, softcap * LOG2E, self.rope_half, rope_scale)
        if self.reduce is not None:
            self.reduce(po, plse, out, self.rows, self.splits)
        return out
