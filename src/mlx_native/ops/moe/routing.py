"""Routing kernels: the top-k choice of experts per token, from router logits (``moe_route``) or from the hidden
rows and the router's weight in one launch (``moe_router``).

The router of a MoE layer is a small dense projection (``[E, hidden]``: 128 x 2048 in Qwen3-30B-A3B, 0.5 MB in
bf16). At decode sizes cuBLAS runs it as a mat-vec on a few thread blocks: 4.6-4.9 us a layer on an H200 (0.11 TB/s,
session 44), longer than the routing after it. :func:`_router_kernel` spreads the experts over the SMs (one program
per ``EB`` experts reads their rows once and dots them with each token's row in fp32), stores the fp32 logits, and
the last program to arrive (``kernels/arrival.py``) ranks them as :func:`_route_kernel` does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ...kernels.arrival import arrive_last, can_fuse, counters, rearm
from ...kernels.dependent import prefetch_l2
from ...kernels.launch import Launch, pdl_available
from ...kernels.math import sigmoid
from ...runtime import env
from ...runtime.memory import empty
from ..common import next_pow2
from .ref import router_logits

_MM_OUT_DTYPE = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 8)  # torch.mm(out_dtype=)


@triton.jit
def _choose(z, rows, row_ok, cols, col_ok, bias_ptr, ids_ptr, w_ptr, TOPK: tl.constexpr, SIGMOID: tl.constexpr,
            RENORM: tl.constexpr, HAS_BIAS: tl.constexpr, BR: tl.constexpr, BE: tl.constexpr, BKP: tl.constexpr):
    """Store the ``TOPK`` experts of each row of the fp32 logits ``z [BR, BE]`` (finite where ``row_ok`` and
    ``col_ok``) and their weights: ``TOPK`` rounds of (max, lowest id among the maxima). (Ranking every expert at
    once from an ``[E, E]`` table of who beats whom measured slower on the H100: 4.7 against 2.7 us for top-8 of
    128; one packed int64 max per round instead of max + min + sum: 2.61 us, no gain, not kept.)"""
    if SIGMOID:
        p = sigmoid(z)
    else:
        mx = tl.max(tl.where(col_ok[None, :], z, float("-inf")), axis=1)
        ez = tl.exp(z - mx[:, None])
        ez = tl.where(col_ok[None, :], ez, 0.0)
        p = ez / tl.sum(ez, axis=1)[:, None]
    p = tl.where(col_ok[None, :], p, 0.0)
    sel = p
    if HAS_BIAS:
        sel = p + tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    sel = tl.where(col_ok[None, :], sel, float("-inf"))
    slots = tl.arange(0, BKP)
    got_ids = tl.zeros([BR, BKP], dtype=tl.int32)
    got_w = tl.zeros([BR, BKP], dtype=tl.float32)
    for j in tl.static_range(TOPK):
        best = tl.max(sel, axis=1)
        idx = tl.min(tl.where(sel == best[:, None], cols[None, :], BE), axis=1)
        hit = cols[None, :] == idx[:, None]
        if HAS_BIAS:
            wj = tl.sum(tl.where(hit, p, 0.0), axis=1)
        else:  # sel is p
            wj = best
        got_ids = tl.where(slots[None, :] == j, idx[:, None], got_ids)
        got_w = tl.where(slots[None, :] == j, wj[:, None], got_w)
        sel = tl.where(hit, float("-inf"), sel)
    if RENORM:
        got_w = got_w / tl.sum(got_w, axis=1)[:, None]
    out = rows.to(tl.int64)[:, None] * TOPK + slots[None, :]
    mask = row_ok[:, None] & (slots < TOPK)[None, :]
    tl.store(ids_ptr + out, got_ids, mask=mask)
    tl.store(w_ptr + out, got_w, mask=mask)


@triton.jit(do_not_specialize=["n_rows"])
def _route_kernel(
    z_ptr,  # [T, E] router logits (row stride stride_z)
    bias_ptr,  # [E] selection bias (HAS_BIAS)
    ids_ptr,  # [T, TOPK] int32 out
    w_ptr,  # [T, TOPK] float32 out
    n_rows, n_experts, stride_z,
    TOPK: tl.constexpr, SIGMOID: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr,
    BR: tl.constexpr, BE: tl.constexpr, BKP: tl.constexpr, PDL: tl.constexpr,
):
    """``BR`` rows a program; with PDL the next launch (``moe_ffn``'s gate/up, which waits for this one in its
    kernel) may start at once."""
    if PDL:
        gdc_launch_dependents()
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    row_ok = rows < n_rows
    cols = tl.arange(0, BE)
    col_ok = cols < n_experts
    z = tl.load(z_ptr + rows.to(tl.int64)[:, None] * stride_z + cols[None, :], mask=row_ok[:, None] & col_ok[None, :],
                other=0.0).to(tl.float32)
    _choose(z, rows, row_ok, cols, col_ok, bias_ptr, ids_ptr, w_ptr, TOPK, SIGMOID, RENORM, HAS_BIAS, BR, BE, BKP)


@triton.jit(do_not_specialize=["n_rows"])
def _router_kernel(
    x_ptr,  # [T, hidden] rows (row stride stride_x)
    r_ptr,  # [E, hidden] router weight (row stride stride_r)
    z_ptr,  # [T, E] float32 logits, written here
    cnt_ptr,  # [groups] int32 arrival counters (zero between launches)
    bias_ptr, ids_ptr, w_ptr,  # as _route_kernel
    n_rows, n_experts, hidden, stride_x, stride_r, row_bytes,
    TOPK: tl.constexpr, SIGMOID: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr,
    EB: tl.constexpr, BK: tl.constexpr, BR: tl.constexpr, BE: tl.constexpr, BKP: tl.constexpr,
    LINES: tl.constexpr, PDL: tl.constexpr, ASM: tl.constexpr,
):
    """Program ``(p, g)`` dots experts ``[p EB, (p + 1) EB)`` with rows ``[g BR, (g + 1) BR)`` (``BK`` features a
    step, fp32) and stores their logits; the last program of group ``g`` to arrive (on counter ``g``) routes its
    rows. With ``PDL`` (a programmatic
    dependent launch) the program first asks L2 for its experts' rows (``LINES`` lines of 128 bytes each; nothing
    reads them into registers before the wait), lets the next launch be scheduled, then waits for the launch
    before (which writes x)."""
    experts = tl.program_id(0) * EB + tl.arange(0, EB)
    e_ok = experts < n_experts
    if PDL:
        lines = tl.minimum(tl.arange(0, LINES) * 128, row_bytes - 1)
        row0 = tl.minimum(experts, n_experts - 1).to(tl.int64) * stride_r
        prefetch_l2((r_ptr + row0[:, None]).to(tl.pointer_type(tl.int8)) + lines[None, :], ASM)
        gdc_launch_dependents()
        gdc_wait()
    row0 = tl.program_id(1) * BR
    rows = row0 + tl.arange(0, BR)
    row_ok = rows < n_rows
    acc = tl.zeros([BR, EB], dtype=tl.float32)
    for k0 in range(0, hidden, BK):
        ks = k0 + tl.arange(0, BK)
        k_ok = ks < hidden
        w = tl.load(r_ptr + experts.to(tl.int64)[:, None] * stride_r + ks[None, :],
                    mask=e_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        for r in tl.static_range(BR):  # unrolled: every row's load issued before the first sum
            r_ok = tl.full([BK], row0 + r, tl.int32) < n_rows
            xr = tl.load(x_ptr + (row0 + r).to(tl.int64) * stride_x + ks, mask=k_ok & r_ok, other=0.0)
            part = tl.sum(w * xr.to(tl.float32)[None, :], axis=1)
            acc = tl.where(rows[:, None] == row0 + r, acc + part[None, :], acc)
    tl.store(z_ptr + rows[:, None] * n_experts + experts[None, :], acc, mask=row_ok[:, None] & e_ok[None, :])
    if arrive_last(cnt_ptr + tl.program_id(1), tl.num_programs(0)):
        cols = tl.arange(0, BE)
        col_ok = cols < n_experts
        z = tl.load(z_ptr + rows[:, None] * n_experts + cols[None, :], mask=row_ok[:, None] & col_ok[None, :],
                    other=0.0, cache_modifier=".cg")
        _choose(z, rows, row_ok, cols, col_ok, bias_ptr, ids_ptr, w_ptr, TOPK, SIGMOID, RENORM, HAS_BIAS, BR, BE, BKP)
        rearm(cnt_ptr + tl.program_id(1))


def _route_constexprs(top_k: int, scoring: str, renormalize: bool, bias, pdl: bool) -> dict:
    return dict(TOPK=top_k, SIGMOID=scoring == "sigmoid", RENORM=renormalize, HAS_BIAS=bias is not None,
                BKP=next_pow2(top_k), PDL=pdl)


class RoutePlan:
    """``moe_route`` on ``logits [..., E]``: ``plan(logits, bias) -> (ids, weights)``, ``[..., top_k]``."""

    def __init__(self, logits, top_k, scoring, renormalize, bias, pdl=False):
        self.out_shape = (*logits.shape[:-1], top_k)
        self.empty = logits.numel() == 0
        if self.empty:
            return
        e = logits.shape[-1]
        t = logits.numel() // e
        be = next_pow2(e)
        br = max(1, min(next_pow2(t), 4096 // be))
        self.ints = (t, e, logits.reshape(t, e).stride(0))
        self.t, self.e = t, e
        self.launch = Launch(_route_kernel, (triton.cdiv(t, br),), dict(
            _route_constexprs(top_k, scoring, renormalize, bias, pdl), BR=br, BE=be),
            num_warps=4 if be * br >= 2048 else 1)

    def __call__(self, logits, bias):
        ids = empty(self.out_shape, dtype=torch.int32, device=logits.device)
        w = empty(self.out_shape, dtype=torch.float32, device=logits.device)
        z2 = logits.reshape(self.t, self.e)
        self.launch(z2, bias if bias is not None else z2, ids, w, *self.ints)
        return ids, w


class RouterPlan:
    """``moe_router``: the routing of ``x2 @ router.T`` (fp32 logits) for ``x2 [T, hidden]`` and ``router [E,
    hidden]``, ``plan(x2, router, bias) -> (ids, weights)`` ``[T, top_k]``.

    ``fused`` (up to ``MAX_ROWS`` rows, a plan built outside a CUDA-graph capture: it makes its counters now): one
    launch of :func:`_router_kernel`, rows in groups of ``GROUP_ROWS`` each ranked by its own last program; a
    programmatic dependent launch on sm_90+ that lets the next one be scheduled at once (``moe_ffn``'s gate/up,
    which waits for it). Otherwise the fp32 logits as one matmul (:func:`fp32_logits`), then :class:`RoutePlan`
    (``pdl``: it lets the next launch be scheduled at once).
    """

    MAX_ROWS = 64  # rows of one launch, in groups of at most GROUP_ROWS
    GROUP_ROWS = 8  # 16 rows in one group: 11.5 us, as fp32 cuBLAS logits + the routing launch 9.5 (runs 5, 7)
    EXPERTS_PER_PROGRAM = 1  # E programs a group: 128-256 for today's MoE models
    WARP_TILE = 2048  # weight values a warp holds a loop step

    def __init__(self, x2, router, top_k, scoring, renormalize, bias, pdl=False):
        t, hidden = x2.shape
        e = router.shape[0]
        br = min(next_pow2(t), self.GROUP_ROWS)
        self.fused = 0 < t <= self.MAX_ROWS and br * next_pow2(e) <= 4096 and can_fuse(x2.device)
        if not self.fused:
            self.route = RoutePlan(x2.new_empty((t, e), dtype=torch.float32), top_k, scoring, renormalize, bias,
                                   pdl)
            return
        eb, be, groups = self.EXPERTS_PER_PROGRAM, next_pow2(e), triton.cdiv(t, br)
        warps = self.warps(br)
        bk = min(next_pow2(hidden), self.WARP_TILE * warps // eb)
        dependent = pdl_available(x2.device)
        self.shape = (t, top_k)
        self.cnt = counters((groups,), x2.device)
        self.ints = (t, e, hidden, x2.stride(0), router.stride(0), hidden * router.element_size())
        self.launch = Launch(_router_kernel, (triton.cdiv(e, eb), groups), dict(
            _route_constexprs(top_k, scoring, renormalize, bias, dependent), EB=eb, BK=bk, BR=br, BE=be,
            LINES=next_pow2(triton.cdiv(hidden * router.element_size(), 128)),
            ASM=not env.settings.triton_interpret), num_warps=warps, pdl=dependent)

    @staticmethod
    def warps(rows: int) -> int:
        """Warps a program for ``rows`` (a power of two) rows of x. Session 45 run 3 (H200, graph replay, us at 1 /
        2 / 4 / 8 rows): one warp 3.66 / 4.06 / 6.14 / 16.8, four 4.65 / 5.22 / 5.05 / 7.58 (above one warp the
        routing's reductions cross warps; below four the rows' loads queue)."""
        return 1 if rows <= 2 else 4

    def __call__(self, x2, router, bias):
        if not self.fused:
            return self.route(fp32_logits(x2, router), bias)
        dev = x2.device
        z = empty((self.ints[0], self.ints[1]), dtype=torch.float32, device=dev)
        ids = empty(self.shape, dtype=torch.int32, device=dev)
        w = empty(self.shape, dtype=torch.float32, device=dev)
        self.launch(x2, router, z, self.cnt, bias if bias is not None else z, ids, w, *self.ints)
        return ids, w


def fp32_logits(x2: torch.Tensor, router: torch.Tensor) -> torch.Tensor:
    """``x2 @ router.T`` as fp32 ``[T, E]``. bf16 / fp16 operands of one dtype on CUDA: cuBLAS with an fp32 output
    (torch >= 2.8; 5.1 us at 16-512 rows of Qwen3-30B-A3B's router, converting both to fp32 first 13-21, session 45
    run 6); otherwise :func:`~.ref.router_logits`."""
    if _MM_OUT_DTYPE and x2.is_cuda and x2.dtype == router.dtype and x2.dtype in (torch.bfloat16, torch.float16):
        return torch.mm(x2, router.T, out_dtype=torch.float32)
    return router_logits(x2, router)
