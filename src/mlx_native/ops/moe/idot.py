"""Expert-routed decode mat-vecs for MLX affine 4-bit experts, by integer dot products.

A MoE decode step multiplies each token's x by its ``top_k`` experts: a few rows, each against a different
``[N, K]`` matrix of a stack ``[E, N, K / 8]``. This is ``affine_idot.py``'s integer-dot mat-vec (x quantized
to int16 per 32 values, two codes per ``dp2a``) with a second grid axis over the routed rows ("slots"):
program ``(tile, slot)`` reads the slot's expert id, then streams that expert's ``BN`` rows (``BN`` + ``BN``
with the fused gate/up pair, ``act(x Wg^T) * (x Wu^T)``).

The down projection can mix the slots in the same launch (:func:`moe_idot_mix_kernel`): one program takes
``BN`` output rows of a token for all its slots, laid end to end along the chunk axis, with x scaled by the
slot's routing weight before its quantization, so the one sum over chunks is the mix (no partials, no
atomics, deterministic). A MoE FFN step is then three launches: ``moe_route``, the gate/up pair, the down
projection with the mix (was four: the weighted reduce). ``moe_ffn`` chains them by programmatic dependent
launch (``PDL``): the gate/up launch waits in the kernel for the routing, and the down projection requests
its routing and weights while the gate/up launch finishes, then waits for h.

Rows of any multiple of 32 columns: a loop step is ``128 x warps`` words of a row, the last one masked
(Qwen3-MoE's down projection has K = 768, half a 2-warp step). Expert ids outside ``[0, E)`` read expert 0
and give NaN rows, as the other expert kernels do.
"""

from __future__ import annotations

import triton
import triton.language as tl

from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ...kernels.math import gated_act
from ..quant.affine_idot import _step, _tiles, masked_tiles, step_x
from ..quant.affine_mv import row_tile
from .slots import routed_slot, token_slots


@triton.jit
def _masked_step(acc, w, S, B, x_ptr, x_off, x_ok, x_mul, ASM: tl.constexpr):
    """``affine_idot._step`` with the x chunks past the row (``x_ok [CH, 1]``) read as 0 (their words and
    scales are 0 too, so they add nothing) and x multiplied by ``x_mul`` (``[CH, 1]`` or a scalar) before its
    quantization."""
    x0 = tl.load(x_ptr + x_off, mask=x_ok, other=0.0).to(tl.float32) * x_mul
    x1 = tl.load(x_ptr + x_off + 8, mask=x_ok, other=0.0).to(tl.float32) * x_mul
    x2 = tl.load(x_ptr + x_off + 16, mask=x_ok, other=0.0).to(tl.float32) * x_mul
    x3 = tl.load(x_ptr + x_off + 24, mask=x_ok, other=0.0).to(tl.float32) * x_mul
    return step_x(acc, w, S, B, x0, x1, x2, x3, ASM)


