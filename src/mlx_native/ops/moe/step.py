"""The MoE FFN decode step of one token in one launch: route, gate/up, down with the mix.

``out = sum_j w_j * down_{e_j}(act(gate_{e_j}(x)) * up_{e_j}(x))`` over the ``TOPK`` experts ``e_j`` of the
routing, for MLX affine 4-bit experts (``ops/moe/idot.py``'s integer-dot mat-vecs).

The three-launch chain (route -> gate/up -> down) pays a launch and a memory latency per link and streams
the gate/up weights from programs too short to keep enough bytes in flight. Here a grid of at most one
program per SM (all resident at once) runs the whole step:

1. every program routes the token itself (top-``TOPK`` of ``E`` logits: one small reduction per program);
2. it requests its share of the down projection's weights (one tile of ``DBN`` output rows over all the
   token's slots, ``[4 * DCT, DBN]`` words) into registers: they stream while the gate/up phase runs;
3. gate/up phase: the ``TOPK * I / GBN`` tiles of ``GBN`` gate rows + ``GBN`` up rows are dealt round robin
   over the programs, with the next tile's weights loaded while the current one is reduced; each tile stores
   its ``act(gate) * up`` rows of ``h [TOPK, I]`` (x's dtype, one rounding as in the three ops);
4. a grid barrier (``kernels/arrival.grid_sync``): every program waits until all have stored their h;
5. down phase: each program loads h (all slots, from L2), multiplies each slot's chunk by its routing weight
   before the int16 quantization (``(m h) W^T = m (h W^T)``: the mix is the sum over the chunk axis) and
   reduces its prefetched tile; further down tiles (fewer programs than tiles) are loaded after the barrier.

``PHASE`` 1 / 2 run steps 1-3 / 1, 2, 5 alone (two launches, no barrier): under Triton's interpreter, which
runs programs one after another, and where the grid cannot be co-resident. Expert ids out of range (NaN
logits) give NaN output, as the other expert kernels do.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernels.arrival import grid_sync
from ...kernels.math import gated_act
from ..quant.affine_idot import step_x
from .routing import route_rows


@triton.jit
def _pick(v, i):
    """``v[i]`` of a ``[BKP]`` vector for a scalar index or a ``[C]`` tensor of indices."""
    k = tl.arange(0, v.shape[0])
    if len(i.shape) == 0:
        return tl.sum(tl.where(k == i, v, 0))
    else:
        return tl.sum(tl.where(k[None, :] == i[:, None], v[None, :], 0), axis=1)


@triton.jit
def _glu_tiles(wg_ptr, sg_ptr, bg_ptr, wu_ptr, su_ptr, bu_ptr, ids, n_experts, item, ks, n_items, w_base,
               s_base, IPS: tl.constexpr, GBN: tl.constexpr, STRIDE_E: tl.constexpr, STRIDE_SE: tl.constexpr,
               STRIDE_W: tl.constexpr, STRIDE_S: tl.constexpr, STEP: tl.constexpr, SSTEP: tl.constexpr):
    """Words ``[4 * GCH, 2 * GBN]`` and scales / biases ``[GCH, 2 * GBN]`` of K step ``ks`` of gate/up tile
    ``item`` (all 0, no traffic, past the last tile)."""
    # masks as full tensors (Triton's interpreter rejects a broadcast scalar mask); `0 *` folds on the GPU
    w_ok = 0 * w_base + item < n_items
    s_ok = 0 * s_base + item < n_items
    item = tl.minimum(item, n_items - 1)
    e = _pick(ids, item // IPS).to(tl.int64)
    e = tl.where((e >= 0) & (e < n_experts), e, 0)  # out-of-range ids: NaN where h is stored
    w_off = e * STRIDE_E + (item % IPS) * (GBN * STRIDE_W) + ks * STEP
    s_off = e * STRIDE_SE + (item % IPS) * (GBN * STRIDE_S) + ks * SSTEP
    w = tl.load(wg_ptr + w_off + w_base, mask=w_ok, other=0)
    S = tl.load(sg_ptr + s_off + s_base, mask=s_ok, other=0.0)
    B = tl.load(bg_ptr + s_off + s_base, mask=s_ok, other=0.0)
    w = tl.reshape(tl.join(w, tl.load(wu_ptr + w_off + w_base, mask=w_ok, other=0)), (w.shape[0], 2 * w.shape[1]))
    S = tl.reshape(tl.join(S, tl.load(su_ptr + s_off + s_base, mask=s_ok, other=0.0)), (S.shape[0], 2 * S.shape[1]))
    B = tl.reshape(tl.join(B, tl.load(bu_ptr + s_off + s_base, mask=s_ok, other=0.0)), (B.shape[0], 2 * B.shape[1]))
    return w, S, B


@triton.jit
def _down_tiles(wd_ptr, sd_ptr, bd_ptr, tile, n_tiles, w_off, s_off, w_ok, c_ok, DBN: tl.constexpr,
                STRIDE_W: tl.constexpr, STRIDE_S: tl.constexpr):
    """Words ``[4 * DCT, DBN]`` and scales / biases ``[DCT, DBN]`` of down tile ``tile`` (0 past the last)."""
    w_ok = w_ok & (0 * w_off + tile < n_tiles)  # full tensors, as in _glu_tiles
    c_ok = c_ok & (0 * s_off + tile < n_tiles)
    tile = tl.minimum(tile, n_tiles - 1).to(tl.int64)
    w = tl.load(wd_ptr + tile * (DBN * STRIDE_W) + w_off, mask=w_ok, other=0)
    S = tl.load(sd_ptr + tile * (DBN * STRIDE_S) + s_off, mask=c_ok, other=0.0)
    B = tl.load(bd_ptr + tile * (DBN * STRIDE_S) + s_off, mask=c_ok, other=0.0)
    return w, S, B


@triton.jit
def moe_step_kernel(
    x_ptr,  # [H] the token, bf16 or fp16
    z_ptr,  # [E] router logits
    bias_ptr,  # [E] selection bias (HAS_BIAS)
    wg_ptr, sg_ptr, bg_ptr,  # gate: [E, I, H / 8] int32 words, [E, I, H / GS] scales / biases
    wu_ptr, su_ptr, bu_ptr,  # up, same shapes
    wd_ptr, sd_ptr, bd_ptr,  # down: [E, H, I / 8], [E, H, I / GS]
    h_ptr,  # [TOPK, I] act(gate) * up, x's dtype (written in phase 1, read in phase 2)
    out_ptr,  # [H] x's dtype
    sync_ptr,  # [2] int32 grid-barrier counters (PHASE 0), zero between launches
    n_experts,
    H: tl.constexpr, I: tl.constexpr, GS: tl.constexpr, TOPK: tl.constexpr, BE: tl.constexpr,
    BKP: tl.constexpr, SIGMOID: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr,
    GBN: tl.constexpr, GCH: tl.constexpr, DBN: tl.constexpr, DCT: tl.constexpr, PHASE: tl.constexpr,
    ASM: tl.constexpr,
):
    """See the module docstring. Needs ``H % (32 * GCH) == 0``, ``I % GBN == 0``, ``I % 32 == 0``,
    ``H % DBN == 0``, ``DCT >= TOPK * I / 32``; the grid is at most the programs that fit at once."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    CPG: tl.constexpr = GS // 32  # x chunks per scale group

    # 1. routing
    cols = tl.arange(0, BE)
    col_ok = cols < n_experts
    z = tl.load(z_ptr + cols[None, :], mask=col_ok[None, :], other=float("-inf")).to(tl.float32)
    ids2, wts2 = route_rows(z, bias_ptr, cols, col_ok, TOPK, SIGMOID, RENORM, HAS_BIAS, BKP)
    ids = tl.reshape(ids2, (BKP,))
    wts = tl.reshape(wts2, (BKP,))

    # 2. the first down tile's weights (chunk row ct: slot ct // CPS, chunk ct % CPS of that slot's row)
    CPS: tl.constexpr = I // 32
    NCH: tl.constexpr = TOPK * CPS
    n_dtiles: tl.constexpr = H // DBN
    ct = tl.arange(0, DCT)
    c_ok = ct < NCH
    e_c = _pick(ids, ct // CPS).to(tl.int64)
    e_okc = (e_c >= 0) & (e_c < n_experts)
    e_c = tl.where(e_okc, e_c, 0)
    wt = tl.arange(0, 4 * DCT)
    e_w = _pick(ids, wt // 4 // CPS).to(tl.int64)
    e_w = tl.where((e_w >= 0) & (e_w < n_experts), e_w, 0)
    drows = tl.arange(0, DBN)
    # runs of 4 words of one chunk and row, 16-byte aligned (I / 8 and the expert stride are multiples of 4)
    w_row = tl.max_contiguous(tl.multiple_of(e_w * (H * I // 8) + (wt // 4 % CPS) * 4 + wt % 4, 4), 4)
    dw_off = w_row[:, None] + drows[None, :] * (I // 8)
    ds_off = (e_c * (H * I // GS) + (ct % CPS) // CPG)[:, None] + drows[None, :] * (I // GS)
    dw_ok = (wt // 4 < NCH)[:, None]
    dc_ok = c_ok[:, None]
    if PHASE != 1:
        wd, Sd, Bd = _down_tiles(wd_ptr, sd_ptr, bd_ptr, pid, n_dtiles, dw_off, ds_off, dw_ok, dc_ok, DBN, I // 8,
                                 I // GS)

    # 3. gate/up tiles, round robin, the next one's weights loaded while this one is reduced
    if PHASE != 2:
        IPS: tl.constexpr = I // GBN  # tiles per slot
        n_items: tl.constexpr = TOPK * IPS
        KSTEPS: tl.constexpr = H // (32 * GCH)
        STEP: tl.constexpr = 4 * GCH  # words of a row per K step
        SSTEP: tl.constexpr = STEP * 8 // GS
        c = tl.arange(0, GCH)
        rows = tl.arange(0, GBN)
        w_base = tl.arange(0, 4 * GCH)[:, None] + rows[None, :] * (H // 8)
        s_base = (c // CPG)[:, None] + rows[None, :] * (H // GS)
        x_off = c[:, None] * 32 + tl.arange(0, 8)[None, :]
        n_steps = tl.cdiv(n_items - pid, nprog) * KSTEPS  # this program's (tile, K step) pairs
        w, S, B = _glu_tiles(wg_ptr, sg_ptr, bg_ptr, wu_ptr, su_ptr, bu_ptr, ids, n_experts, pid, 0, n_items,
                             w_base, s_base,
                             IPS, GBN, I * H // 8, I * H // GS, H // 8, H // GS, STEP, SSTEP)
        acc = tl.zeros([GCH, 2 * GBN], dtype=tl.float32)
        for q in range(n_steps):
            item = pid + (q // KSTEPS) * nprog
            ks = q % KSTEPS
            nq = q + 1
            w_n, S_n, B_n = _glu_tiles(wg_ptr, sg_ptr, bg_ptr, wu_ptr, su_ptr, bu_ptr, ids, n_experts,
                                       pid + (nq // KSTEPS) * nprog, nq % KSTEPS, n_items, w_base, s_base,
                                       IPS, GBN, I * H // 8, I * H // GS, H // 8, H // GS, STEP, SSTEP)
            xp = x_ptr + ks * (STEP * 8) + x_off
            acc = step_x(acc, w, S, B, tl.load(xp).to(tl.float32), tl.load(xp + 8).to(tl.float32),
                         tl.load(xp + 16).to(tl.float32), tl.load(xp + 24).to(tl.float32), ASM)
            if ks == KSTEPS - 1:
                gate, up = tl.split(tl.reshape(tl.sum(acc, axis=0), (GBN, 2)))
                hv = gated_act(gate, ACT) * up
                slot = item // IPS
                e = _pick(ids, slot)
                hv = tl.where((e >= 0) & (e < n_experts), hv, float("nan"))
                tl.store(h_ptr + slot * I + (item % IPS) * GBN + rows, hv.to(h_ptr.dtype.element_ty))
                acc = tl.zeros([GCH, 2 * GBN], dtype=tl.float32)
            w = w_n
            S = S_n
            B = B_n

    # 4. every program's h is stored
    if PHASE == 0:
        grid_sync(sync_ptr, nprog)

    # 5. down tiles with the mix
    if PHASE != 1:
        mul = tl.where(e_okc, _pick(wts, ct // CPS), float("nan"))[:, None]  # an expert out of range: NaN
        hp = h_ptr + ((ct // CPS) * I + (ct % CPS) * 32)[:, None] + tl.arange(0, 8)[None, :]
        x0 = tl.load(hp, mask=dc_ok, other=0.0, cache_modifier=".cg").to(tl.float32) * mul
        x1 = tl.load(hp + 8, mask=dc_ok, other=0.0, cache_modifier=".cg").to(tl.float32) * mul
        x2 = tl.load(hp + 16, mask=dc_ok, other=0.0, cache_modifier=".cg").to(tl.float32) * mul
        x3 = tl.load(hp + 24, mask=dc_ok, other=0.0, cache_modifier=".cg").to(tl.float32) * mul
        for tile in range(pid, n_dtiles, nprog):
            if tile != pid:
                wd, Sd, Bd = _down_tiles(wd_ptr, sd_ptr, bd_ptr, tile, n_dtiles, dw_off, ds_off, dw_ok, dc_ok, DBN,
                                         I // 8, I // GS)
            acc_d = step_x(tl.zeros([DCT, DBN], dtype=tl.float32), wd, Sd, Bd, x0, x1, x2, x3, ASM)
            tl.store(out_ptr + tile * DBN + drows, tl.sum(acc_d, axis=0).to(out_ptr.dtype.element_ty))


# ----------------------------------------------------------------------------- launch plan

import torch  # noqa: E402

from ...kernels.arrival import can_fuse, counters  # noqa: E402
from ...kernels.launch import Launch  # noqa: E402
from ...runtime import env  # noqa: E402
from ...runtime.device import device_info  # noqa: E402
from ...runtime.memory import empty  # noqa: E402
from ..common import next_pow2  # noqa: E402

GBN = 8  # gate rows (and as many up rows) per gate/up tile
MAX_GCH = 64  # x chunks (of 32 values) per gate/up K step: 2 warps of lanes
DBN = 16  # output rows per down tile
MAX_DCT = 256  # chunk rows of a down tile (top_k * I / 32, a power of two up): the registers it holds
NUM_WARPS = 8


def supports(t: int, hidden: int, inter: int, top_k: int, group_size: int) -> bool:
    """One token whose shapes the kernel's tiles divide (``MLX_NATIVE_MOE_STEP=0`` turns it off)."""
    return (env.settings.moe_step and t == 1 and hidden % (32 * 8) == 0 and inter % max(32, GBN) == 0
            and hidden % DBN == 0 and next_pow2(top_k * inter // 32) <= MAX_DCT and group_size in (32, 64, 128))


class MoeStepPlan:
    """:func:`moe_step_kernel` for one token of ``hidden`` features on ``n_experts`` experts of ``inter`` rows,
    contiguous MLX affine 4-bit weights. One launch (``PHASE`` 0) on a CUDA device when the counters can be
    created (not during a CUDA-graph capture), else the two phases as two launches. The plan owns h and the
    counters: one plan must not run in two launches at once (two streams, concurrent graph replays)."""

    def __init__(self, hidden: int, inter: int, n_experts: int, top_k: int, group_size: int, act: int,
                 scoring: str, renormalize: bool, has_bias: bool, dtype: torch.dtype, device,
                 num_warps: int = 0, programs: int = 0, one_launch: bool = True):
        """``num_warps``, ``programs``: overrides of the defaults (sweeps); ``one_launch=False``: the two phases
        as two launches even where one would do (tests)."""
        self.hidden, self.dtype, self.device = hidden, dtype, device
        gch = MAX_GCH
        while hidden % (32 * gch):
            gch //= 2
        interpret = env.settings.triton_interpret
        one_launch = (one_launch and not interpret and torch.device(device).type == "cuda"
                      and can_fuse(torch.device(device)))
        self.h = torch.empty((top_k, inter), dtype=dtype, device=device)
        self.sync = counters((2,), device) if one_launch else self.h
        n_items = top_k * inter // GBN
        self.programs = programs or min(device_info(device).sm_count, max(n_items, hidden // DBN))
        self.n_experts = n_experts
        constexprs = dict(H=hidden, I=inter, GS=group_size, TOPK=top_k, BE=next_pow2(n_experts),
                          BKP=next_pow2(top_k), SIGMOID=scoring == "sigmoid", RENORM=renormalize,
                          HAS_BIAS=has_bias, ACT=act, GBN=GBN, GCH=gch, DBN=DBN,
                          DCT=next_pow2(top_k * inter // 32), ASM=not interpret)
        warps = num_warps or NUM_WARPS
        phases = (0,) if one_launch else (1, 2)
        self.launches = [Launch(moe_step_kernel, (self.programs,), dict(constexprs, PHASE=p), num_warps=warps,
                                num_stages=1) for p in phases]

    def __call__(self, x, logits, bias, weights) -> torch.Tensor:
        """``x [1, hidden]``, ``logits [1, E]``, ``weights`` the nine gate/up/down tensors -> ``[1, hidden]``."""
        out = empty((1, self.hidden), dtype=self.dtype, device=self.device)
        for launch in self.launches:
            launch(x, logits, bias if bias is not None else logits, *weights, self.h, out, self.sync,
                   self.n_experts)
        return out
