"""Triton kernels for token selection: ``argmax`` and ``sample``.

``sample``: one program per row walks the vocabulary in ``BLOCK`` chunks;
``argmax``: a row is split over several programs when there are few rows (see
:class:`ArgmaxPlan`), one (value, index) reduction per ``BLOCK`` of columns.
No sort, no host sync, fixed configs: CUDA-graph capturable.

``sample``:
  1. row max ``m``; scaled logits ``z = (x - m) * inv_temp`` (``<= 0``);
  2. top-k: the k-th largest logit, found exactly by bisection on the
     order-preserving int32 key of the fp32 logits (32 counting passes);
  3. top-p: the largest logit ``t`` whose tail mass ``sum_{x >= t} exp(z)``
     (over the top-k survivors) is at least ``top_p`` times their total,
     again by bisection on the keys (32 passes);
  4. min-p: keep ``z >= log(min_p)`` (probability >= min_p x the max);
  5. Gumbel-max over the survivors: ``argmax(z + g)`` with
     ``g = -log(-log(u))``, ``u`` from a counter-based hash of
     (seed, row, token index): an exact sample of the renormalized
     distribution. Ties keep the lowest index.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.arrival import arrive_last, can_fuse, counters, rearm
from ...kernels.dependent import dependent_launch, enter
from ...kernels.launch import Launch
from ...runtime.device import device_info
from ...runtime.memory import empty
from ..common import next_pow2

BLOCK = 2048
NUM_WARPS = 8
PROGRAMS_PER_SM = 2  # argmax: split rows until about this many programs per SM
HASH_C1 = 0x21F0AAAD
HASH_C2 = 0x735A2D97
GOLDEN = 0x9E3779B9


@triton.jit
def _mix32(x):
    """A 32-bit integer hash (x: uint32)."""
    x = x ^ (x >> 16)
    x = x * 0x21F0AAAD
    x = x ^ (x >> 15)
    x = x * 0x735A2D97
    x = x ^ (x >> 15)
    return x


@triton.jit
def _order_key(x):
    """int32 key with the order of the fp32 values x (NaN mapped by the caller)."""
    b = x.to(tl.int32, bitcast=True)
    return tl.where(b >= 0, b, b ^ 0x7FFFFFFF)


@triton.jit
def _max_lowest_index(value1, index1, value2, index2):
    """``tl.reduce`` combine over (value, index) pairs: the larger value, the lower index on a tie."""
    first = (value1 > value2) | ((value1 == value2) & (index1 < index2))
    return tl.where(first, value1, value2), tl.where(first, index1, index2)


@triton.jit(do_not_specialize=["n_cols", "chunk"])
def _argmax_kernel(
    x_ptr,  # [R, V] logits (row stride stride_r), unit column stride
    out_ptr,  # [R] int64
    pmax_ptr, pidx_ptr,  # [R, P] fp32 / int32 partial maxima and their indices (SPLIT)
    cnt_ptr,  # [R] int32 arrival counters, zero between launches (SPLIT)
    stride_r,
    n_cols,
    chunk,  # columns per program along axis 1 (a multiple of BLOCK)
    BLOCK: tl.constexpr,
    SPLIT: tl.constexpr,  # P > 1 programs per row; the last to arrive merges (kernels/arrival.py)
    BLOCK_P: tl.constexpr,  # next_pow2(P)
    PDL: tl.constexpr = 0,
):
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    row = tl.program_id(0)
    part = tl.program_id(1)
    base = x_ptr + row.to(tl.int64) * stride_r
    cols = tl.arange(0, BLOCK)
    lo = part * chunk
    hi = tl.minimum(lo + chunk, n_cols)
    best = tl.full((), float("-inf"), tl.float32)
    best_i = lo
    for start in range(lo, hi, BLOCK):  # one iteration when the part is one block (decode)
        c = start + cols
        x = tl.load(base + c, mask=c < hi, other=float("-inf")).to(tl.float32)
        x = tl.where(x != x, float("-inf"), x)
        # masked lanes (-inf) sit after the valid ones: the lowest-index tie break never picks them
        block_max, block_i = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)
        better = block_max > best
        best_i = tl.where(better, start + block_i, best_i)
        best = tl.where(better, block_max, best)
    if SPLIT:
        n_parts = tl.num_programs(1)
        slot = row * n_parts + part
        tl.store(pmax_ptr + slot, best)
        tl.store(pidx_ptr + slot, best_i)
        if arrive_last(cnt_ptr + row, n_parts):
            p = tl.arange(0, BLOCK_P)
            ok = p < n_parts
            m = tl.load(pmax_ptr + row * n_parts + p, mask=ok, other=float("-inf"), cache_modifier=".cg")
            i = tl.load(pidx_ptr + row * n_parts + p, mask=ok, other=n_cols, cache_modifier=".cg")
            _, winner = tl.reduce((m, i), 0, _max_lowest_index)
            tl.store(out_ptr + row, winner.to(tl.int64))
            rearm(cnt_ptr + row)
    else:
        tl.store(out_ptr + row, best_i.to(tl.int64))


@triton.jit(do_not_specialize=["n_cols", "top_k"])
def _sample_kernel(
    x_ptr,  # [R, V] logits (row stride stride_r), unit column stride
    seed_ptr,  # [S] int64 seeds, S == 1 or R (seed_stride 0 or 1)
    out_ptr,  # [R] int64 sampled token ids
    stride_r,
    seed_stride,
    n_cols,
    top_k,
    inv_temp,
    top_p,
    log_min_p,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride_r
    cols = tl.arange(0, BLOCK)

    seed = tl.load(seed_ptr + row * seed_stride)
    lo32 = (seed & 0xFFFFFFFF).to(tl.uint32)
    hi32 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    key = _mix32(lo32 ^ _mix32(hi32 ^ _mix32(row.to(tl.uint32) + 0x9E3779B9)))

    # 1. row max
    m = tl.full((), float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        x = tl.load(base + c, mask=c < n_cols, other=float("-inf")).to(tl.float32)
        x = tl.where(x != x, float("-inf"), x)
        m = tl.maximum(m, tl.max(x, axis=0))
    m_key = _order_key(m)

    # 2. top-k threshold: largest t with count(key >= t) >= top_k
    thr = tl.full((), -2147483648, tl.int64)
    if HAS_TOP_K:
        lo = thr
        hi = m_key.to(tl.int64)
        for _ in range(32):
            mid = (lo + hi + 1) >> 1
            cnt = tl.zeros((), tl.int32)
            for start in range(0, n_cols, BLOCK):
                c = start + cols
                ok = c < n_cols
                x = tl.load(base + c, mask=ok, other=float("-inf")).to(tl.float32)
                x = tl.where(x != x, float("-inf"), x)
                cnt += tl.sum((ok & (_order_key(x).to(tl.int64) >= mid)).to(tl.int32), axis=0)
            take = cnt >= top_k
            lo = tl.where(take, mid, lo)
            hi = tl.where(take, hi, mid - 1)
        thr = lo

    # 3. top-p threshold over the top-k survivors
    if HAS_TOP_P:
        total = tl.zeros((), tl.float32)
        for start in range(0, n_cols, BLOCK):
            c = start + cols
            ok = c < n_cols
            x = tl.load(base + c, mask=ok, other=float("-inf")).to(tl.float32)
            x = tl.where(x != x, float("-inf"), x)
            keep = ok & (_order_key(x).to(tl.int64) >= thr)
            total += tl.sum(tl.where(keep, tl.exp((x - m) * inv_temp), 0.0), axis=0)
        target = top_p * total
        lo = thr
        hi = m_key.to(tl.int64)
        for _ in range(32):
            mid = (lo + hi + 1) >> 1
            mass = tl.zeros((), tl.float32)
            for start in range(0, n_cols, BLOCK):
                c = start + cols
                ok = c < n_cols
                x = tl.load(base + c, mask=ok, other=float("-inf")).to(tl.float32)
                x = tl.where(x != x, float("-inf"), x)
                keep = ok & (_order_key(x).to(tl.int64) >= mid)
                mass += tl.sum(tl.where(keep, tl.exp((x - m) * inv_temp), 0.0), axis=0)
            take = mass >= target
            lo = tl.where(take, mid, lo)
            hi = tl.where(take, hi, mid - 1)
        thr = lo

    # 4./5. min-p and Gumbel-max over the survivors
    best = tl.full((), float("-inf"), tl.float32)
    best_i = tl.full((), 0, tl.int32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        ok = c < n_cols
        x = tl.load(base + c, mask=ok, other=float("-inf")).to(tl.float32)
        x = tl.where(x != x, float("-inf"), x)
        z = (x - m) * inv_temp
        keep = ok & (_order_key(x).to(tl.int64) >= thr)
        if HAS_MIN_P:
            keep = keep & (z >= log_min_p)
        r = _mix32(_mix32(c.to(tl.uint32) ^ key) + key)
        u = ((r >> 8).to(tl.float32) + 0.5) * (1.0 / 16777216.0)
        g = -tl.log(-tl.log(u))
        score = tl.where(keep, z + g, float("-inf"))
        bm = tl.max(score, axis=0)
        bi = tl.min(tl.where(score == bm, c, n_cols), axis=0)
        better = bm > best
        best_i = tl.where(better, bi, best_i)
        best = tl.where(better, bm, best)
    tl.store(out_ptr + row, best_i.to(tl.int64))


def _block(n_cols: int) -> int:
    return min(BLOCK, next_pow2(n_cols))


class ArgmaxPlan:
    """argmax over the last dim of ``[..., V]`` logits.

    Few rows over a large vocabulary (decode: one row of 49k-256k logits) would leave all but a few SMs
    idle with one program per row, so each row is cut into ``P`` column ranges of whole ``BLOCK``s, about
    ``PROGRAMS_PER_SM`` programs per SM in all: a decode row gets one block per program (128256 columns:
    63 programs), so each program does one load and one (value, index) reduction. The last program of a
    row to finish merges the row's partials (no second launch).
    """

    def __init__(self, x: torch.Tensor):
        n_cols = x.shape[-1]
        self.rows = x.numel() // n_cols
        self.shape = tuple(x.shape[:-1])
        self.device = x.device
        block = _block(n_cols)
        parts = 1
        if x.is_cuda and can_fuse(x.device):
            target = PROGRAMS_PER_SM * device_info(x.device).sm_count
            parts = max(1, min(triton.cdiv(n_cols, block), target // max(self.rows, 1)))
        elif not x.is_cuda:  # the interpreter: a few short parts, so the tests exercise the merge
            parts = max(1, min(4, triton.cdiv(n_cols, block)))
        chunk = triton.cdiv(triton.cdiv(n_cols, parts), block) * block
        self.parts = triton.cdiv(n_cols, chunk)
        self.chunk = chunk
        split = self.parts > 1
        self.counters = counters((self.rows,), x.device) if split else None
        self.launch = dependent_launch(_argmax_kernel, (self.rows, self.parts),
                                       dict(BLOCK=block, SPLIT=split, BLOCK_P=next_pow2(self.parts)), x.device, True,
                                       num_warps=NUM_WARPS)

    def __call__(self, x2d: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Indices ``[*lead]`` int64, written into ``out`` (``[rows]`` int64, contiguous) when given."""
        if out is None:
            out = empty((self.rows,), dtype=torch.int64, device=self.device)
        if self.counters is None:
            self.launch(x2d, out, out, out, out, x2d.stride(0), x2d.shape[1], self.chunk)
        else:
            pmax = torch.empty((self.rows, self.parts), dtype=torch.float32, device=self.device)
            pidx = torch.empty((self.rows, self.parts), dtype=torch.int32, device=self.device)
            self.launch(x2d, out, pmax, pidx, self.counters, x2d.stride(0), x2d.shape[1], self.chunk)
        return out.view(self.shape)


class SamplePlan:
    def __init__(self, x: torch.Tensor, top_k: int, top_p: float, min_p: float):
        n_cols = x.shape[-1]
        self.rows = x.numel() // n_cols
        self.shape = tuple(x.shape[:-1])
        self.device = x.device
        self.launch = Launch(
            _sample_kernel, (self.rows,),
            dict(HAS_TOP_K=0 < top_k < n_cols, HAS_TOP_P=top_p < 1.0, HAS_MIN_P=min_p > 0.0,
                 BLOCK=_block(n_cols)),
            num_warps=NUM_WARPS)

    def __call__(self, x2d: torch.Tensor, seed: torch.Tensor, top_k: int, inv_temp: float, top_p: float,
                 log_min_p: float) -> torch.Tensor:
        out = empty((self.rows,), dtype=torch.int64, device=self.device)
        self.launch(x2d, seed, out, x2d.stride(0), 0 if seed.numel() == 1 else 1, x2d.shape[1], top_k, inv_temp,
                    top_p, log_min_p)
        return out.view(self.shape)