@triton.jit
def moe_idot_kernel(
    x_ptr,  # [T, K] (X_DIV = TOPK: shared by a token's slots) or [T * TOPK, K] (X_DIV = 1); row stride stride_x
    ids_ptr,  # [T * TOPK] expert ids, int32 or int64
    w_ptr,  # [E, N, K / 8] int32 words
    s_ptr, b_ptr,  # [E, N, K / GS] scales / biases
    wu_ptr, su_ptr, bu_ptr,  # the up projection's, same shapes (HAS_UP)
    out_ptr,  # [T * TOPK, N]
    N, K, stride_x, n_experts,
    STRIDE_E: tl.constexpr, STRIDE_SE: tl.constexpr,  # words / scales per expert
    STRIDE_W: tl.constexpr, STRIDE_S: tl.constexpr,  # words / scales per row
    BN: tl.constexpr, CH: tl.constexpr, GS: tl.constexpr, EVEN_N: tl.constexpr, EVEN_K: tl.constexpr,
    X_DIV: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr, ASM: tl.constexpr, PDL: tl.constexpr,
):
    """Program ``(tile, slot)``: ``BN`` rows of the slot's expert (``BN`` + ``BN`` with HAS_UP). With PDL
    (launched as a programmatic dependent of the routing launch) it waits for the routing first, then lets
    the next launch (the down projection) start."""
    pid_n = tl.program_id(0)
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    slot, e, e_ok, x_ptr = routed_slot(ids_ptr, x_ptr, stride_x, n_experts, X_DIV)
    w_ptr += e * STRIDE_E
    s_ptr += e * STRIDE_SE
    b_ptr += e * STRIDE_SE
    if HAS_UP:
        wu_ptr += e * STRIDE_E
        su_ptr += e * STRIDE_SE
        bu_ptr += e * STRIDE_SE
    STEP: tl.constexpr = 4 * CH  # words of a row per loop step
    CPG: tl.constexpr = GS // 32  # x chunks per scale group
    SSTEP: tl.constexpr = STEP * 8 // GS
    rows, row_ok = row_tile(N, BN, EVEN_N)
    c = tl.arange(0, CH)
    w_off = tl.arange(0, 4 * CH)[:, None] + rows[None, :] * STRIDE_W
    s_off = (c // CPG)[:, None] + rows[None, :] * STRIDE_S
    x_off = c[:, None] * 32 + tl.arange(0, 8)[None, :]
    acc = tl.zeros([CH, 2 * BN if HAS_UP else BN], dtype=tl.float32)
    chunks = K // 32
    for i in range(tl.cdiv(chunks, CH)):
        if EVEN_K:
            w, S, B = _tiles(w_ptr, s_ptr, b_ptr, wu_ptr, su_ptr, bu_ptr, w_off + i * STEP, s_off + i * SSTEP, HAS_UP)
            acc = _step(acc, w, S, B, x_ptr + i * (STEP * 8), x_off, ASM)
        else:
            c_ok = (i * CH + c < chunks)[:, None]
            w_ok = (i * STEP + tl.arange(0, 4 * CH) < chunks * 4)[:, None]
            w, S, B = masked_tiles(w_ptr, s_ptr, b_ptr, wu_ptr, su_ptr, bu_ptr, w_off + i * STEP, s_off + i * SSTEP,
                                    w_ok, c_ok, HAS_UP)
            acc = _masked_step(acc, w, S, B, x_ptr + i * (STEP * 8), x_off, c_ok, 1.0, ASM)
    res = tl.sum(acc, axis=0)
    if HAS_UP:
        gate, up = tl.split(tl.reshape(res, (BN, 2)))
        res = gated_act(gate, ACT) * up
    res = tl.where(e_ok, res, float("nan"))
    offs = slot.to(tl.int64) * N + pid_n * BN + tl.arange(0, BN)
    tl.store(out_ptr + offs, res.to(out_ptr.dtype.element_ty), mask=row_ok)


@triton.jit
def _mix_tiles(w_ptr, s_ptr, b_ptr, w_off, s_off, slot_ok, w_slot, c, wt, chunks, i, CH: tl.constexpr,
               STEP: tl.constexpr, CPG: tl.constexpr):
    """Step ``i``'s words / scales / biases of a mixing program (past the row: 0, no memory traffic)."""
    c_ok = (slot_ok & (i * CH + c < chunks))[:, None]
    w_ok = (w_slot & (i * STEP + wt % STEP < chunks * 4))[:, None]
    return masked_tiles(w_ptr, s_ptr, b_ptr, w_ptr, s_ptr, b_ptr, w_off + i * STEP, s_off + i * (CH // CPG), w_ok,
                         c_ok, False)


@triton.jit
def moe_idot_mix_kernel(
    x_ptr,  # [T * TOPK, K] one x row per slot, row stride stride_x
    ids_ptr,  # [T * TOPK] expert ids, int32 or int64
    mix_ptr,  # [T * TOPK] routing weights
    w_ptr,  # [E, N, K / 8] int32 words
    s_ptr, b_ptr,  # [E, N, K / GS] scales / biases
    out_ptr,  # [T, N]
    N, K, stride_x, n_experts,
    STRIDE_E: tl.constexpr, STRIDE_SE: tl.constexpr, STRIDE_W: tl.constexpr, STRIDE_S: tl.constexpr,
    BN: tl.constexpr, CH: tl.constexpr, SLOTS: tl.constexpr, TOPK: tl.constexpr, GS: tl.constexpr,
    EVEN_N: tl.constexpr, ASM: tl.constexpr, PDL: tl.constexpr,
):
    """Program ``(tile, token)``: ``BN`` output rows summed over the token's ``TOPK`` slots. The slots are
    laid end to end along the chunk axis (``SLOTS * CH`` chunks per step, ``SLOTS`` = TOPK rounded up to a
    power of two): each chunk row gathers its slot's expert, and x is multiplied by the slot's routing weight
    before its quantization (``(m x) W^T = m (x W^T)``), so one sum over the chunks mixes the slots.

    The routing and the first step's weights are requested before x: with PDL (launched as a programmatic
    dependent of the launch that writes x, itself waiting for the routing before it lets this one start)
    they stream while that launch finishes, and the program waits for x only after."""
    pid_n = tl.program_id(0)
    token = tl.program_id(1).to(tl.int64)
    CT: tl.constexpr = SLOTS * CH  # chunk rows of a step
    STEP: tl.constexpr = 4 * CH  # words of a slot's row per step
    CPG: tl.constexpr = GS // 32
    rows, row_ok = row_tile(N, BN, EVEN_N)
    ct = tl.arange(0, CT)
    c = ct % CH
    wt = tl.arange(0, 4 * CT)  # word rows: slot wt // STEP, word wt % STEP
    slot_ok, e, mul, w_slot, ew = token_slots(ids_ptr, mix_ptr, token, n_experts, CT, CH, TOPK)
    mul = mul[:, None]
    # runs of 4 words of one slot and row, 16-byte aligned (STRIDE_E, STEP and STRIDE_W are multiples of 4):
    # the hint keeps the loads 16 bytes wide although the expert base is gathered
    w_row = tl.max_contiguous(tl.multiple_of(ew * STRIDE_E + wt % STEP, 4), 4)
    w_off = w_row[:, None] + rows[None, :] * STRIDE_W
    s_off = (e * STRIDE_SE + c // CPG)[:, None] + rows[None, :] * STRIDE_S
    x_off = ((token * TOPK + ct // CH) * stride_x + c * 32)[:, None] + tl.arange(0, 8)[None, :]
    acc = tl.zeros([CT, BN], dtype=tl.float32)
    chunks = K // 32
    w, S, B = _mix_tiles(w_ptr, s_ptr, b_ptr, w_off, s_off, slot_ok, w_slot, c, wt, chunks, 0, CH, STEP, CPG)
    if PDL:
        gdc_wait()
    for i in range(tl.cdiv(chunks, CH)):
        c_ok = (slot_ok & (i * CH + c < chunks))[:, None]
        acc = _masked_step(acc, w, S, B, x_ptr + i * (CH * 32), x_off, c_ok, mul, ASM)
        w, S, B = _mix_tiles(w_ptr, s_ptr, b_ptr, w_off, s_off, slot_ok, w_slot, c, wt, chunks, i + 1, CH, STEP,
                             CPG)
    res = tl.sum(acc, axis=0)
    tl.store(out_ptr + token * N + pid_n * BN + tl.arange(0, BN), res.to(out_ptr.dtype.element_ty), mask=row_ok)


# ----------------------------------------------------------------------------- launch plans

from typing import Optional  # noqa: E402

import torch  # noqa: E402

from ...kernels.launch import Launch  # noqa: E402
from ...runtime import env  # noqa: E402
from ...runtime.memory import empty  # noqa: E402

MAX_SLOTS = 64  # routed rows (tokens x top_k) up to this many take the routed mat-vec
BN = 4  # rows per program (one matrix)
GLU_BN = 4  # rows of each projection per program (gate/up pairs; bench/moe_sweep.py, session 12 run 3)
MIX_BN = 8  # rows per program of the down projection with the mix (ditto)
MIX_MAX_CHUNKS = 256  # chunk rows of a mixing program's step (8 warps)


def warps_for(k: int) -> int:
    """Warps of a per-slot program for rows of ``k`` columns: one 128-word step per warp, two from 2048."""
    return 2 if k >= 2048 else 1


def mix_chunks(k: int, top_k: int) -> int:
    """x chunks of a slot per step of a mixing program: the row's (a power of two up), at most
    ``MIX_MAX_CHUNKS`` for all slots together, at least one warp's 32."""
    slots = triton.next_power_of_2(top_k)
    ch = min(triton.next_power_of_2(k // 32), max(1, MIX_MAX_CHUNKS // slots))
    return max(ch, 32 // min(slots, 32))


def supports(bits: int, group_size: int, x_dtype: torch.dtype, k: int, slots: int, words: int) -> bool:
    """MLX affine 4-bit experts, bf16/fp16 x and result, up to ``MAX_SLOTS`` routed rows of whole x chunks
    (``k`` a multiple of 32, which any group size is); ``MLX_NATIVE_AFFINE_IDOT=0`` turns it off."""
    return (env.settings.affine_idot and bits == 4 and group_size in (32, 64, 128) and k % 32 == 0
            and x_dtype in (torch.bfloat16, torch.float16) and 1 <= slots <= MAX_SLOTS and words < 2**31)


class MoeIdotLaunch:
    """The routed integer-dot mat-vecs for ``t`` tokens x ``top_k`` slots of experts stacked ``[E, n, k / 8]``,
    all contiguous: :func:`moe_idot_kernel` (``[t * top_k, n]``; ``x_div``: ``top_k`` when the slots share
    their token's x row, 1 when each has its own; ``act``: the fused gate/up pair, an activation code of
    ``qmm.ACT_CODES``), or with ``mix`` :func:`moe_idot_mix_kernel` (the slots mixed with routing weights,
    ``[t, n]``; x one row per slot). ``pdl``: a programmatic dependent launch (see the module's docstring: only
    where the launch before it on the stream is the one the kernel waits for)."""

    def __init__(self, t: int, top_k: int, n: int, k: int, n_experts: int, group_size: int, x_div: int,
                 out_dtype: torch.dtype, device, act: Optional[int] = None, mix: bool = False, bn: int = 0,
                 pdl: bool = False):
        self.t, self.top_k, self.n, self.out_dtype, self.device = t, top_k, n, out_dtype, device
        self.mixes = mix and act is None and x_div == 1
        self.ints = (n, k)
        self.n_experts = n_experts
        strides = dict(STRIDE_E=n * k // 8, STRIDE_SE=n * k // group_size, STRIDE_W=k // 8,
                       STRIDE_S=k // group_size)
        asm = not env.settings.triton_interpret
        if self.mixes:
            bn = bn or MIX_BN
            ch = mix_chunks(k, top_k)
            slots = triton.next_power_of_2(top_k)
            self.launch = Launch(moe_idot_mix_kernel, (triton.cdiv(n, bn), t), dict(
                strides, BN=bn, CH=ch, SLOTS=slots, TOPK=top_k, GS=group_size, EVEN_N=n % bn == 0, ASM=asm,
                PDL=pdl), num_warps=max(1, slots * ch // 32), num_stages=1, pdl=pdl)
            return
        bn = bn or (GLU_BN if act is not None else BN)
        warps = warps_for(k)
        self.launch = Launch(moe_idot_kernel, (triton.cdiv(n, bn), t * top_k), dict(
            strides, BN=bn, CH=32 * warps, GS=group_size, EVEN_N=n % bn == 0, EVEN_K=k % (1024 * warps) == 0,
            X_DIV=x_div, HAS_UP=act is not None, ACT=act or 0, ASM=asm, PDL=pdl), num_warps=warps, num_stages=1,
            pdl=pdl)

    def __call__(self, x, ids, w, s, b, w_up=None, s_up=None, b_up=None, mix=None) -> torch.Tensor:
        """``x [t or t * top_k, k]`` (any row stride), ``ids [t * top_k]``; returns ``[t * top_k, n]``, or
        ``[t, n]`` for a mixing plan (``mix [t * top_k]`` routing weights)."""
        if self.mixes:
            out = empty((self.t, self.n), dtype=self.out_dtype, device=self.device)
            self.launch(x, ids, mix, w, s, b, out, *self.ints, x.stride(0), self.n_experts)
            return out
        if w_up is None:
            w_up, s_up, b_up = w, s, b
        out = empty((self.t * self.top_k, self.n), dtype=self.out_dtype, device=self.device)
        self.launch(x, ids, w, s, b, w_up, s_up, b_up, out, *self.ints, x.stride(0), self.n_experts)
        return out
