"""Expert-routed decode mat-vecs for GGUF Q4_K / Q5_K experts, by integer dot products.

A MoE decode step on GGUF experts (``moe_ggml_matmul``: ``ffn_gate_exps`` / ``ffn_up_exps`` / ``ffn_down_exps`` of a
llama.cpp file, ``[E, N, K]`` raw rows) multiplies each routed row ("slot": a token and one of its ``top_k`` experts)
by its expert's ``[N, K]`` matrix. This is ``ggml/q4k_idot.py``'s one-row integer-dot mat-vec (x quantized to int16
per 32 values, two codes per ``dp2a``; Q5_K's fifth bits folded into the code bytes) with a second grid axis over the
slots: program ``(tile, slot)`` reads the slot's expert id and streams ``BN`` rows of that expert (``BN`` of the gate
and ``BN`` of the up projection with ``HAS_UP``: ``act(x G^T) * (x U^T)`` stored for the slot's outputs).

Rows of any number of super-blocks: ``STEPS`` whole loop steps of 8 super-blocks (one warp), then a partial step of
the remaining ``TAIL`` chunks (Qwen3-MoE's down projection has K = 768, three super-blocks: a partial step only), its
loads masked. Expert ids outside ``[0, E)`` read expert 0 and give NaN rows, as the other expert kernels do.

The down projection with the routing weights (``moe_ggml_matmul(topk_weights=)``, ``moe_ggml_ffn``) on rows of one
loop step (up to 2048 values) mixes a token's slots in one program set (:func:`moe_q4k_mix_kernel`: program ``(tile,
token)``, the slots end to end along the chunk axis, each chunk row's sum weighted by its slot's routing weight before
the sum over chunk rows), its whole tile requested before it waits for h; other rows mix by arrival (``slots.py``).
H200, session 43 run 2 (Qwen3-30B-A3B-shaped step, ``moe_ggml_ffn``, us, arrival -> one program set): Q4_K 18.0-18.1
-> 14.7-14.8, Q5_K 21.5-21.7 -> 17.3-17.5 (16.0 with 8-row tiles, ``MIX_BN``; 15.1 with 8-row gate/up tiles too,
``GLU_BN``, run 7).

H200, session 36 run 5 (``bench/moe_gguf_decode.py``, Qwen3-30B-A3B shapes, the step through ``moe_route``, the
gate/up pair, the down projection and ``moe_weighted_reduce``; CUDA-graph replay): one token Q4_K 33.3 -> 19.5 us,
Q5_K 42.2 -> 22.7 (the tiled routed kernel before); MLX affine ``moe_ffn`` 12.5 (three launches chained by
programmatic dependent launch, the down projection mixing the slots). Launched as programmatic dependents, this kernel
and the weighted reduce were 0.4-1.2 us slower (run 6: ``bench/results/2026-11-28-session36/run6_pdl_tried.patch``).
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from ...kernels.launch import Launch
from ...kernels.math import gated_act
from ...runtime import env
from ..ggml import formats
from ..ggml.q4k_idot import Q5K_SBW, SBW, _step, _tiles, tile_offsets
from ..ggml.q4k_mv import Q4K_ID, Q5K_ID
from ..common import next_pow2
from ..quant.affine_mv import MAGIC, row_tile
from .slots import H_LINK, SlotMix, routed_slot, routing_link, store_or_mix, token_slots


@triton.jit
def _project(acc, w_ptr, w_off, h_off, sa, sh, keep, q_sh, magic, x_ptr, x_off, STEPS: tl.constexpr,
             TAIL: tl.constexpr, STEP_W: tl.constexpr, CH: tl.constexpr, Q5K: tl.constexpr, ASM: tl.constexpr,
             WAIT: tl.constexpr = False):
    """``acc [CH, BN]`` + the whole row of one projection (``w_ptr``: its expert's first word): ``STEPS`` whole
    steps, then the ``TAIL`` chunks of a partial one (masked). ``WAIT`` (a programmatic dependent launch whose x the
    launch before writes): a row of one step requests its tiles, then waits for that launch; longer rows wait
    first."""
    if WAIT:
        if STEPS + (TAIL > 0) == 1:
            w_mask = None if STEPS else (tl.arange(0, 4 * CH) // 4 < TAIL)[:, None]
            x_mask = None if STEPS else (tl.arange(0, CH) < TAIL)[:, None]
            wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, 0, Q5K, w_mask)
            gdc_wait()
            return _step(acc, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr, x_off, Q5K, ASM, x_mask)
        gdc_wait()
    for s in range(STEPS):
        wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, s * STEP_W, Q5K)
        acc = _step(acc, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr + s * (CH * 64), x_off, Q5K, ASM)
    if TAIL:
        wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, STEPS * STEP_W, Q5K,
                                   (tl.arange(0, 4 * CH) // 4 < TAIL)[:, None])
        acc = _step(acc, wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr + STEPS * (CH * 64), x_off, Q5K, ASM,
                    (tl.arange(0, CH) < TAIL)[:, None])
    return acc


@triton.jit(do_not_specialize=["magic"])
def moe_q4k_idot_kernel(
    x_ptr,  # [T, K] (X_DIV = TOPK: shared by a token's slots) or [T * TOPK, K] (X_DIV = 1); row stride stride_x
    ids_ptr,  # [T * TOPK] expert ids, int32 or int64
    w_ptr, wu_ptr,  # [E, N, K / 256 * SBW] int32 words of the raw experts (wu_ptr: the up projection's, HAS_UP)
    out_ptr,  # [T * TOPK, N] ([T, N] with MIX)
    mix_ptr, part_ptr, cnt_ptr,  # MIX: routing weights [T * TOPK], fp32 partials [T * TOPK, N], counters [T, tiles]
    N, stride_x, n_experts, magic,
    STRIDE_W: tl.constexpr, STRIDE_E: tl.constexpr,  # words per row / per expert
    BN: tl.constexpr, CH: tl.constexpr, STEPS: tl.constexpr, TAIL: tl.constexpr, EVEN_N: tl.constexpr,
    X_DIV: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr, Q5K: tl.constexpr, ASM: tl.constexpr,
    MIX: tl.constexpr = False, TOPK: tl.constexpr = 1, PDL: tl.constexpr = 0,
):
    """Program ``(tile, slot)``: ``BN`` rows of the slot's expert (and ``BN`` of its up projection); with ``MIX`` the
    token's ``TOPK`` slots mixed in the launch (``slots.store_or_mix``); ``PDL``: a link of ``moe_ggml_ffn``'s chain
    (``slots.routing_link``)."""
    routing_link(PDL)
    slot, e, e_ok, x_ptr = routed_slot(ids_ptr, x_ptr, stride_x, n_experts, X_DIV)
    STEP_W: tl.constexpr = CH // 4 * (Q5K_SBW if Q5K else SBW)  # words of a row per loop step
    rows, row_ok = row_tile(N, BN, EVEN_N)
    sa, sh, keep, q_sh, h_off, w_off, x_off = tile_offsets(rows, STRIDE_W, CH, Q5K)
    zero = tl.zeros([CH, BN], dtype=tl.float32)
    acc = _project(zero, w_ptr + e * STRIDE_E, w_off, h_off, sa, sh, keep, q_sh, magic, x_ptr, x_off, STEPS, TAIL,
                   STEP_W, CH, Q5K, ASM, PDL == H_LINK)
    res = tl.sum(acc, axis=0)
    if HAS_UP:
        up = _project(zero, wu_ptr + e * STRIDE_E, w_off, h_off, sa, sh, keep, q_sh, magic, x_ptr, x_off, STEPS, TAIL,
                      STEP_W, CH, Q5K, ASM)
        res = gated_act(res, ACT) * tl.sum(up, axis=0)
    res = tl.where(e_ok, res, float("nan"))
    store_or_mix(out_ptr, res, slot, N, row_ok, mix_ptr, part_ptr, cnt_ptr, MIX, TOPK)


@triton.jit(do_not_specialize=["magic"])
def moe_q4k_mix_kernel(
    x_ptr,  # [T * TOPK, K] one x row per slot, row stride stride_x
    ids_ptr,  # [T * TOPK] expert ids, int32 or int64
    mix_ptr,  # [T * TOPK] routing weights
    w_ptr,  # [E, N, K / 256 * SBW] int32 words of the raw experts
    out_ptr,  # [T, N]
    N, stride_x, n_experts, magic,
    STRIDE_W: tl.constexpr, STRIDE_E: tl.constexpr, BN: tl.constexpr, CH: tl.constexpr, CHUNKS: tl.constexpr,
    SLOTS: tl.constexpr, TOPK: tl.constexpr, EVEN_N: tl.constexpr, Q5K: tl.constexpr, ASM: tl.constexpr,
    PDL: tl.constexpr = 0,
):
    """Program ``(tile, token)``: ``BN`` output rows summed over the token's ``TOPK`` slots, rows of one loop step
    (``CHUNKS`` 64-value chunks, ``CH`` the power of two above). The slots lie end to end along the chunk axis
    (``SLOTS * CH`` chunk rows, one a thread; ``SLOTS``: TOPK rounded up to a power of two), each chunk row gathering
    its slot's expert and x row; each chunk row's sum is weighted by its slot's routing weight before the one sum
    over the chunk rows, which mixes the slots (no partials, no counters, deterministic). The routing and the whole
    tile are requested first; as ``H_LINK`` of ``moe_ggml_ffn``'s chain the program then waits for x."""
    token = tl.program_id(1).to(tl.int64)
    CT: tl.constexpr = SLOTS * CH  # chunk rows
    rows, row_ok = row_tile(N, BN, EVEN_N)
    ct = tl.arange(0, CT)
    slot_ok, _, mul, w_slot, ew = token_slots(ids_ptr, mix_ptr, token, n_experts, CT, CH, TOPK)
    i = tl.arange(0, 4 * CT)  # word i % 4 of chunk row i // 4
    cw = (i // 4) % CH
    # runs of 4 words of one chunk row (16-byte aligned: STRIDE_E, STRIDE_W and the chunk offsets are multiples of 4)
    h_row = tl.max_contiguous(tl.multiple_of(ew * STRIDE_E + (cw // 4) * (Q5K_SBW if Q5K else SBW) + i % 4, 4), 4)
    h_off = h_row[:, None] + rows[None, :] * STRIDE_W
    w_off = h_off + ((12 if Q5K else 4) + (cw % 4) * 8)[:, None]
    w_ok = (w_slot & (cw < CHUNKS))[:, None]
    sa, sh, keep, q_sh, _, _, _ = tile_offsets(rows, STRIDE_W, CT, Q5K)  # per chunk row: its chunk % 4
    x_off = ((token * TOPK + ct // CH) * stride_x + (ct % CH) * 64)[:, None] + tl.arange(0, 8)[None, :]
    x_ok = (slot_ok & (ct % CH < CHUNKS))[:, None]
    wa, wb, h, qa, qb = _tiles(w_ptr, w_off, h_off, 0, Q5K, w_ok)
    if PDL == H_LINK:
        gdc_wait()
    acc = _step(tl.zeros([CT, BN], dtype=tl.float32), wa, wb, h, qa, qb, sa, sh, keep, q_sh, magic, x_ptr, x_off, Q5K,
                ASM, x_ok)
    res = tl.sum(acc * mul[:, None], axis=0)
    tl.store(out_ptr + token * N + rows, res.to(out_ptr.dtype.element_ty), mask=row_ok)


# ----------------------------------------------------------------------------- launch plans

BN = 4  # rows per program (one matrix)
# Rows of each projection per program of a gate/up pair (H200, session 43 run 6, the Qwen3-30B-A3B-shaped moe_ggml_ffn
# step, us at 2 / 4 / 8 rows: Q4_K 14.66-15.13 / 14.72-14.74 / 14.92-14.95, Q5_K 16.78-16.80 / 15.75-15.80 /
# 15.33-15.34)
GLU_BN = {Q4K_ID: 4, Q5K_ID: 8}
MAX_SLOTS = 16  # routed rows (tokens x top_k) up to this many take it (decode; from 17 the grouped kernels)
TYPES = (Q4K_ID, Q5K_ID)
# Output rows per program of moe_q4k_mix_kernel (H200, session 43 run 2, the Qwen3-30B-A3B-shaped moe_ggml_ffn step,
# us at 2 / 4 / 8 rows: Q4_K 18.0-18.4 / 14.8-14.9 / 15.4, Q5_K 18.3-18.4 / 17.6 / 16.0)
MIX_BN = {Q4K_ID: 4, Q5K_ID: 8}
MIX_MAX_CHUNK_ROWS = 256  # its chunk rows (top_k and the row's chunks, each rounded up to a power of two): 8 warps


def mix_chunk_rows(k: int, top_k: int) -> int:
    """Chunk rows of :func:`moe_q4k_mix_kernel` for ``top_k`` slots of rows of ``k`` values (0: rows of more than
    one loop step or more than ``MIX_MAX_CHUNK_ROWS``: the kernel does not take them)."""
    chunks = k // 64
    rows = next_pow2(top_k) * next_pow2(chunks)
    return rows if chunks <= 32 and rows <= MIX_MAX_CHUNK_ROWS else 0


def supports(type_id: int, x_dtype: torch.dtype, k: int, slots: int, nbytes: int) -> bool:
    """GGUF Q4_K / Q5_K experts, bf16/fp16 x and result, up to ``MAX_SLOTS`` routed rows of whole super-blocks,
    ``nbytes`` (the stacked experts) below 2**31; ``MLX_NATIVE_GGML_IDOT=0`` turns it off."""
    return (env.settings.ggml_idot and type_id in TYPES and x_dtype in (torch.bfloat16, torch.float16)
            and k % 256 == 0 and 1 <= slots <= MAX_SLOTS and nbytes < 2**31)


class MoeGgmlIdotLaunch:
    """:func:`moe_q4k_idot_kernel` for ``slots`` routed rows against experts stacked ``[n_experts, n, k]`` (raw bytes,
    contiguous): calls ``(x [t or slots, k] (any row stride), ids [slots], raw, raw_up, mix)`` return ``[slots, n]``;
    ``x_div``: the slots per row of x; ``act``: the fused gate/up pair (an activation code of ``qmm.ACT_CODES``);
    ``mix``: the ``top_k`` slots of each token mixed in the launch with the routing weights ``mix [slots]`` (``[slots
    / top_k, n]``; ``self.mix.mixes`` False during a CUDA-graph capture: then unmixed); ``link``: launched as a link of
    ``moe_ggml_ffn``'s chain (``slots.ROUTE_LINK`` / ``H_LINK``; 0 a plain launch)."""

    def __init__(self, type_id: int, slots: int, n: int, k: int, n_experts: int, x_div: int, out_dtype: torch.dtype,
                 device, act: Optional[int] = None, mix: bool = False, top_k: int = 1, link: int = 0):
        self.n, self.n_experts = n, n_experts
        q5k = type_id == Q5K_ID
        stride_w = formats.row_bytes(formats.BY_ID[type_id], k) // 4
        sbs = k // 256
        asm = not env.settings.triton_interpret
        rows = mix_chunk_rows(k, top_k) if mix and x_div == 1 else 0
        self.by_token = rows > 0
        if self.by_token:  # the token's slots mixed by one program set: no partials, no counters
            self.mix = SlotMix(mix, slots, top_k, n, 0, out_dtype, device, arrival=False)
            bn = MIX_BN[type_id]
            self.launch = Launch(moe_q4k_mix_kernel, (triton.cdiv(n, bn), slots // top_k), dict(
                STRIDE_W=stride_w, STRIDE_E=n * stride_w, BN=bn, CH=next_pow2(k // 64), CHUNKS=k // 64,
                SLOTS=next_pow2(top_k), TOPK=top_k, EVEN_N=n % bn == 0, Q5K=q5k, ASM=asm, PDL=link),
                num_warps=max(1, rows // 32), num_stages=1, pdl=link > 0)
            return
        bn = BN if act is None else GLU_BN[type_id]
        self.mix = SlotMix(mix, slots, top_k, n, triton.cdiv(n, bn), out_dtype, device)
        self.launch = Launch(moe_q4k_idot_kernel, (triton.cdiv(n, bn), slots), dict(
            STRIDE_W=stride_w, STRIDE_E=n * stride_w, BN=bn, CH=32, STEPS=sbs // 8, TAIL=sbs % 8 * 4,
            EVEN_N=n % bn == 0, X_DIV=x_div, HAS_UP=act is not None, ACT=act or 0, Q5K=q5k,
            ASM=asm, MIX=self.mix.mixes, TOPK=top_k, PDL=link), num_warps=1, num_stages=1, pdl=link > 0)

    def __call__(self, x: torch.Tensor, ids: torch.Tensor, raw: torch.Tensor, raw_up: Optional[torch.Tensor] = None,
                 mix: Optional[torch.Tensor] = None) -> torch.Tensor:
        out, part, cnt = self.mix.buffers()
        w = raw.view(torch.int32)
        if self.by_token:
            self.launch(x, ids, mix, w, out, self.n, x.stride(0), self.n_experts, MAGIC)
            return out
        self.launch(x, ids, w, w if raw_up is None else raw_up.view(torch.int32), out, out if mix is None else mix,
                    part, cnt, self.n, x.stride(0), self.n_experts, MAGIC)
        return out
