"""In-place KV-cache write kernel (``kv_cache_write``).

One program copies ``BLOCK_T`` new tokens of one (batch, KV head) into the
cache slots given by the device-side lengths: slot ``lens[b] + i`` (linear)
or ``(lens[b] + i) % C`` (ring). No host sync; positions a linear cache
cannot hold are dropped, never written out of bounds; a ring keeps the last
``C`` of the tokens written.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ...kernels.launch import Launch
from ..common import next_pow2

TILE_ELEMS = 4096


@triton.jit
def _write_kernel(
    kc_ptr,  # [B, Hkv, C, D] key cache (strides kc_*)
    vc_ptr,  # [B, Hkv, C, D] value cache (strides vc_*)
    lens_ptr,  # [B] int32/int64 tokens already in the cache
    kn_ptr,  # [B, Hkv, L, D] new keys (strides kn_*)
    vn_ptr,  # [B, Hkv, L, D] new values (strides vn_*)
    nn_ptr,  # [B] int tokens to write per sequence (HAS_N)
    kc_b, kc_h, kc_s,
    vc_b, vc_h, vc_s,
    kn_b, kn_h, kn_l,
    vn_b, vn_h, vn_l,
    Hkv, L, C,
    HAS_N: tl.constexpr,
    RING: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
):
    pid_t = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // Hkv
    h = pid_bh % Hkv
    i = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, BLOCK_D)
    n0 = tl.maximum(tl.load(lens_ptr + b).to(tl.int32), 0)
    cnt = L
    if HAS_N:
        cnt = tl.minimum(tl.load(nn_ptr + b).to(tl.int32), L)
    pos = n0 + i
    ok = i < cnt
    if RING:
        ok = ok & (i >= cnt - C)
        slot = pos % C
    else:
        ok = ok & (pos < C)
        slot = pos
    m = ok[:, None] & (offs_d < HEAD_D)[None, :]
    slot = slot.to(tl.int64)
    src = i.to(tl.int64)
    bb = b.to(tl.int64)
    hh = h.to(tl.int64)
    kv = tl.load(kn_ptr + bb * kn_b + hh * kn_h + src[:, None] * kn_l + offs_d[None, :], mask=m)
    tl.store(kc_ptr + bb * kc_b + hh * kc_h + slot[:, None] * kc_s + offs_d[None, :], kv, mask=m)
    vv = tl.load(vn_ptr + bb * vn_b + hh * vn_h + src[:, None] * vn_l + offs_d[None, :], mask=m)
    tl.store(vc_ptr + bb * vc_b + hh * vc_h + slot[:, None] * vc_s + offs_d[None, :], vv, mask=m)


class WritePlan:
    """The write kernel prepared for one signature of (caches, lens, new K/V, n_new)."""

    def __init__(self, k_cache: torch.Tensor, v_cache: torch.Tensor, lens: torch.Tensor, k_new: torch.Tensor,
                 v_new: torch.Tensor, n_new: Optional[torch.Tensor], ring: bool):
        b, hkv, cap, d = k_cache.shape
        l_new = k_new.shape[2]
        block_d = next_pow2(d)
        block_t = max(1, min(next_pow2(l_new), TILE_ELEMS // block_d))
        self.ints = (*k_cache.stride()[:3], *v_cache.stride()[:3], *k_new.stride()[:3], *v_new.stride()[:3],
                     hkv, l_new, cap)
        self.launch = Launch(
            _write_kernel, (triton.cdiv(l_new, block_t), b * hkv),
            dict(HAS_N=n_new is not None, RING=ring, BLOCK_T=block_t, BLOCK_D=block_d, HEAD_D=d),
            num_warps=4 if block_t * block_d >= 2048 else 2,
        )

    def __call__(self, k_cache, v_cache, lens, k_new, v_new, n_new) -> None:
        self.launch(k_cache, v_cache, lens, k_new, v_new, n_new if n_new is not None else lens, *self.ints)
