"""Stream-K decode attention for batches: the batch's K/V positions cut into one equal share per resident program.

The split decode (:mod:`.decode`) gives every (sequence, KV head) column whole splits of equal length, so a batch of
``B x Hkv`` columns runs ``columns x splits`` programs. On the H100 (132 SMs) a B8 Hkv8 kv32k batch is 256 equal
programs of one per SM, 1.94 waves run as 2; a ragged batch gets splits sized from the mean, and the long sequences'
last splits run after the short ones' SMs went idle. Here the work is the list of every column's visible positions in
units of ``UNIT`` keys (on the GPU a whole ``BLOCK_N`` tile), laid end to end (sequence by sequence, then KV head, then
query-row block), and program ``p`` of ``P`` (:func:`grid_programs`: at most SMs x programs per SM, all resident at
once) takes units ``[p T / P, (p + 1) T / P)`` of the ``T`` in the batch, counted from ``kv_lens`` in the kernel (no
host sync; a CUDA graph replays with new lengths). A unit finer than the tile is supported (a share then runs whole
tiles, then one masked tile; the interpreter tests use 4-key units of 16-key tiles) but measured slower on the H100:
with 16-key units B8 kv32k took 357.0 / 356.8 / 363.8 us against 355.8 / 356.2 / 362.5 with whole tiles in three runs
(session 15 run 2, session 16 runs 1-2), the ragged batch 207.9 / 211.3 against 206.0 / 209.5. A program walks its range
column by column: a column it holds whole is written as output directly; a column shared with other programs gets one
fp32 partial per program (normalized output and log2-sum-exp), and the last of them to arrive on the column's counter
merges (:mod:`mlx_native.kernels.arrival`). Every program has at most two shared columns, its first and its last, so the
partials take two slots per program: ``2p`` for the first column of ``p``, ``2p + 1`` for the last when it is not also
the first.

Where this runs instead of the split decode is :func:`use_stream`'s rule.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...kernels.arrival import arrive_last, can_fuse, counters, rearm
from ...kernels.dependent import dependent_launch, enter
from ...runtime import env
from ...runtime.device import device_info
from ...runtime.memory import empty
from ..common import next_pow2
from .decode import LOG2E, _decode_tiles, _store_partial, _visible, decode_geometry, occupancy, tile_config

STREAM_OVERRIDE = None  # benchmarks / tests: True or False instead of use_stream's rule
CONFIG_OVERRIDE = None  # benchmarks: a (BLOCK_N, num_warps, num_stages) instead of tile_config's
PROGRAMS_OVERRIDE = None  # benchmarks / tests: the program count P instead of grid_programs' choice
UNIT = None  # keys per work unit on the GPU (divides BLOCK_N); None: the tile
# (BLOCK_N, num_warps, num_stages) by BLOCK_D, 16-bit inputs; others take decode.tile_config's. H100, session 15
# run 1 (bench/decode_stream_sweep.py): D=128 128-key tiles, one program per SM (B8 kv32k 356.1 us against 358-362
# with 64-key tiles); D=256 64-key tiles, 3 stages (B8 kv32k 697.8 against 710 with the split decode's (32, 4, 4)).
GPU_CONFIGS = {128: (128, 4, 3), 256: (64, 4, 3)}
ALIGNED_GRID_MIN = 0.9  # grid_programs: the aligned count when it keeps at least this fraction of the programs
MIN_CACHE_BYTES = 256 << 20  # use_stream: batches whose K/V caches hold at least this many bytes
INTERPRETER = dict(block_n=16, unit=4, programs=5)


@triton.jit
def _tile_range(p, P, total):
    """``[lo, hi)``: the units of program ``p`` of ``P`` in a batch of ``total`` units, ``lo = p * total // P``
    in int32 without the product (which can pass 2^31; a 64-bit division is a slow subroutine call)."""
    share = total // P
    extra = total - share * P
    lo = p * share + p * extra // P
    hi = lo + share + ((p + 1) * extra // P - p * extra // P)
    return lo, hi


@triton.jit
def _owner(t, P, total):
    """The program whose range holds unit ``t`` (``t < total``): an fp32 estimate of ``(t + 1) P / total``,
    corrected by one step either way against :func:`_tile_range`."""
    p = ((t + 1).to(tl.float32) * P / total).to(tl.int32)
    p = tl.minimum(tl.maximum(p, 0), P - 1)
    lo, hi = _tile_range(p, P, total)
    p = tl.where(lo > t, p - 1, tl.where(hi <= t, p + 1, p))
    return p


@triton.jit
def _merge_column(po_ptr, plse_ptr, c0, c1, P, total, row_ok, offs_d, d_ok, BLOCK_M: tl.constexpr,
                  BLOCK_D: tl.constexpr, HEAD_D: tl.constexpr):
    """``[BLOCK_M, BLOCK_D]`` fp32 output of the column of units ``[c0, c1)`` from the partials of every program
    that holds part of it: ``p_first`` (its slot ``2p`` when the column is its first, else ``2p + 1``) to
    ``p_last`` (slot ``2p``). Programs with no unit (``total < P``) are skipped. Online: the running max of
    the log2-sum-exps rescales the sum. Loads bypass L1: other SMs wrote the partials in this launch."""
    p_first = _owner(c0, P, total)
    p_last = _owner(c1 - 1, P, total)
    rows = tl.arange(0, BLOCK_M)
    mx = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    tot = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for pq in range(p_first, p_last + 1):
        q_lo, q_hi = _tile_range(pq, P, total)
        slot = 2 * pq + ((pq == p_first) & (q_lo != c0)).to(tl.int32)
        pr = slot.to(tl.int64) * BLOCK_M + rows
        ok = row_ok & (rows < tl.where(q_lo < q_hi, BLOCK_M, 0))  # (a vector: the interpreter's bool & 0-d is int)
        lse = tl.load(plse_ptr + pr, mask=ok, other=float("-inf"), cache_modifier=".cg")
        o = tl.load(po_ptr + pr[:, None] * HEAD_D + offs_d[None, :], mask=ok[:, None] & d_ok[None, :], other=0.0,
                    cache_modifier=".cg")
        m_new = tl.maximum(mx, lse)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(mx - m_use)
        w = tl.math.exp2(lse - m_use)
        tot = tot * alpha + w
        acc = acc * alpha[:, None] + w[:, None] * o
        mx = m_new
    return acc / tl.where(tot > 0.0, tot, 1.0)[:, None]


@triton.jit
def _stream_kernel(
    q_ptr,  # [B, Hq, Lq, D] (strides sq_*)
    k_ptr,  # [B, Hkv, C, D] cache (strides sk_*)
    v_ptr,  # [B, Hkv, C, D] cache (strides sv_*)
    lens_ptr,  # [B] int32/int64: tokens in the cache, current queries included
    o_ptr,  # [B, Hq, Lq, D] contiguous output
    po_ptr,  # [2P, BLOCK_M, D] fp32 partial outputs of shared columns
    plse_ptr,  # [2P, BLOCK_M] fp32 partial log2-sum-exp
    cnt_ptr,  # [B * Hkv * m_blocks] int32 arrival counters, zero between launches
    sq_b, sq_h, sq_l,
    sk_b, sk_h, sk_s,
    sv_b, sv_h, sv_s,
    Hq, Lq, C, window,
    n_seqs,  # B
    m_blocks,  # query-row blocks per KV head: cdiv(G * Lq, BLOCK_M)
    qk_scale,  # scale * log2(e)
    softcap_in,  # scale / softcap
    softcap_out,  # softcap * log2(e)
    G: tl.constexpr,  # query heads per KV head
    WINDOW: tl.constexpr,  # sliding window; the cache may be a ring (slot = pos % C)
    MULTI_Q: tl.constexpr,  # Lq > 1: causal mask among the queries
    SOFTCAP: tl.constexpr,
    BLOCK_B: tl.constexpr,  # next_pow2(B)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UNIT: tl.constexpr,  # keys per work unit (divides BLOCK_N): the granularity of the programs' shares
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
    EVEN_D: tl.constexpr,
    PRECISION: tl.constexpr,
    PDL: tl.constexpr = 0,  # kernels/dependent.py: 1 a programmatic dependent launch that waits first
):
    enter(PDL)
    p = tl.program_id(0)
    cols = (Hq // G) * m_blocks  # columns per sequence
    seq = tl.arange(0, BLOCK_B)
    lens = tl.load(lens_ptr + seq, mask=seq < n_seqs, other=0)
    n_all, lo_all = _visible(lens, Lq, C, window, WINDOW)
    # work units of UNIT keys per column; a sequence with no visible key takes one (its program writes the zeros)
    units = tl.where(seq < n_seqs, tl.maximum(tl.cdiv(n_all - lo_all, UNIT), 1), 0)
    work = units * cols
    seq_end = tl.cumsum(work, 0)  # the batch's units: sequence b holds [seq_end[b] - work[b], seq_end[b])
    total = tl.sum(work, 0)
    P = tl.num_programs(0)
    t_lo, t_hi = _tile_range(p, P, total)

    rows = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_D
    cur = t_lo
    while cur < t_hi:
        b = tl.sum((seq_end <= cur).to(tl.int32), 0)
        this = seq == b
        nt = tl.sum(tl.where(this, units, 0), 0)
        c0 = tl.sum(tl.where(this, seq_end - work, 0), 0)  # first unit of sequence b ...
        col = (cur - c0) // nt
        c0 += col * nt  # ... then of this column
        c1 = c0 + nt
        seg_hi = tl.minimum(t_hi, c1)
        n = tl.sum(tl.where(this, n_all, 0), 0)
        lo = tl.sum(tl.where(this, lo_all, 0), 0)
        hk = col // m_blocks
        row = (col % m_blocks) * BLOCK_M + rows
        row_ok = row < G * Lq
        h = hk * G + row // Lq
        qi = row % Lq
        q_off = b.to(tl.int64) * sq_b + h.to(tl.int64) * sq_h + qi.to(tl.int64) * sq_l
        q = tl.load(q_ptr + q_off[:, None] + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        qpos = n - Lq + qi
        start = lo + (cur - c0) * UNIT  # whole BLOCK_N tiles from here, then one masked tile
        end = tl.minimum(lo + (seg_hi - c0) * UNIT, n)
        full_end = start + tl.maximum(end - start, 0) // BLOCK_N * BLOCK_N
        k_base = k_ptr + b.to(tl.int64) * sk_b + hk.to(tl.int64) * sk_h
        v_base = v_ptr + b.to(tl.int64) * sv_b + hk.to(tl.int64) * sv_h
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_base, v_base, sk_s, sv_s, start, full_end, end, qpos, C,
                                      window, qk_scale, softcap_in, softcap_out, False, WINDOW, MULTI_Q, SOFTCAP,
                                      BLOCK_N, BLOCK_D, HEAD_D, EVEN_D, PRECISION)
        acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_base, v_base, sk_s, sv_s, full_end, end, end, qpos, C,
                                      window, qk_scale, softcap_in, softcap_out, True, WINDOW, MULTI_Q, SOFTCAP,
                                      BLOCK_N, BLOCK_D, HEAD_D, EVEN_D, PRECISION)
        out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
        r = (b.to(tl.int64) * Hq + h) * Lq + qi
        st_mask = row_ok[:, None] & d_ok[None, :]
        o_offs = r[:, None] * HEAD_D + offs_d[None, :]
        if (cur == c0) & (seg_hi == c1):  # the whole column: no partials
            tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=st_mask)
        else:
            slot = 2 * p + (cur != t_lo).to(tl.int32)
            _store_partial(po_ptr, plse_ptr, slot.to(tl.int64) * BLOCK_M + rows, out, m_i, l_i, row_ok, st_mask,
                           offs_d, HEAD_D)
            sharing = tl.minimum(_owner(c1 - 1, P, total) - _owner(c0, P, total) + 1, nt)  # programs in the column
            cnt = cnt_ptr + b * cols + col
            if arrive_last(cnt, sharing):
                merged = _merge_column(po_ptr, plse_ptr, c0, c1, P, total, row_ok, offs_d, d_ok, BLOCK_M, BLOCK_D,
                                       HEAD_D)
                tl.store(o_ptr + o_offs, merged.to(o_ptr.dtype.element_ty), mask=st_mask)
                rearm(cnt)
        cur = seg_hi


STREAM_TRIGGER = False  # PDL: let the next launch be scheduled at the start (kernels/dependent.py)


def use_stream(q: torch.Tensor, k_cache: torch.Tensor, window: int) -> bool:
    """Whether ``flash_attn_decode`` runs the stream-K kernel instead of the split decode.

    It applies to 16-bit queries (calls that append new tokens take the split decode), where the arrival counters
    can be zeroed now (not inside a CUDA-graph capture, :func:`~mlx_native.kernels.arrival.can_fuse`). It is chosen for
    batches (B > 1) whose caches hold at least ``MIN_CACHE_BYTES`` of K/V within the span (capacity, or the
    window): H100 session 16 run 8 (bench/decode_stream_sweep.py --routes, graph replay, us, stream against split,
    D128 Hkv8 unless named): B8 kv32k 351.5 / 359.3 (cuDNN 351.9), ragged 1k-32k 208.6 / 215.9, kv128k 1375.8 /
    1386.7, B32 kv8k 352.4 / 367.8, B32 ragged 693.5 / 722.4, D256 B8 kv32k 696.1 / 709.1; at 256 MB B8 kv8k 94.4 /
    98.0, B16 kv4k 92.6 / 96.8, B2 kv32k 96.6 / 97.5, B4 ragged kv16k 50.7 / 56.5; under 256 MB the split decode won:
    B4 kv8k 52.1 / 52.8, B32 kv1k 50.9 / 52.3, B8 kv1k 17.9 / 18.8 (each program's partials and merge are a latency
    chain there).
    ``STREAM_OVERRIDE`` forces the choice where the kernel applies."""
    applies = q.dtype in (torch.float16, torch.bfloat16) and can_fuse(q.device)
    if STREAM_OVERRIDE is not None:
        return applies and STREAM_OVERRIDE
    b, _, _, d, hkv, _, _, _, _, _, span = decode_geometry(q, k_cache, window)
    return applies and large_batch(b, 2 * b * hkv * span * d * k_cache.element_size())


def large_batch(b: int, kv_bytes: int) -> bool:
    """:func:`use_stream`'s size rule: a batch (``b > 1``) whose span holds ``kv_bytes >= MIN_CACHE_BYTES`` of K + V."""
    return b > 1 and kv_bytes >= MIN_CACHE_BYTES


