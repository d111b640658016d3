"""The routed decode kernels' slots: a program's expert and row of x (:func:`routed_slot`), and its result tile,
stored per slot or mixed over a token's slots in the same launch (:func:`store_or_mix`).

A down projection followed by :func:`~mlx_native.ops.moe.api.moe_weighted_reduce` is two launches; mixing in the
projection's launch saves the second (one graph node, ~1.3 us on the H200, and the ``[T, top_k, N]`` round trip).
Program ``(tile, slot)`` scales its fp32 result by the slot's routing weight, stores it as the slot's partial, and
counts in on its token's tile counter (``kernels/arrival.py``); the last of the token's ``TOPK`` slots to arrive sums
the partials in slot order (deterministic, fp32) into the token's output row and rearms the counter.

H200, session 42 run 13 (``bench/moe_gguf_decode.py``, the Qwen3-30B-A3B-shaped step: route, gate/up, then the down
projection with the weighted reduce -> mixed in its launch), us: Q4_K 21.21 -> 19.84, Q5_K 23.27 -> 23.18, Q6_K 24.31
-> 23.98, Q8_0 25.10 -> 23.91."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ...kernels.arrival import arrive_last, can_fuse, counters, rearm
from ...runtime.memory import empty

# The links of ``moe_ggml_ffn``'s chain of programmatic dependent launches (a routed kernel's ``PDL``; 0: a plain
# launch). H200, session 43 run 1 (``bench/moe_gguf_decode.py``, the Qwen3-30B-A3B-shaped step, us, the three plain
# launches with the mix -> the chain): Q4_K 19.83-20.00 -> 17.99-18.12, Q5_K 23.04-23.29 -> 21.51-21.69, Q6_K
# 23.96-24.20 -> 22.55-22.65, Q8_0 23.97-24.00 -> 22.64-22.65; Q4_K gate/up with a Q6_K down 19.50-19.63. (Run 2:
# Q4_K / Q5_K down projections mixing by token, ``gguf_idot.moe_q4k_mix_kernel``: Q4_K 14.7-14.8, Q5_K 17.3-17.5.)
# The gate/up launch waits for the routing launch, then lets the down projection be scheduled
ROUTE_LINK = tl.constexpr(1)
# the down projection reads its routing (final before the gate/up launch let it start) and requests its weights where
# the kernel can (Q4_K / Q5_K rows of one loop step), then waits for h
H_LINK = tl.constexpr(2)


@triton.jit
def routing_link(PDL: tl.constexpr):
    """The start of a routed kernel that is ``ROUTE_LINK`` of the chain: wait for the routing, then let the next
    launch be scheduled (other links: nothing)."""
    if PDL == ROUTE_LINK:
        gdc_wait()
        gdc_launch_dependents()


@triton.jit
def token_slots(ids_ptr, mix_ptr, token, n_experts, CT: tl.constexpr, CH: tl.constexpr, TOPK: tl.constexpr):
    """The slots of a program that mixes ``token``'s ``TOPK`` slots (``idot.moe_idot_mix_kernel``,
    ``gguf_idot.moe_q4k_mix_kernel``), laid end to end along its ``CT`` chunk rows (slot ``ct // CH``) and ``4 CT``
    word rows (slot ``wt // (4 CH)``): ``(slot_ok, e, mul)`` per chunk row (its expert id, out of range read as 0;
    its routing weight, NaN for an expert out of range) and ``(w_slot, ew)`` per word row (its expert id, the same)."""
    ct = tl.arange(0, CT)
    slot_ok = ct // CH < TOPK
    e = tl.load(ids_ptr + token * TOPK + ct // CH, mask=slot_ok, other=0).to(tl.int64)
    e_ok = (e >= 0) & (e < n_experts)
    mul = tl.load(mix_ptr + token * TOPK + ct // CH, mask=slot_ok, other=0.0).to(tl.float32)
    mul = tl.where(e_ok, mul, float("nan"))  # an expert out of range: NaN rows
    wt = tl.arange(0, 4 * CT)
    w_slot = wt // (4 * CH) < TOPK
    ew = tl.load(ids_ptr + token * TOPK + wt // (4 * CH), mask=w_slot, other=0).to(tl.int64)
    ew = tl.where((ew >= 0) & (ew < n_experts), ew, 0)
    return slot_ok, tl.where(e_ok, e, 0), mul, w_slot, ew


@triton.jit
def routed_slot(ids_ptr, x_ptr, stride_x, n_experts, X_DIV: tl.constexpr):
    """``(slot, e, e_ok, x_ptr)`` of program ``(tile, slot)``: its expert id (int64; an id outside ``[0, n_experts)``
    reads expert 0 with ``e_ok`` False, for NaN rows) and its row of x (``X_DIV`` slots share a row, ``stride_x``
    apart)."""
    slot = tl.program_id(1)
    e = tl.load(ids_ptr + slot).to(tl.int64)
    e_ok = (e >= 0) & (e < n_experts)
    return slot, tl.where(e_ok, e, 0), e_ok, x_ptr + (slot // X_DIV).to(tl.int64) * stride_x


@triton.jit
def store_or_mix(out_ptr, res, slot, N, row_ok, mix_ptr, part_ptr, cnt_ptr, MIX: tl.constexpr, TOPK: tl.constexpr):
    """Program ``(tile, slot)``'s fp32 result ``res [BN]`` (outputs ``tile * BN + arange(BN)``, ``row_ok`` those
    below ``N``): stored at ``out [slots, N]``, or with ``MIX`` mixed into ``out [slots / TOPK, N]`` (``mix_ptr``:
    the routing weights ``[slots]``, ``part_ptr``: fp32 partials ``[slots, N]``, ``cnt_ptr``: int32 counters
    ``[slots / TOPK, tiles]``, zero between launches)."""
    BN: tl.constexpr = res.shape[0]
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    if MIX:
        res = res * tl.load(mix_ptr + slot).to(tl.float32)
        tl.store(part_ptr + slot.to(tl.int64) * N + cols, res, mask=row_ok)
        token = slot // TOPK
        cnt = cnt_ptr + token * tl.num_programs(0) + tl.program_id(0)
        if arrive_last(cnt, TOPK):
            total = tl.zeros([BN], dtype=tl.float32)
            for j in range(TOPK):
                total += tl.load(part_ptr + (token * TOPK + j).to(tl.int64) * N + cols, mask=row_ok, other=0.0,
                                 cache_modifier=".cg")
            tl.store(out_ptr + token.to(tl.int64) * N + cols, total.to(out_ptr.dtype.element_ty), mask=row_ok)
            rearm(cnt)
    else:
        tl.store(out_ptr + slot.to(tl.int64) * N + cols, res.to(out_ptr.dtype.element_ty), mask=row_ok)


class SlotMix:
    """The buffers of a routed launch for ``slots`` rows of ``top_k`` slots a token and ``n`` outputs in ``tiles``
    tiles: ``mixes`` (counters can be made now: not during a CUDA-graph capture), then :meth:`buffers` per call ->
    ``(out [slots / top_k, n], part [slots, n] fp32, counters)``; without mixing ``(out [slots, n], out, out)``.
    ``arrival`` False: a kernel that mixes a token's slots in one program set (``gguf_idot.moe_q4k_mix_kernel``),
    no counters nor partials (``part`` and ``counters`` are ``out``)."""

    def __init__(self, mix: bool, slots: int, top_k: int, n: int, tiles: int, dtype: torch.dtype, device,
                 arrival: bool = True):
        self.slots, self.top_k, self.n, self.dtype, self.device = slots, top_k, n, dtype, device
        self.mixes = mix and (not arrival or can_fuse(torch.device(device)))
        self.counters = counters((slots // top_k, tiles), device) if self.mixes and arrival else None

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self.mixes:
            out = empty((self.slots, self.n), dtype=self.dtype, device=self.device)
            return out, out, out
        out = empty((self.slots // self.top_k, self.n), dtype=self.dtype, device=self.device)
        if self.counters is None:
            return out, out, out
        return out, empty((self.slots, self.n), dtype=torch.float32, device=self.device), self.counters
