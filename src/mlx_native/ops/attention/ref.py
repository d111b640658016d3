"""Pure-PyTorch reference of the attention ops: fp32 math (fp64 for fp64 inputs).

The CPU path and the test oracle. It materializes the ``[B, Hq, Lq, Lk]``
scores, so it is meant for tests and small shapes, not for long contexts.
Every function is free of host syncs (no ``.item()``, no data-dependent
Python), so the reference backend also runs inside CUDA-graph capture.

Conventions shared with the kernels:
  * layout ``[B, H, L, D]``; query head ``h`` reads KV head ``h // (Hq // Hkv)``;
  * query row ``i`` of ``Lq`` sits at key position ``Lk - Lq + i`` (bottom-right
    alignment, as MLX and FlashAttention 2);
  * ``causal``: key ``j`` is visible to row ``i`` iff ``j <= Lk - Lq + i``;
  * ``window=W`` (implies causal): iff ``Lk - Lq + i - W < j <= Lk - Lq + i``;
  * ``softcap=c``: ``s = c * tanh(s / c)`` after scaling, before the mask;
  * masks: bool (True = attend) or additive, broadcastable to ``[B, Hq, Lq, Lk]``;
  * a row that sees no key returns zeros and its log-sum-exp is ``-inf``.
"""

from __future__ import annotations

from typing import Optional

import torch

from ..common import compute_dtype
from ..rope import ref as rope_ref


