"""Flash-attention prefill kernel (FlashAttention-2 style forward).

One program owns ``BLOCK_M`` query rows of one (batch, query head) and walks
the key/value tiles its rows can see, keeping the online-softmax state
(running max ``m``, sum ``l``, fp32 accumulator) in registers. Scores live in
the log2 domain (``scale * log2(e)`` folded in) so the exponentials are
``exp2``.

Tile skipping: the visible key range of a query block is computed from the
causal diagonal and the sliding window, so tiles no row can see are never
loaded. The visible range is cut into three segments: an edge segment under
the window's lower boundary, an interior of tiles every row sees entirely
(no masking work at all: the hot loop), and the diagonal / tail segment.
With a user mask, every tile reads its mask tile first and skips the dot
products when the tile is entirely masked.

Rows that see nothing keep ``l == 0`` and are written as zeros with
``lse = -inf``; ``m`` is replaced by 0 in the exponentials while it is
``-inf`` so no ``-inf - -inf`` NaN appears.

Device key lengths (``DEVICE_LK``): k / v are a cache of ``Lk`` positions, and
sequence ``b`` reads its key count from ``kv_lens[b]`` on the device, so a
chunk that continues a cache needs no host value and can be captured in a
CUDA graph (the model runner's prefill).
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ...kernels.math import tanh
from ...runtime import env
from ...runtime.memory import empty
from ..common import next_pow2

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

# (BLOCK_M, BLOCK_N, num_warps, num_stages) by (16-bit?, BLOCK_D) on CUDA. Tuned on an H100 (see bench/attention.py).
GPU_CONFIGS = {
    (True, 16): (64, 64, 4, 3),
    (True, 32): (64, 64, 4, 3),
    (True, 64): (64, 64, 4, 3),
    (True, 128): (128, 64, 8, 3),
    (True, 256): (128, 64, 8, 2),
    (True, 512): (64, 32, 8, 2),
    (False, 16): (64, 32, 4, 2),
    (False, 32): (64, 32, 4, 2),
    (False, 64): (64, 32, 4, 2),
    (False, 128): (64, 32, 4, 2),
    (False, 256): (32, 32, 4, 2),
    (False, 512): (16, 16, 4, 1),
}
INTERPRETER_CONFIG = (32, 16, 4, 1)  # small tiles: CPU tests then cross many tile boundaries


@triton.jit
def _tiles(acc, l_i, m_i, q, k_base, v_base, mask_base, sk_l, sv_l, sm_k, lo, hi, offs_m, row_ok, qpos, Lk,
           window, qk_scale, softcap_in, softcap_out,
           BOUNDS: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr, HAS_MASK: tl.constexpr,
           MASK_BOOL: tl.constexpr, SOFTCAP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
           HEAD_D: tl.constexpr, EVEN_D: tl.constexpr, PRECISION: tl.constexpr, IDX64: tl.constexpr):
    """Online softmax over key tiles ``[lo, hi)``; BOUNDS: apply key-length, causal and window masks."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_D
    for start_n in range(lo, hi, BLOCK_N):
        kpos = start_n + offs_n
        if IDX64:
            kpos = kpos.to(tl.int64)
        live = True
        if HAS_MASK:
            mptr = mask_base + kpos[None, :].to(tl.int64) * sm_k
            mok = row_ok[:, None] & (kpos < Lk)[None, :]
            if MASK_BOOL:
                mv = tl.load(mptr, mask=mok, other=0)
                madd = tl.where(mv != 0, 0.0, float("-inf"))
            else:
                madd = tl.load(mptr, mask=mok, other=float("-inf")).to(tl.float32) * 1.4426950408889634
            live = tl.max(tl.max(madd, axis=1), axis=0) > float("-inf")
        if live:
            if BOUNDS:
                kmask = (kpos < Lk)[:, None]
                if EVEN_D:
                    k = tl.load(k_base + kpos[:, None] * sk_l + offs_d[None, :], mask=kmask, other=0.0)
                else:
                    k = tl.load(k_base + kpos[:, None] * sk_l + offs_d[None, :], mask=kmask & d_ok[None, :],
                                other=0.0)
            else:
                if EVEN_D:
                    k = tl.load(k_base + kpos[:, None] * sk_l + offs_d[None, :])
                else:
                    k = tl.load(k_base + kpos[:, None] * sk_l + offs_d[None, :], mask=d_ok[None, :], other=0.0)
            qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)
            if BOUNDS or HAS_MASK or SOFTCAP:
                if SOFTCAP:
                    s = tanh(qk * softcap_in) * softcap_out
                else:
                    s = qk * qk_scale
                if HAS_MASK:
                    s = s + madd
                if BOUNDS:
                    ok = (kpos < Lk)[None, :]
                    if CAUSAL:
                        ok = ok & (kpos[None, :] <= qpos[:, None])
                    if WINDOW:
                        ok = ok & (kpos[None, :] > qpos[:, None] - window)
                    s = tl.where(ok, s, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, axis=1))
                m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
                p = tl.math.exp2(s - m_use[:, None])
            else:  # the hot loop: every score finite, scale > 0 (one FMA per score)
                m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
                m_use = m_new
                p = tl.math.exp2(qk * qk_scale - m_use[:, None])
            alpha = tl.math.exp2(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None]
            if BOUNDS:
                if EVEN_D:
                    v = tl.load(v_base + kpos[:, None] * sv_l + offs_d[None, :], mask=kmask, other=0.0)
                else:
                    v = tl.load(v_base + kpos[:, None] * sv_l + offs_d[None, :], mask=kmask & d_ok[None, :],
                                other=0.0)
            else:
                if EVEN_D:
                    v = tl.load(v_base + kpos[:, None] * sv_l + offs_d[None, :])
                else:
                    v = tl.load(v_base + kpos[:, None] * sv_l + offs_d[None, :], mask=d_ok[None, :], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
            m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["Lq", "Lk", "window"])
