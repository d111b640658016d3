"""Expert-routed decode mat-vecs for GGUF Q6_K and Q8_0 experts, on the streamed loops of ``ggml/q6k_mv.py`` and
``ggml/q8_mv.py``.

A MoE decode step on these experts (``moe_ggml_matmul``: the ``ffn_down_exps`` of half the layers of a Q4_K_M
llama.cpp file, or every projection of a Q6_K / Q8_0 one; ``[E, N, K]`` raw rows) multiplies each routed row
("slot": a token and one of its ``top_k`` experts) by its expert's ``[N, K]`` matrix. Program ``(tile, slot)`` reads
the slot's expert id and runs the one-row kernel's loop (``rows_loop``) over the whole row of ``BN`` rows of that
expert (and of its up projection with ``HAS_UP``: ``act(x G^T) * (x U^T)`` stored for the slot's outputs). The
tilings are the one-row kernels', unsplit (the steps that divide the row, else the longest steps and a partial one):
Qwen3-MoE's down projection (K = 768) takes Q6_K steps of 1 super-block in 32-row tiles, Q8_0 steps of 4 block pairs
in 8-row tiles; its gate / up (K = 2048) Q6_K steps of 4 super-blocks, Q8_0 of 16 pairs, in 8-row tiles. Expert ids
outside ``[0, E)`` read expert 0 and give NaN rows, as the other expert kernels do.

H200, session 41 run 4 (``bench/moe_gguf_decode.py``, the Qwen3-30B-A3B-shaped step through ``moe_route``, the
gate/up pair, the down projection and ``moe_weighted_reduce``; CUDA-graph replay): one token Q6_K 48.1 -> 28.7 us
(the tiled routed kernel before). ``ggml/block_mmv.py``'s tensor-core decode, routed one row of x a slot, was slower
than the tiled kernel (run 1: Q6_K 58.4, Q8_0 72.7 against 48.1 / 44.5 us): its decode costs as much per code at one
row of x as at 16.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from ...kernels.launch import Launch
from ...kernels.math import gated_act
from ...kernels.words import word_aligned
from ...runtime import env
from ..ggml import q6k_mv, q8_mv
from ..quant.affine_mv import MAGIC, row_tile
from .slots import H_LINK, SlotMix, routed_slot, routing_link, store_or_mix

Q6K = tl.constexpr(q6k_mv.Q6K_ID)  # FMT of Q6_K experts (else Q8_0)


@triton.jit
def _project(w_ptr, e, rows, N, x_ptr, k0, k1, FMT: tl.constexpr, K: tl.constexpr, BN: tl.constexpr, STEP: tl.constexpr,
             TAIL: tl.constexpr, EVEN_N: tl.constexpr, UPT: tl.constexpr, WPL: tl.constexpr, FENCE: tl.constexpr,
             ASM: tl.constexpr):
    """``[BN]`` fp32: this program's ``BN`` rows ``rows`` of expert ``e`` (``N`` rows of ``K`` values, at ``w_ptr``)
    times the row of x at ``x_ptr``, the whole row in ``STEP``-sized steps (Q6_K: super-blocks, ``k0, k1`` the magic
    and the nibble mask; Q8_0: code words, ``k0, k1`` the byte constants) and a partial one of ``TAIL``; ``UPT`` /
    ``WPL``, ``FENCE``: the one-row kernels' knobs."""
    if FMT == Q6K:
        N_SB: tl.constexpr = K // 256
        STRIDE_H: tl.constexpr = N_SB * 105
        if EVEN_N:  # the tile's first row in the base: constant row offsets
            base = (e * N + tl.program_id(0) * BN) * STRIDE_H
            r_off = tl.arange(0, BN) * STRIDE_H
        else:  # (rows past N read row 0: row_tile)
            base = e * N * STRIDE_H
            r_off = rows * STRIDE_H
        a_off, c_off, s_off, d_off, x_off = q6k_mv.tile_offsets(r_off, STEP, UPT)
        acc, _, _, _ = q6k_mv.rows_loop(w_ptr + base, a_off, c_off, s_off, d_off, x_ptr, x_off, 0, 0, N_SB - TAIL,
                                        True, k0, k1, N_SB, BN, STEP, UPT, TAIL, 1, ASM)
        return tl.sum(tl.sum(acc, axis=2), axis=1)
    else:
        STRIDE_W: tl.constexpr = K // 64 * 17
        w, _, _, b, m, p_off = q8_mv.pair_lanes(w_ptr + e * N * STRIDE_W, tl.program_id(0), N, STRIDE_W, BN, EVEN_N,
                                                16 // WPL, STEP // 16, q8_mv.PAIR_WORDS)
        acc, _, _, _ = q8_mv.rows_loop(w, b, m, p_off, x_ptr, 0, 0, K // 4 - 16 * TAIL, True, k0, k1, K // 4, STEP,
                                       WPL, FENCE, TAIL, 1)
        return tl.sum(tl.sum(acc, axis=0), axis=0)


@triton.jit(do_not_specialize=["k0", "k1"])
def moe_gguf_mv_kernel(
    x_ptr,  # [T, K] (X_DIV = TOPK: shared by a token's slots) or [T * TOPK, K] (X_DIV = 1); even row stride stride_x
    ids_ptr,  # [T * TOPK] expert ids, int32 or int64
    w_ptr, wu_ptr,  # [E, N] rows of raw blocks (Q6_K: int16 halves, Q8_0: int32 words; wu_ptr: the up projection's)
    out_ptr,  # [T * TOPK, N] ([T, N] with MIX)
    mix_ptr, part_ptr, cnt_ptr,  # MIX: routing weights [T * TOPK], fp32 partials [T * TOPK, N], counters [T, tiles]
    N, stride_x, n_experts, k0, k1,
    FMT: tl.constexpr, K: tl.constexpr, BN: tl.constexpr, STEP: tl.constexpr, TAIL: tl.constexpr,
    EVEN_N: tl.constexpr, X_DIV: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr, UPT: tl.constexpr,
    WPL: tl.constexpr, FENCE: tl.constexpr, ASM: tl.constexpr, MIX: tl.constexpr = False, TOPK: tl.constexpr = 1,
    PDL: tl.constexpr = 0,
):
    """Program ``(tile, slot)``: ``BN`` rows of the slot's expert (and ``BN`` of its up projection); with ``MIX`` the
    token's ``TOPK`` slots mixed in the launch (``slots.store_or_mix``); ``PDL``: a link of ``moe_ggml_ffn``'s chain
    (``slots.routing_link``; as ``H_LINK`` it waits for x once it has its expert)."""
    routing_link(PDL)
    slot, e, e_ok, x_ptr = routed_slot(ids_ptr, x_ptr, stride_x, n_experts, X_DIV)
    if PDL == H_LINK:
        gdc_wait()
    rows, row_ok = row_tile(N, BN, EVEN_N)
    res = _project(w_ptr, e, rows, N, x_ptr, k0, k1, FMT, K, BN, STEP, TAIL, EVEN_N, UPT, WPL, FENCE, ASM)
    if HAS_UP:
        up = _project(wu_ptr, e, rows, N, x_ptr, k0, k1, FMT, K, BN, STEP, TAIL, EVEN_N, UPT, WPL, FENCE, ASM)
        res = gated_act(res, ACT) * up
    res = tl.where(e_ok, res, float("nan"))
    store_or_mix(out_ptr, res, slot, N, row_ok, mix_ptr, part_ptr, cnt_ptr, MIX, TOPK)


MAX_SLOTS = 16  # routed rows (tokens x top_k) up to this many take it (decode; from 17 the grouped kernels)


def supports(type_id: int, x_dtype: torch.dtype, k: int, slots: int, nbytes: int) -> bool:
    """GGUF Q6_K experts of whole super-blocks or Q8_0 experts of rows that ``q8_mv`` steps through, bf16/fp16 x and
    result, up to ``MAX_SLOTS`` routed rows, ``nbytes`` (the stacked experts) below 2**31; ``MLX_NATIVE_GGUF_MV=0``
    turns it off (with the one-row kernels)."""
    rows_ok = (k > 0 and k % 256 == 0) if type_id == q6k_mv.Q6K_ID else (
        type_id == q8_mv.Q8_ID and q8_mv.tiling(k)[0] > 0)
    return (env.settings.gguf_mv and rows_ok and x_dtype in (torch.bfloat16, torch.float16)
            and 1 <= slots <= MAX_SLOTS and nbytes < 2**31)


class MoeGgufMvLaunch:
    """:func:`moe_gguf_mv_kernel` for ``slots`` routed rows against Q6_K / Q8_0 experts stacked ``[n_experts, n, k]``
    (raw bytes, contiguous, 16-byte aligned): calls ``(x [t or slots, k], ids [slots], raw, raw_up)`` return
    ``[slots, n]``; ``x_div``: the slots per row of x (an odd row stride is copied: x is read as words); ``act``: the
    fused gate/up pair (an activation code of ``qmm.ACT_CODES``); ``warps``, ``bn``: the sweep's knobs (0: the rules
    below); ``mix``: the ``top_k`` slots of each token mixed in the launch (``slots.SlotMix``: calls take the routing
    weights ``mix [slots]`` and return ``[slots / top_k, n]``); ``link``: launched as a link of ``moe_ggml_ffn``'s
    chain (``slots.ROUTE_LINK`` / ``H_LINK``; 0 a plain launch).

    Tiles (H200, session 41 run 6, ``moe_mv_sweep.py``, one token of the Qwen3-30B-A3B shapes, us): Q6_K rows of whole
    4-super-block steps 4 warps and 8 rows a thread (the gate/up pair, K 2048: 16 rows a program 11.4 against 14.6
    with the one-row kernel's 8), other steps 2 warps and 2 rows a thread (the down projection, K 768: 8 rows 7.28
    against 7.72 with 32); Q8_0 the one-row kernel's 8 rows for steps of 16 pairs (gate/up 12.75, fewer warps or rows
    12.8-20.2), 16 for shorter steps (down, steps of 4 pairs: 6.42 against 7.12). The
    Qwen3-30B-A3B-shaped step with these tiles (session 42 run 2): Q6_K 28.65 -> 23.91 us, Q8_0 25.11 -> 25.03."""

    def __init__(self, type_id: int, slots: int, n: int, k: int, n_experts: int, x_div: int, out_dtype: torch.dtype,
                 device, act: Optional[int] = None, warps: int = 0, bn: int = 0, mix: bool = False, top_k: int = 1,
                 link: int = 0):
        self.n, self.n_experts = n, n_experts
        self.q6k = type_id == q6k_mv.Q6K_ID
        if self.q6k:
            step, tail = q6k_mv.tiling(k)  # unsplit: the steps that divide the row, else steps of 4 and a partial one
            long = step == q6k_mv.Q6K_MAX_SBS
            warps = warps or (4 if long else 2)
            bn = bn or q6k_mv.tile_rows(step, warps=warps, rt=8 if long else 2)
            self.consts = (MAGIC, q6k_mv.NIB)
        else:
            step, tail = q8_mv.tiling(k)
            warps, bn = warps or q8_mv.Q8_WARPS, bn or (q8_mv.Q8_BN if step == q8_mv.Q8_MAX_UPS else 2 * q8_mv.Q8_BN)
            self.consts = (q8_mv.C_LO, q8_mv.C_HI)
        self.mix = SlotMix(mix, slots, top_k, n, triton.cdiv(n, bn), out_dtype, device)
        self.launch = Launch(moe_gguf_mv_kernel, (triton.cdiv(n, bn), slots), dict(
            FMT=type_id, K=k, BN=bn, STEP=step, TAIL=tail, EVEN_N=n % bn == 0, X_DIV=x_div, HAS_UP=act is not None,
            ACT=act or 0, UPT=q6k_mv.Q6K_UPT, WPL=q8_mv.Q8_WPL, FENCE=q8_mv.Q8_FENCE,
            ASM=not env.settings.triton_interpret, MIX=self.mix.mixes, TOPK=top_k, PDL=link), num_warps=warps,
            num_stages=1, pdl=link > 0)

    def __call__(self, x: torch.Tensor, ids: torch.Tensor, raw: torch.Tensor, raw_up: Optional[torch.Tensor] = None,
                 mix: Optional[torch.Tensor] = None) -> torch.Tensor:
        out, part, cnt = self.mix.buffers()
        x = word_aligned(x.contiguous() if x.stride(0) % 2 else x)
        unit = torch.int16 if self.q6k else torch.int32
        w = raw.view(unit)
        self.launch(x, ids, w, w if raw_up is None else raw_up.view(unit), out, out if mix is None else mix, part, cnt,
                    self.n, x.stride(0), self.n_experts, *self.consts)
        return out