def visible_positions(lq: int, lk: int, causal: bool, window: Optional[int], device,
                      kv_lens: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
    """``[Lq, Lk]`` bool: which keys each query row may see (None: all). With ``kv_lens [B]`` (a device tensor; no
    host sync) ``[B, 1, Lq, Lk]``: sequence ``b`` has keys ``j < kv_lens[b]`` and its rows sit at
    ``kv_lens[b] - Lq + i``."""
    if not causal and window is None and kv_lens is None:
        return None
    n = lk if kv_lens is None else kv_lens.to(torch.int64)[:, None, None, None]
    qpos = torch.arange(lq, device=device)[:, None] + (n - lq)
    kpos = torch.arange(lk, device=device)
    vis = kpos < n
    if causal:
        vis = vis & (kpos <= qpos)
    if window is not None:
        vis = vis & (kpos > qpos - window)
    return vis


def _softmax_av(s: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Row softmax of scores ``s`` (``-inf`` = masked) times ``v``; zeros and lse=-inf for empty rows."""
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    out = (p @ v) / torch.where(l > 0, l, torch.ones_like(l))
    lse = (m + torch.log(l)).squeeze(-1)
    return out, lse


def _scores(q, k, scale: float, softcap: Optional[float]) -> torch.Tensor:
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    return s


def _expand_kv(t: torch.Tensor, hq: int, cd: torch.dtype) -> torch.Tensor:
    return t.to(cd).repeat_interleave(hq // t.shape[1], dim=1)


def flash_attn_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    causal: bool = False,
    mask: Optional[torch.Tensor] = None,
    window: Optional[int] = None,
    softcap: Optional[float] = None,
    kv_lens: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of ``q [B, Hq, Lq, D]`` over ``k, v [B, Hkv, Lk, D]``; with ``kv_lens [B]`` sequence ``b`` has
    only its first ``kv_lens[b]`` keys (k / v a cache; what lies past them, NaN included, is never read into the
    result) and its query rows sit at key positions ``kv_lens[b] - Lq + i``.

    Returns ``(out [B, Hq, Lq, D] in q's dtype, lse [B, Hq, Lq])`` with lse in
    the compute dtype (natural log of the sum of exp of the final scores).
    """
    cd = compute_dtype(q.dtype)
    hq, lq, lk = q.shape[1], q.shape[2], k.shape[2]
    s = _scores(q.to(cd), _expand_kv(k, hq, cd), scale, softcap)
    if mask is not None:
        if mask.dtype == torch.bool:
            s = s.masked_fill(~mask, float("-inf"))
        else:
            s = s + mask.to(cd)
    vis = visible_positions(lq, lk, causal or window is not None, window, q.device, kv_lens)
    if kv_lens is not None:  # past the lengths: 0, not NaN times a zero weight
        v = v.masked_fill(~(torch.arange(lk, device=v.device) < kv_lens[:, None])[:, None, :, None], 0)
    if vis is not None:
        s = s.masked_fill(~vis, float("-inf"))
    out, lse = _softmax_av(s, _expand_kv(v, hq, cd))
    return out.to(q.dtype), lse


def slot_positions(kv_lens: torch.Tensor, capacity: int, ring: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Absolute position held by each cache slot: ``(pos [B, C], valid [B, C])``.

    Linear caches hold position ``s`` in slot ``s`` (valid below ``min(len, C)``);
    ring caches hold the newest position ``p < len`` with ``p % C == s``.
    """
    n = kv_lens.to(torch.int64)[:, None]
    s = torch.arange(capacity, device=kv_lens.device, dtype=torch.int64)[None, :]
    if ring:
        pos = s + capacity * torch.div((n - 1 - s).clamp_min(0), capacity, rounding_mode="floor")
    else:
        pos = s.expand(n.shape[0], capacity)
    return pos, s < n


def flash_attn_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_lens: torch.Tensor,
    scale: float,
    window: Optional[int] = None,
    softcap: Optional[float] = None,
) -> torch.Tensor:
    """Causal attention of ``q [B, Hq, Lq, D]`` (query ``i`` at position ``kv_lens[b] - Lq + i``)
    over the cache ``[B, Hkv, C, D]``; slot ``p % C`` holds position ``p`` when ``window`` is set."""
    cd = compute_dtype(q.dtype)
    hq, lq = q.shape[1], q.shape[2]
    cap = k_cache.shape[2]
    pos, valid = slot_positions(kv_lens, cap, window is not None)
    qpos = kv_lens.to(torch.int64)[:, None] - lq + torch.arange(lq, device=q.device)[None, :]  # [B, Lq]
    vis = valid[:, None, :] & (pos[:, None, :] <= qpos[:, :, None])  # [B, Lq, C]
    if window is not None:
        vis = vis & (pos[:, None, :] > qpos[:, :, None] - window)
    s = _scores(q.to(cd), _expand_kv(k_cache, hq, cd), scale, softcap)
    s = s.masked_fill(~vis[:, None], float("-inf"))
    out, _ = _softmax_av(s, _expand_kv(v_cache, hq, cd))
    return out.to(q.dtype)


def kv_cache_write(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    lens: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    n_new: Optional[torch.Tensor],
    ring: bool,
) -> None:
    """Write token ``i < n_new[b]`` of ``k_new/v_new [B, Hkv, L, D]`` at position ``lens[b] + i``
    (slot ``pos % C`` for a ring, dropped past ``C`` for a linear cache). ``lens`` is only read."""
    cap, l_new = k_cache.shape[2], k_new.shape[2]
    n = lens.to(torch.int64)[:, None]
    count = (torch.full_like(n, l_new) if n_new is None else n_new.to(torch.int64)[:, None])
    s = torch.arange(cap, device=lens.device, dtype=torch.int64)[None, :]
    if ring:
        t = torch.remainder(s - n, cap)  # first new token that lands in slot s
        last = t + cap * torch.div((count - 1 - t).clamp_min(0), cap, rounding_mode="floor")
        src, ok = last, t < count
    else:
        src = s - n
        ok = (src >= 0) & (src < count)
    idx = torch.where(ok, src, torch.zeros_like(src)).clamp(max=max(l_new - 1, 0))  # [B, C]
    sel = ok[:, None, :, None]
    for cache, new in ((k_cache, k_new), (v_cache, v_new)):
        if l_new == 0:
            continue
        gathered = torch.gather(new, 2, idx[:, None, :, None].expand(-1, new.shape[1], -1, new.shape[3]))
        cache.copy_(torch.where(sel, gathered.to(cache.dtype), cache))


def flash_attn_decode_append(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_lens: torch.Tensor,
    k_new: Optional[torch.Tensor],
    v_new: Optional[torch.Tensor],
    scale: float,
    window: Optional[int] = None,
    softcap: Optional[float] = None,
    rope: Optional[tuple] = None,
) -> torch.Tensor:
    """``flash_attn_decode`` with its inputs prepared in the same call, as the kernel does it in one launch.

    ``rope``: None or ``(dims, traditional, base, scale, freqs)``: q (and ``k_new``) are rotated first, query /
    new token ``i`` at position ``kv_lens[b] + i`` (or ``kv_lens[b] - Lq + i`` without ``k_new``). With ``k_new``,
    ``kv_lens`` counts the cached tokens before the call: ``k_new, v_new [B, Hkv, Lq, D]`` are written at
    ``kv_lens[b] + i`` (slot ``pos % C`` when ``window`` is set), then q attends over ``kv_lens + Lq`` tokens.
    The caches are written in place; ``kv_lens`` is only read.
    """
    lq = q.shape[2]
    lens = kv_lens if k_new is None else kv_lens + lq
    if rope is not None:
        dims, traditional, base, rscale, freqs = rope
        pos = lens.to(torch.int64)[:, None, None] - lq + torch.arange(lq, device=q.device)[None, None, :]
        q = rope_ref.rope(q, dims, traditional, base, rscale, freqs=freqs, positions=pos)
        if k_new is not None:
            k_new = rope_ref.rope(k_new, dims, traditional, base, rscale, freqs=freqs, positions=pos)
    if k_new is not None:
        kv_cache_write(k_cache, v_cache, kv_lens, k_new, v_new, None, window is not None)
    return flash_attn_decode(q, k_cache, v_cache, lens, scale, window, softcap)