def _prefill_kernel(
    q_ptr,  # [B, Hq, Lq, D] (strides sq_*)
    k_ptr,  # [B, Hkv, Lk, D] (strides sk_*)
    v_ptr,  # [B, Hkv, Lk, D] (strides sv_*)
    o_ptr,  # [B, Hq, Lq, D] contiguous, q's dtype
    lse_ptr,  # [B, Hq, Lq] contiguous fp32
    mask_ptr,  # mask broadcast to [B, Hq, Lq, Lk] (strides sm_*, 0 on broadcast dims); HAS_MASK
    kvlen_ptr,  # [B] int32 keys of each sequence (DEVICE_LK; Lk is then the capacity of k / v)
    sq_b, sq_h, sq_l,
    sk_b, sk_h, sk_l,
    sv_b, sv_h, sv_l,
    sm_b, sm_h, sm_q, sm_k,
    Hq, Lq, Lk, window,
    qk_scale,  # scale * log2(e)
    softcap_in,  # scale / softcap
    softcap_out,  # softcap * log2(e)
    GQA: tl.constexpr,
    CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr,
    HAS_MASK: tl.constexpr,
    MASK_BOOL: tl.constexpr,
    SOFTCAP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
    EVEN_D: tl.constexpr,
    PRECISION: tl.constexpr,
    REVERSE: tl.constexpr,  # heavy (late) query blocks first: causal load balance
    IDX64: tl.constexpr,  # key offsets need int64
    DEVICE_LK: tl.constexpr = False,  # sequence b has kvlen_ptr[b] keys (read on the device: graph-capturable)
):
    n_mblocks = tl.cdiv(Lq, BLOCK_M)
    pid_m = tl.program_id(0)
    if REVERSE:
        pid_m = n_mblocks - 1 - pid_m
    pid_bh = tl.program_id(1)
    b = pid_bh // Hq
    h = pid_bh % Hq
    hk = h // GQA
    if DEVICE_LK:
        Lk = tl.load(kvlen_ptr + b).to(tl.int32)
    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < Lq
    d_ok = offs_d < HEAD_D

    q_base = q_ptr + b.to(tl.int64) * sq_b + h.to(tl.int64) * sq_h
    q = tl.load(q_base + offs_m[:, None].to(tl.int64) * sq_l + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    k_base = k_ptr + b.to(tl.int64) * sk_b + hk.to(tl.int64) * sk_h
    v_base = v_ptr + b.to(tl.int64) * sv_b + hk.to(tl.int64) * sv_h
    mask_base = mask_ptr
    if HAS_MASK:
        mask_base = mask_ptr + b.to(tl.int64) * sm_b + h.to(tl.int64) * sm_h + offs_m[:, None].to(tl.int64) * sm_q

    off = Lk - Lq
    qpos = offs_m + off
    last = tl.minimum(m0 + BLOCK_M, Lq) - 1
    hi = Lk
    lo = 0
    full_lo = 0
    full_hi = Lk
    if CAUSAL:
        hi = tl.minimum(Lk, off + last + 1)
        full_hi = tl.minimum(Lk, off + m0 + 1)
    if WINDOW:
        lo = tl.maximum(0, off + m0 - window + 1)
        full_lo = tl.maximum(0, off + last - window + 1)
    hi = tl.maximum(hi, 0)
    lo = (lo // BLOCK_N) * BLOCK_N
    full_lo = tl.cdiv(full_lo, BLOCK_N) * BLOCK_N
    full_hi = (tl.maximum(full_hi, 0) // BLOCK_N) * BLOCK_N
    seg1 = tl.minimum(tl.maximum(full_lo, lo), hi)
    seg2 = tl.maximum(seg1, tl.minimum(full_hi, hi))

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    # window's lower edge (masked), interior (no masking), diagonal and key tail (masked)
    acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_base, v_base, mask_base, sk_l, sv_l, sm_k, lo, seg1, offs_m, row_ok,
                           qpos, Lk, window, qk_scale, softcap_in, softcap_out, True, CAUSAL, WINDOW, HAS_MASK,
                           MASK_BOOL, SOFTCAP, BLOCK_N, BLOCK_D, HEAD_D, EVEN_D, PRECISION, IDX64)
    acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_base, v_base, mask_base, sk_l, sv_l, sm_k, seg1, seg2, offs_m,
                           row_ok, qpos, Lk, window, qk_scale, softcap_in, softcap_out, False, CAUSAL, WINDOW,
                           HAS_MASK, MASK_BOOL, SOFTCAP, BLOCK_N, BLOCK_D, HEAD_D, EVEN_D, PRECISION, IDX64)
    acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_base, v_base, mask_base, sk_l, sv_l, sm_k, seg2, hi, offs_m, row_ok,
                           qpos, Lk, window, qk_scale, softcap_in, softcap_out, True, CAUSAL, WINDOW, HAS_MASK,
                           MASK_BOOL, SOFTCAP, BLOCK_N, BLOCK_D, HEAD_D, EVEN_D, PRECISION, IDX64)

    seen = l_i > 0.0
    out = acc / tl.where(seen, l_i, 1.0)[:, None]
    row = pid_bh.to(tl.int64) * Lq + offs_m
    tl.store(o_ptr + row[:, None] * HEAD_D + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None] & d_ok[None, :])
    lse = tl.where(seen, (m_i + tl.log2(tl.where(seen, l_i, 1.0))) * 0.6931471805599453, float("-inf"))
    tl.store(lse_ptr + row, lse, mask=row_ok)