def grid_programs(n_cols: int, resident: int) -> int:
    """The grid of the stream-K kernel for ``n_cols`` columns (sequences x KV heads x query-row blocks) and
    ``resident`` programs that fit on the GPU at once: the count whose shares of equal-length columns start and end
    on column boundaries (``k`` programs per column when the columns fit ``k`` times, else ``j = cdiv(n_cols,
    resident)`` whole columns per program when ``j`` divides them) when it keeps at least ``ALIGNED_GRID_MIN`` of
    them, else ``resident``. A program whose share crosses a column restarts its load pipeline there (drain,
    prologue, a DRAM latency without loads in flight) and adds a merge. H100 session 16 runs 3 and 5, B8 Hkv8 kv32k
    (64 columns, 132 resident): 128 programs 351.9 / 352.3 us, 132 356.2, 64 (whole columns) 355.1 (cuDNN 352.4 /
    352.6); the ragged 1k-32k batch, where no count aligns, 209.4 on 128 against 206.0 on 132."""
    if n_cols <= resident:
        aligned = n_cols * (resident // n_cols)
    else:
        j = triton.cdiv(n_cols, resident)
        aligned = n_cols // j if n_cols % j == 0 else resident
    return aligned if aligned >= ALIGNED_GRID_MIN * resident else resident


def stream_config(block_d: int, span: int, dtype: torch.dtype, batch: int) -> tuple[int, int, int]:
    """``(BLOCK_N, num_warps, num_stages)`` on CUDA: ``CONFIG_OVERRIDE``, else ``GPU_CONFIGS``, else the split
    decode's :func:`~.decode.tile_config`."""
    return CONFIG_OVERRIDE or GPU_CONFIGS.get(block_d) or tile_config(block_d, span, dtype, batch)


class StreamPlan:
    """The stream-K decode kernel prepared for one signature of (q, caches, kv_lens) and options.

    Grid ``(P,)``: ``P`` from :func:`grid_programs` (at most SMs x programs per SM by the tile config's shared
    memory, every program resident at once); shares in units of ``UNIT`` keys (the whole tile on the GPU; the
    interpreter: 4-key units of 16-key tiles, so shares start and end inside tiles). The plan owns the arrival
    counters (int32 ``[B * Hkv * m_blocks]``, zeroed when the plan is built; each launch leaves them at zero): build
    it outside a CUDA-graph capture, and do not run one plan on two streams at once. Partials: ``po [2P, BLOCK_M,
    D]``, ``plse [2P, BLOCK_M]`` fp32, fresh every call.
    """

    def __init__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_lens: torch.Tensor, *,
                 window: int, softcap: float):
        b, hq, lq, d, hkv, cap, g, block_d, block_m, m_blocks, span = decode_geometry(q, k_cache, window)
        self.shape, self.dtype, self.device = (b, hq, lq, d), q.dtype, q.device
        on_cuda = q.is_cuda and not env.settings.triton_interpret
        if on_cuda:
            block_n, warps, stages = stream_config(block_d, span, q.dtype, b)
            unit = UNIT or block_n
            resident = device_info(q.device).sm_count * occupancy(block_m, block_n, block_d, stages,
                                                                  q.element_size())
            programs = grid_programs(b * hkv * m_blocks, resident)
        else:
            block_n, unit, warps, stages, programs = (INTERPRETER["block_n"], INTERPRETER["unit"], 4, 1,
                                                      INTERPRETER["programs"])
        self.programs = PROGRAMS_OVERRIDE or programs
        self.block_m = block_m
        self.counters = counters((b * hkv * m_blocks,), q.device)
        self.ints = (*q.stride()[:3], *k_cache.stride()[:3], *v_cache.stride()[:3], hq, lq, cap, window, b, m_blocks)
        self.launch = dependent_launch(
            _stream_kernel, (self.programs,),
            dict(G=g, WINDOW=window > 0, MULTI_Q=lq > 1, SOFTCAP=softcap > 0, BLOCK_B=next_pow2(b), BLOCK_M=block_m,
                 BLOCK_N=block_n, UNIT=unit, BLOCK_D=block_d, HEAD_D=d, EVEN_D=block_d == d, PRECISION="tf32"),
            q.device, STREAM_TRIGGER, num_warps=warps, num_stages=stages,
        )

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_lens: torch.Tensor,
                 scale: float, softcap: float) -> torch.Tensor:
        """``out [B, Hq, Lq, D]`` in q's dtype, one launch."""
        out = empty(self.shape, dtype=self.dtype, device=self.device)
        slots = 2 * self.programs * self.block_m
        po = empty((slots, self.shape[3]), dtype=torch.float32, device=self.device)
        plse = empty((slots,), dtype=torch.float32, device=self.device)
        cap_in = scale / softcap if softcap > 0 else 0.0
        self.launch(q, k_cache, v_cache, kv_lens, out, po, plse, self.counters, *self.ints, scale * LOG2E, cap_in,
                    softcap * LOG2E)
        return out
