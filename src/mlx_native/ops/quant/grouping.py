"""Routed rows sorted by expert into blocks of one expert, on the device, without a host sync: the layout that the
expert-grouped kernels (``qmm.RoutedLaunch``'s tiled kernel, ``ops/moe/grouped.py``) read.

Three small launches (:class:`RowGrouping`): each row takes a slot among its expert's rows by an atomic counter
(:func:`_rank_kernel`); one program turns the counts into block-padded starts, the expert of every block, the
number of blocks in use, fills the row table with -1 and re-arms the counters (:func:`_layout_kernel`); each row
writes its id at its expert's start plus its slot (:func:`_place_kernel`). The order of an expert's rows within
its blocks follows the atomics (it varies from run to run); every kernel that reads the table computes each row
on its own, so results do not depend on it. (The torch form it replaced, a stable sort and five scans, took 74-135
us of graph replay on an H200 for 256-16384 rows, session 33 run 2: more than the expert matmuls at 256 rows.)
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...runtime.memory import empty


@triton.jit
def _bucket(erow_ptr, r, ok, n_experts):
    """Expert ids of rows ``r`` as int32 buckets (ids outside ``[0, n_experts)``: the last bucket, ``n_experts``)."""
    e = tl.load(erow_ptr + r, mask=ok, other=0)
    return tl.where((e >= 0) & (e < n_experts), e, n_experts).to(tl.int32)


@triton.jit
def _rank_kernel(erow_ptr, cnt_ptr, rank_ptr, n_rows, n_experts, BR: tl.constexpr):
    """``rank[r]``: row ``r``'s slot among the rows of its bucket (an atomic counter per bucket)."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    ok = r < n_rows
    e = _bucket(erow_ptr, r, ok, n_experts)
    rank = tl.atomic_add(cnt_ptr + e, tl.full([BR], 1, tl.int32), mask=ok)
    tl.store(rank_ptr + r, rank, mask=ok)


@triton.jit
def _layout_kernel(cnt_ptr, start_ptr, bexp_ptr, rows_ptr, nblk_ptr, n_experts, n_blocks,
                   BM: tl.constexpr, BE: tl.constexpr, BB: tl.constexpr):
    """One program: the ``n_experts + 1`` bucket counts -> ``start`` (first slot of each bucket, its rows padded to
    a multiple of ``BM``), ``bexp[b]`` (bucket of block ``b``; ``n_experts + 1`` past the last block in use),
    ``nblk`` (blocks in use), ``rows`` all -1; the counts are set back to 0 for the next call."""
    ee = tl.arange(0, BE)
    eok = ee <= n_experts
    c = tl.load(cnt_ptr + ee, mask=eok, other=0)
    padded = (c + BM - 1) // BM * BM
    end = tl.cumsum(padded, axis=0)
    tl.store(start_ptr + ee, end - padded, mask=eok)
    tl.store(cnt_ptr + ee, tl.zeros([BE], tl.int32), mask=eok)
    tl.store(nblk_ptr, tl.sum(padded, axis=0) // BM)
    for b0 in range(0, n_blocks, BB):
        b = b0 + tl.arange(0, BB)
        bok = b < n_blocks
        below = (end[None, :] <= (b * BM)[:, None]) & eok[None, :]
        tl.store(bexp_ptr + b, tl.sum(below.to(tl.int32), axis=1), mask=bok)
        tl.store(rows_ptr + b[:, None] * BM + tl.arange(0, BM)[None, :], tl.full([BB, BM], -1, tl.int32),
                 mask=bok[:, None])


@triton.jit
def _place_kernel(erow_ptr, rank_ptr, start_ptr, rows_ptr, n_rows, n_experts, BR: tl.constexpr):
    """``rows[start[bucket] + rank[r]] = r``."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    ok = r < n_rows
    e = _bucket(erow_ptr, r, ok, n_experts)
    dest = tl.load(start_ptr + e, mask=ok, other=0) + tl.load(rank_ptr + r, mask=ok, other=0)
    tl.store(rows_ptr + dest, r, mask=ok)


def max_row_blocks(n_rows: int, n_experts: int, bm: int) -> int:
    """Blocks of ``bm`` rows that ``n_rows`` rows over ``n_experts`` experts (and the invalid bucket) can fill."""
    return triton.cdiv(n_rows + (n_experts + 1) * (bm - 1), bm)


class RowGrouping:
    """``n_rows`` routed rows over ``n_experts`` experts into blocks of ``bm`` rows of one expert.

    Call with ``erow [n_rows]`` (int32 / int64 expert of each row; ids outside ``[0, n_experts)`` go to a last
    "invalid" bucket, whose blocks have expert ``n_experts``) -> ``(rows [max_blocks * bm]`` int32 row ids, -1 =
    padding, ``block_expert [max_blocks]`` int32, ``n_blocks [1]`` int32``); ``max_blocks``
    (:func:`max_row_blocks`) depends on the sizes only. The plan owns the per-bucket counters, which each call
    sets back to 0: one grouping must not run on two streams at once.
    """

    BR = 1024  # rows per program of the rank and place launches

    def __init__(self, n_rows: int, n_experts: int, bm: int, device):
        self.n_rows, self.n_experts, self.bm, self.device = n_rows, n_experts, bm, device
        self.max_blocks = max_row_blocks(n_rows, n_experts, bm)
        self.counts = torch.zeros(n_experts + 1, dtype=torch.int32, device=device)
        grid = (triton.cdiv(n_rows, self.BR),)
        self.rank = Launch(_rank_kernel, grid, dict(BR=self.BR), num_warps=4)
        self.place = Launch(_place_kernel, grid, dict(BR=self.BR), num_warps=4)
        be = triton.next_power_of_2(n_experts + 1)
        self.layout = Launch(_layout_kernel, (1,), dict(BM=bm, BE=be, BB=max(1, min(64, 8192 // be))), num_warps=4)

    def __call__(self, erow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        erow = erow.reshape(-1)
        rank = empty((self.n_rows,), dtype=torch.int32, device=self.device)
        start = empty((self.n_experts + 1,), dtype=torch.int32, device=self.device)
        rows = empty((self.max_blocks * self.bm,), dtype=torch.int32, device=self.device)
        bexp = empty((self.max_blocks,), dtype=torch.int32, device=self.device)
        nblk = empty((1,), dtype=torch.int32, device=self.device)
        self.rank(erow, self.counts, rank, self.n_rows, self.n_experts)
        self.layout(self.counts, start, bexp, rows, nblk, self.n_experts, self.max_blocks)
        self.place(erow, rank, start, rows, self.n_rows, self.n_experts)
        return rows, bexp, nblk