def config(dtype: torch.dtype, block_d: int, lq: int, on_cuda: bool) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) of one call."""
    if not on_cuda:
        bm, bn, warps, stages = INTERPRETER_CONFIG
    else:
        bm, bn, warps, stages = GPU_CONFIGS[(dtype != torch.float32, block_d)]
    small = max(16, next_pow2(lq))
    if small < bm:  # a short query chunk: smaller row blocks, fewer warps
        bm = small
        warps = min(warps, 4)
    return bm, bn, warps, stages


def mask_strides(mask: torch.Tensor, shape: tuple) -> tuple[int, int, int, int]:
    """Strides of ``mask`` broadcast to ``shape`` = [B, Hq, Lq, Lk] (0 on broadcast dims)."""
    m = mask
    while m.dim() < 4:
        m = m.unsqueeze(0)
    return tuple(m.expand(shape).stride())


class PrefillPlan:
    """The prefill kernel prepared for one signature of (q, k, v, mask) and options."""

    def __init__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
                 mask: Optional[torch.Tensor], window: int, softcap: float, device_lens: bool = False):
        b, hq, lq, d = q.shape
        hkv, lk = k.shape[1], k.shape[2]
        self.shape, self.dtype, self.device = (b, hq, lq, d), q.dtype, q.device
        block_d = max(16, next_pow2(d))
        on_cuda = q.is_cuda and not env.settings.triton_interpret
        bm, bn, warps, stages = config(q.dtype, block_d, lq, on_cuda)
        self.block = (bm, bn, warps, stages)
        self.mask_bool = mask is not None and mask.dtype == torch.bool
        ms = mask_strides(mask, (b, hq, lq, lk)) if mask is not None else (0, 0, 0, 0)
        self.ints = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *ms, hq, lq, lk, window)
        self.launch = Launch(
            _prefill_kernel, (triton.cdiv(lq, bm), b * hq),
            dict(GQA=hq // hkv, CAUSAL=causal or window > 0, WINDOW=window > 0, HAS_MASK=mask is not None,
                 MASK_BOOL=self.mask_bool, SOFTCAP=softcap > 0, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=block_d,
                 HEAD_D=d, EVEN_D=block_d == d, PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
                 REVERSE=causal or window > 0,
                 IDX64=lk * max(k.stride(2), v.stride(2), 1) >= 2**31 - 2**20, DEVICE_LK=device_lens),
            num_warps=warps, num_stages=stages,
        )

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor],
                 scale: float, softcap: float, kv_lens: Optional[torch.Tensor] = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        b, hq, lq, d = self.shape
        out = empty((b, hq, lq, d), dtype=self.dtype, device=self.device)
        lse = empty((b, hq, lq), dtype=torch.float32, device=self.device)
        if mask is None:
            mask = q
        elif self.mask_bool:
            mask = mask.view(torch.uint8)
        cap_in = scale / softcap if softcap > 0 else 0.0
        self.launch(q, k, v, out, lse, mask, q if kv_lens is None else kv_lens, *self.ints, scale * LOG2E, cap_in,
                    softcap * LOG2E)
        return out, lse
