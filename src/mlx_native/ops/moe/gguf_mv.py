"""Expert-routed decode mat-vec for GGUF Q6_K experts, on ``ggml/q6k_mv.py``'s streamed loop.

A MoE decode step on Q6_K experts (``moe_ggml_matmul``: the ``ffn_down_exps`` of half the layers of a Q4_K_M
llama.cpp file, or every projection of a Q6_K one; ``[E, N, K]`` raw rows) multiplies each routed row ("slot": a
token and one of its ``top_k`` experts) by its expert's ``[N, K]`` matrix. Program ``(tile, slot)`` reads the slot's
expert id and runs :func:`~mlx_native.ops.ggml.q6k_mv.rows_loop` over the whole row of ``BN`` rows of that expert
(and of its up projection with ``HAS_UP``: ``act(x G^T) * (x U^T)`` stored for the slot's outputs), one row of x.
The tiling is ``q6k_mv``'s (steps of 1-4 super-blocks, or 4 and a partial one), unsplit: Qwen3-MoE's down
projection (K = 768, three super-blocks) takes 1-super-block steps in 32-row tiles, its gate / up (K = 2048) steps of
4 in 8-row tiles. Expert ids outside ``[0, E)`` read expert 0 and give NaN rows, as the other expert kernels do.

(``ggml/block_mmv.py``'s tensor-core decode, routed one row of x a slot, was slower than the tiled routed kernel
this replaces: a Qwen3-30B-A3B-shaped step Q6_K 58.4 against 48.1 us, H200 session 41 run 1; its decode costs as
much per code at one row as at 16.)
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...kernels.math import gated_act
from ...kernels.words import word_aligned
from ...runtime import env
from ...runtime.memory import empty
from ..ggml.q6k_mv import NIB, Q6K_ID, Q6K_UPT, Q6K_WARPS, rows_loop, tile_offsets, tile_rows, tiling
from ..quant.affine_mv import MAGIC, row_tile


@triton.jit
def _project(w_ptr, base, r_off, x_ptr, magic, nib, N_SB: tl.constexpr, BN: tl.constexpr, SBS: tl.constexpr,
             UPT: tl.constexpr, TAIL: tl.constexpr, ASM: tl.constexpr):
    """``[BN]`` fp32: the rows at half offsets ``base + r_off`` of ``w_ptr`` (int16 halves) times the row of x at
    ``x_ptr``, whole row."""
    a_off, c_off, s_off, d_off, x_off = tile_offsets(r_off, SBS, UPT)
    acc, _, _, _ = rows_loop(w_ptr + base, a_off, c_off, s_off, d_off, x_ptr, x_off, 0, 0, N_SB - TAIL, True, magic,
                             nib, N_SB, BN, SBS, UPT, TAIL, 1, ASM)
    return tl.sum(tl.sum(acc, axis=2), axis=1)


@triton.jit(do_not_specialize=["magic", "nib"])
def moe_q6k_mv_kernel(
    x_ptr,  # [T, K] (X_DIV = TOPK: shared by a token's slots) or [T * TOPK, K] (X_DIV = 1); even row stride stride_x
    ids_ptr,  # [T * TOPK] expert ids, int32 or int64
    w_ptr, wu_ptr,  # [E * N * K / 256 * 105] int16 halves of the raw experts (wu_ptr: the up projection's, HAS_UP)
    out_ptr,  # [T * TOPK, N]
    N, stride_x, n_experts, magic, nib,
    N_SB: tl.constexpr, BN: tl.constexpr, SBS: tl.constexpr, UPT: tl.constexpr, TAIL: tl.constexpr,
    EVEN_N: tl.constexpr, X_DIV: tl.constexpr, HAS_UP: tl.constexpr, ACT: tl.constexpr, ASM: tl.constexpr,
):
    """Program ``(tile, slot)``: ``BN`` rows of the slot's expert (and ``BN`` of its up projection)."""
    STRIDE_H: tl.constexpr = N_SB * 105
    slot = tl.program_id(1)
    e = tl.load(ids_ptr + slot).to(tl.int64)
    e_ok = (e >= 0) & (e < n_experts)
    e = tl.where(e_ok, e, 0)
    x_ptr += (slot // X_DIV).to(tl.int64) * stride_x
    rows, row_ok = row_tile(N, BN, EVEN_N)
    if EVEN_N:  # the tile's first row in the base: constant row offsets
        base = (e * N + tl.program_id(0) * BN) * STRIDE_H
        r_off = tl.arange(0, BN) * STRIDE_H
    else:
        base = e * N * STRIDE_H
        r_off = rows * STRIDE_H
    res = _project(w_ptr, base, r_off, x_ptr, magic, nib, N_SB, BN, SBS, UPT, TAIL, ASM)
    if HAS_UP:
        up = _project(wu_ptr, base, r_off, x_ptr, magic, nib, N_SB, BN, SBS, UPT, TAIL, ASM)
        res = gated_act(res, ACT) * up
    res = tl.where(e_ok, res, float("nan"))
    offs = slot.to(tl.int64) * N + tl.program_id(0) * BN + tl.arange(0, BN)
    tl.store(out_ptr + offs, res.to(out_ptr.dtype.element_ty), mask=row_ok)


MAX_SLOTS = 16  # routed rows (tokens x top_k) up to this many take it (decode; from 17 the grouped kernels)


def supports(type_id: int, x_dtype: torch.dtype, k: int, slots: int, nbytes: int) -> bool:
    """GGUF Q6_K experts, bf16/fp16 x and result, up to ``MAX_SLOTS`` routed rows of whole super-blocks, ``nbytes``
    (the stacked experts) below 2**31; ``MLX_NATIVE_GGUF_MV=0`` turns it off (with the one-row Q6_K kernel)."""
    return (env.settings.gguf_mv and type_id == Q6K_ID and x_dtype in (torch.bfloat16, torch.float16)
            and k > 0 and k % 256 == 0 and 1 <= slots <= MAX_SLOTS and nbytes < 2**31)


class MoeQ6kMvLaunch:
    """:func:`moe_q6k_mv_kernel` for ``slots`` routed rows against Q6_K experts stacked ``[n_experts, n, k]`` (raw
    bytes, contiguous): calls ``(x [t or slots, k], ids [slots], raw, raw_up)`` return ``[slots, n]``; ``x_div``: the
    slots per row of x (an odd row stride is copied: x is read as words); ``act``: the fused gate/up pair (an
    activation code of ``qmm.ACT_CODES``)."""

    def __init__(self, slots: int, n: int, k: int, n_experts: int, x_div: int, out_dtype: torch.dtype, device,
                 act: Optional[int] = None):
        self.slots, self.n, self.n_experts, self.out_dtype, self.device = slots, n, n_experts, out_dtype, device
        sbs, tail = tiling(k)  # (unsplit: the steps that divide the row, else steps of 4 and a partial one)
        bn = tile_rows(sbs)
        self.launch = Launch(moe_q6k_mv_kernel, (triton.cdiv(n, bn), slots), dict(
            N_SB=k // 256, BN=bn, SBS=sbs, UPT=Q6K_UPT, TAIL=tail, EVEN_N=n % bn == 0, X_DIV=x_div,
            HAS_UP=act is not None, ACT=act or 0, ASM=not env.settings.triton_interpret), num_warps=Q6K_WARPS,
            num_stages=1)

    def __call__(self, x: torch.Tensor, ids: torch.Tensor, raw: torch.Tensor, raw_up: Optional[torch.Tensor] = None
                 ) -> torch.Tensor:
        out = empty((self.slots, self.n), dtype=self.out_dtype, device=self.device)
        x = word_aligned(x.contiguous() if x.stride(0) % 2 else x)
        w = raw.view(torch.int16)
        self.launch(x, ids, w, w if raw_up is None else raw_up.view(torch.int16), out, self.n, x.stride(0),
                    self.n_experts, MAGIC, NIB)
        return out
