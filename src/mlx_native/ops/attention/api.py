"""Public attention ops: ``flash_attn_prefill``, ``flash_attn_decode``,
``scaled_dot_product_attention`` (MLX front door) and ``kv_cache_write``.

Layout everywhere: ``[B, H, L, D]`` (torch / MLX SDPA order), any strides with
a unit-stride last dim. Query head ``h`` reads KV head ``h // (Hq // Hkv)``
(GQA / MQA). Query row ``i`` of ``Lq`` sits at key position ``Lk - Lq + i``
(bottom-right alignment, as MLX and FlashAttention 2); in decode, ``Lk`` is the
sequence's ``kv_lens[b]``.

No ``from __future__ import annotations``: torch.library reads the annotations.
"""

import math
from typing import Optional, Union

import torch

from ...errors import InvalidArgumentError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty
from ...runtime.plans import EMPTY, PlanCache, tensor_key
from ..rope.api import RopeSpec, check_rope_spec
from . import ref
from .decode import DecodePlan
from .stream import StreamPlan, use_stream
from .prefill import PrefillPlan
from .write import WritePlan

MAX_HEAD_DIM = 512
DECODE_ROUTE_MAX_Q = 8  # scaled_dot_product_attention sends Lq <= this (no array mask) to the decode kernel


# --------------------------------------------------------------------------- validation

def _check_4d(op: str, name: str, t: torch.Tensor) -> None:
    if t.dim() != 4:
        raise InvalidArgumentError(f"{op}: {name} must be 4-D [B, H, L, D], got shape {tuple(t.shape)}")


def _check_head_dim(op: str, d: int) -> None:
    if d <= 0 or d > MAX_HEAD_DIM or d % 8:
        raise InvalidArgumentError(
            f"{op}: head dim {d} is not supported; it must be a multiple of 8 between 8 and {MAX_HEAD_DIM}"
        )


def _check_attn_tensors(op: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kname: str, vname: str,
                        len_what: str) -> None:
    """q [B, Hq, Lq, D], k/v [B, Hkv, Lk, D]: dtypes, devices, shapes, GQA ratio, head dim."""
    for name, t in (("q", q), (kname, k), (vname, v)):
        checks.check_tensor(op, name, t)
        _check_4d(op, name, t)
    checks.check_same_device(op, "q", q, **{kname: k, vname: v})
    checks.check_same_dtype(op, "q", q, **{kname: k, vname: v})
    for name, t in (("q", q), (kname, k), (vname, v)):
        checks.check_last_dim_contiguous(op, name, t)
    d = q.shape[-1]
    for name, t in ((kname, k), (vname, v)):
        if t.shape[-1] != d:
            raise InvalidArgumentError(f"{op}: {name} has head dim {t.shape[-1]} but q has {d}")
        if t.shape[0] != q.shape[0]:
            raise InvalidArgumentError(f"{op}: {name} has batch {t.shape[0]} but q has {q.shape[0]}")
    _check_head_dim(op, d)
    if v.shape[1] != k.shape[1]:
        raise InvalidArgumentError(f"{op}: {vname} has {v.shape[1]} heads but {kname} has {k.shape[1]}")
    if v.shape[2] != k.shape[2]:
        raise InvalidArgumentError(f"{op}: {vname} has {len_what} {v.shape[2]} but {kname} has {k.shape[2]}")
    hq, hkv = q.shape[1], k.shape[1]
    if hkv == 0 or hq % hkv:
        raise InvalidArgumentError(f"{op}: {kname} has {hkv} heads, which does not divide q's {hq} heads")


def _check_options(op: str, scale: float, window: int, softcap: float) -> None:
    checks.check_finite_float(op, "scale", scale)
    checks.check_positive(op, "scale", scale)
    if window < 0:  # 0 encodes None; the public functions reject window <= 0 themselves
        raise InvalidArgumentError(f"{op}: window must be a positive int, got {window}")
    checks.check_finite_float(op, "softcap", softcap)
    if softcap < 0:
        raise InvalidArgumentError(f"{op}: softcap must be > 0, got {softcap}")


def _window_arg(op: str, window: Optional[int]) -> int:
    """Public ``window`` (None or int > 0) to the registered ops' int (0 = no window)."""
    if window is None:
        return 0
    if isinstance(window, bool) or not isinstance(window, int):
        raise InvalidArgumentError(f"{op}: window must be an int or None, got {type(window).__name__}")
    if window <= 0:
        raise InvalidArgumentError(f"{op}: window must be > 0, got {window}")
    if window >= 1 << 31:
        raise InvalidArgumentError(f"{op}: window {window} is outside the int32 range")
    return window


def _softcap_arg(op: str, softcap: Optional[float]) -> float:
    if softcap is None:
        return 0.0
    checks.check_finite_float(op, "softcap", softcap)
    checks.check_positive(op, "softcap", softcap)
    return float(softcap)


def _scale_arg(op: str, scale: Optional[float], d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d) if d > 0 else 1.0
    checks.check_finite_float(op, "scale", scale)
    checks.check_positive(op, "scale", scale)
    return float(scale)


def _check_mask(op: str, q: torch.Tensor, mask: torch.Tensor, target: tuple) -> None:
    checks.check_tensor(op, "mask", mask, dtypes=checks.FLOAT_DTYPES + (torch.bool,), min_ndim=0)
    checks.check_same_device(op, "q", q, mask=mask)
    if mask.dim() > 4:
        raise InvalidArgumentError(f"{op}: mask must have at most 4 dims, got shape {tuple(mask.shape)}")
    try:
        ok = torch.broadcast_shapes(tuple(mask.shape), target) == target
    except RuntimeError:
        ok = False
    if not ok:
        raise InvalidArgumentError(
            f"{op}: mask of shape {tuple(mask.shape)} does not broadcast to [B, Hq, Lq, Lk] = {list(target)}"
        )


def _validate_prefill(q, k, v, scale, causal, mask, window, softcap, kv_lens) -> None:
    op = "flash_attn_prefill"
    _check_attn_tensors(op, q, k, v, "k", "v", "length")
    _check_options(op, scale, window, softcap)
    if mask is not None:
        _check_mask(op, q, mask, (q.shape[0], q.shape[1], q.shape[2], k.shape[2]))
    if kv_lens is not None:
        if mask is not None:
            raise InvalidArgumentError(f"{op}: mask and kv_lens together are not supported (a mask's key axis "
                                       f"would have to follow each sequence's length)")
        _check_lens(op, "kv_lens", kv_lens, q, q.shape[0])  # its values: per call (_flash_attn_prefill)


def _check_lens(op: str, name: str, lens: torch.Tensor, q_like: torch.Tensor, batch: int) -> None:
    checks.check_tensor(op, name, lens, dtypes=checks.INT_DTYPES)
    checks.check_same_device(op, "q" if op != "kv_cache_write" else "k_cache", q_like, **{name: lens})
    checks.check_vector(op, name, lens, batch, "one length per sequence of the batch")


def _validate_decode(q, k_cache, v_cache, kv_lens, scale, window, softcap) -> None:
    op = "flash_attn_decode"
    _check_attn_tensors(op, q, k_cache, v_cache, "k_cache", "v_cache", "capacity")
    _check_lens(op, "kv_lens", kv_lens, q, q.shape[0])
    _check_options(op, scale, window, softcap)
    if q.shape[2] == 0:
        raise InvalidArgumentError(f"{op}: q has no query tokens (shape {tuple(q.shape)})")


def _check_lens_values(op: str, name: str, lens: torch.Tensor, lo: int, hi: Optional[int], what: str) -> None:
    """Value check of a length vector, done only where it costs no device sync (CPU tensors).

    On CUDA the kernels clamp instead (a check would need a host sync)."""
    if lens.device.type != "cpu" or lens.numel() == 0 or torch.compiler.is_compiling():
        return
    bad = (lens < lo) if hi is None else (lens < lo) | (lens > hi)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise InvalidArgumentError(f"{op}: {name}[{i}] = {int(lens[i])} is out of range; {what}")


def _check_decode_lens(kv_lens: torch.Tensor, cap: int, window: int, appended: int) -> None:
    """``flash_attn_decode``'s kv_lens values (CPU tensors): >= 0, and for a linear cache room for the
    ``appended`` new tokens (``kv_lens <= capacity`` when nothing is appended)."""
    if window:
        _check_lens_values("flash_attn_decode", "kv_lens", kv_lens, 0, None, "expected kv_lens >= 0")
    elif appended:
        _check_lens_values("flash_attn_decode", "kv_lens", kv_lens, 0, cap - appended,
                           f"cache too small: kv_lens + {appended} new tokens must fit in capacity {cap}")
    else:
        _check_lens_values("flash_attn_decode", "kv_lens", kv_lens, 0, cap, f"expected 0 <= kv_lens <= capacity {cap}")


# --------------------------------------------------------------------------- flash_attn_prefill

def _build_prefill(q, k, v, scale, causal, mask, window, softcap, kv_lens):
    _validate_prefill(q, k, v, scale, causal, mask, window, softcap, kv_lens)
    if q.numel() == 0:
        return EMPTY
    return PrefillPlan(q, k, v, causal=causal, mask=mask, window=window, softcap=softcap,
                       device_lens=kv_lens is not None)


_PREFILL_PLANS = PlanCache(_build_prefill)


def _fake_prefill(q, k, v, scale, causal, mask, window, softcap, kv_lens):
    _validate_prefill(q, k, v, scale, causal, mask, window, softcap, kv_lens)
    b, h, lq, d = q.shape
    return (torch.empty((b, h, lq, d), dtype=q.dtype, device=q.device),
            torch.empty((b, h, lq), dtype=torch.float32, device=q.device))


@register_op("flash_attn_prefill", fake=_fake_prefill)
def _flash_attn_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool,
                        mask: Optional[torch.Tensor], window: int, softcap: float,
                        kv_lens: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    key = (tensor_key(q), tensor_key(k), tensor_key(v), tensor_key(mask), scale, causal, window, softcap,
           tensor_key(kv_lens))
    plan = _PREFILL_PLANS.get(key, q, k, v, scale, causal, mask, window, softcap, kv_lens)
    if kv_lens is not None:  # values may change between calls of one plan
        _check_lens_values("flash_attn_prefill", "kv_lens", kv_lens, 0, k.shape[2],
                           f"expected 0 <= kv_lens <= Lk = {k.shape[2]} (the keys k / v hold)")
    if plan is EMPTY:
        b, h, lq, d = q.shape
        return (empty((b, h, lq, d), dtype=q.dtype, device=q.device),
                empty((b, h, lq), dtype=torch.float32, device=q.device))
    if use_triton("flash_attn_prefill", q):
        return plan(q, k, v, mask, scale, softcap, kv_lens)
    out, lse = ref.flash_attn_prefill(q, k, v, scale, causal, mask, window or None, softcap or None, kv_lens)
    return out, lse.float()


def flash_attn_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: Optional[float] = None,
    causal: bool = False,
    mask: Optional[torch.Tensor] = None,
    window: Optional[int] = None,
    softcap: Optional[float] = None,
    return_lse: bool = False,
    kv_lens: Optional[torch.Tensor] = None,
) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Tiled (flash) attention over a whole query chunk, fp32 softmax and accumulation.

    ``out = softmax(mask(softcap(q @ k^T * scale))) @ v`` per head, without
    materializing the scores. Tiles that no query of a block can see (causal,
    window, or an all-masked tile of ``mask``) are skipped, not computed.

    Args:
        q: ``[B, Hq, Lq, D]`` float16/bfloat16 (float32: a slower kernel with
            IEEE fp32 dots); any strides with a unit-stride last dim.
        k, v: ``[B, Hkv, Lk, D]``, same dtype and device as q; ``Hq % Hkv == 0``
            (GQA / MQA). ``Lk >= Lq`` when the chunk continues a cached prefix.
            ``D``: a multiple of 8 up to 512 (64, 80, 96, 128, 192, 256, 512 ...).
        scale: multiplies ``q @ k^T``; must be > 0; default ``1 / sqrt(D)``.
        causal: bottom-right aligned causal mask: row ``i`` sees keys
            ``j <= Lk - Lq + i``.
        mask: additive float mask (any float dtype; ``-inf`` = masked) or bool
            mask (True = attend), broadcastable to ``[B, Hq, Lq, Lk]`` (e.g.
            ``[Lq, Lk]``). Applied after softcap; combines with causal/window.
        window: sliding window (Mistral, Gemma): row ``i`` sees the ``window``
            most recent positions, itself included:
            ``Lk - Lq + i - window < j <= Lk - Lq + i``. Implies causal.
        softcap: logit soft-capping (Gemma 2): ``s = softcap * tanh(s / softcap)``
            after scaling.
        return_lse: also return the log-sum-exp of each row's final scores.
        kv_lens: ``[B]`` int32/int64 on q's device, or None (every sequence has
            ``Lk`` keys): sequence ``b`` has ``kv_lens[b]`` keys, k / v being a
            cache of capacity ``Lk`` (past them nothing is read into the
            result), and its rows sit at key positions ``kv_lens[b] - Lq + i``
            (causal / window follow them). The lengths are read on the device,
            so a chunk continuing a cache (``kv_lens`` = cached + Lq) needs no
            host value and can be captured in a CUDA graph. Not with ``mask``.

    Returns:
        ``out [B, Hq, Lq, D]`` contiguous in q's dtype, or ``(out, lse)`` with
        ``lse [B, Hq, Lq]`` float32 (natural log). A row that sees no key gets
        zeros (never NaN) and ``lse = -inf``.

    Raises:
        InvalidArgumentError: shapes, head dim, GQA ratio, mask shape, window,
            softcap, scale or kv_lens out of range (kv_lens values checked
            only on the CPU), kv_lens with mask. UnsupportedDTypeError: dtypes
            (including q/k/v mismatches). DeviceMismatchError.

    Example:
        >>> out = mn.flash_attn_prefill(q, k, v, causal=True)              # [B, 32, L, 128]
        >>> out = mn.flash_attn_prefill(q, k, v, window=4096, softcap=50.0)  # Gemma 2 local layer
        >>> out = mn.flash_attn_prefill(q, cache.k, cache.v, causal=True, kv_lens=cache.lens + q.shape[2])
    """
    op = "flash_attn_prefill"
    w = _window_arg(op, window)
    cap = _softcap_arg(op, softcap)
    d = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() > 0 else 0
    out, lse = _flash_attn_prefill(q, k, v, _scale_arg(op, scale, d), bool(causal), mask, w, cap, kv_lens)
    return (out, lse) if return_lse else out


# --------------------------------------------------------------------------- flash_attn_decode

def _build_decode(q, k_cache, v_cache, kv_lens, scale, window, softcap):
    _validate_decode(q, k_cache, v_cache, kv_lens, scale, window, softcap)
    if q.numel() == 0:
        return EMPTY
    plan = StreamPlan if use_stream(q, k_cache, window) else DecodePlan
    return plan(q, k_cache, v_cache, kv_lens, window=window, softcap=softcap)


_DECODE_PLANS = PlanCache(_build_decode)


def _fake_decode(q, k_cache, v_cache, kv_lens, scale, window, softcap):
    _validate_decode(q, k_cache, v_cache, kv_lens, scale, window, softcap)
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


@register_op("flash_attn_decode", fake=_fake_decode)
def _flash_attn_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_lens: torch.Tensor,
                       scale: float, window: int, softcap: float) -> torch.Tensor:
    key = (tensor_key(q), tensor_key(k_cache), tensor_key(v_cache), tensor_key(kv_lens), scale, window, softcap)
    plan = _DECODE_PLANS.get(key, q, k_cache, v_cache, kv_lens, scale, window, softcap)
    _check_decode_lens(kv_lens, k_cache.shape[2], window, 0)
    if plan is EMPTY:
        return empty(q.shape, dtype=q.dtype, device=q.device)
    if use_triton("flash_attn_decode", q):
        return plan(q, k_cache, v_cache, kv_lens, scale, softcap)
    return ref.flash_attn_decode(q, k_cache, v_cache, kv_lens, scale, window or None, softcap or None)


def flash_attn_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_lens: torch.Tensor,
    *,
    scale: Optional[float] = None,
    window: Optional[int] = None,
    softcap: Optional[float] = None,
    k_new: Optional[torch.Tensor] = None,
    v_new: Optional[torch.Tensor] = None,
    rope: Optional[RopeSpec] = None,
) -> torch.Tensor:
    """Attention of a few new query tokens per sequence against a KV cache (split-KV, GQA-packed).

    Causal by construction: query token ``i`` of ``Lq`` sits at position
    ``kv_lens[b] - Lq + i`` and sees cached positions up to its own. The KV
    range is split across thread blocks (split count from the SM count and the
    static shapes, never from ``kv_lens`` values), and the last split program
    of each head group to finish merges the partial results in the same launch
    (``kernels/arrival.py``): no autotune, no host sync, CUDA-graph capturable.

    Args:
        q: ``[B, Hq, Lq, D]`` (Lq small: 1 for plain decode, a few for
            speculative decoding), float16/bfloat16/float32.
        k_cache, v_cache: ``[B, Hkv, capacity, D]``, same dtype/device as q,
            ``Hq % Hkv == 0``; all query heads of one KV head are handled by
            one program.
        kv_lens: int32 (or int64) ``[B]`` on q's device: tokens written so far
            per sequence, the current query tokens included. Linear caches
            (``window=None``): ``kv_lens <= capacity`` (larger values are
            clamped to the capacity on CUDA and rejected for CPU tensors).
        scale: > 0, default ``1 / sqrt(D)``.
        window: sliding window (see :func:`flash_attn_prefill`). The cache may
            then be a ring buffer: position ``p`` lives in slot
            ``p % capacity``; ``capacity >= window + Lq - 1`` keeps every
            visible position (older slots are treated as overwritten).
        softcap: Gemma 2 logit soft-capping.
        k_new, v_new: ``[B, Hkv, Lq, D]``, the K/V rows of the query tokens, appended in the same launch
            (as FlashAttention's ``flash_attn_with_kvcache(k=, v=)``): ``kv_lens`` then counts the tokens
            cached *before* the call, token ``i`` is written at position ``kv_lens[b] + i`` (slot ``% capacity``
            with a window; past the capacity of a linear cache it is dropped, and CPU tensors reject it) and
            the queries attend over ``kv_lens[b] + Lq`` tokens. ``kv_lens`` is not advanced.
        rope: an :class:`mn.RopeSpec`: q (and ``k_new``) are rotated in the kernel first, as :func:`mn.rope`
            would with positions ``kv_lens[b] + i`` (``kv_lens[b] - Lq + i`` without ``k_new``). Together
            with ``k_new`` this is the whole decode-step attention of a Llama layer in one launch: RoPE, the
            cache write and the attention.

    Returns:
        ``[B, Hq, Lq, D]`` contiguous in q's dtype; rows that see no position
        (``kv_lens[b] == 0``) are zeros.

    Raises:
        InvalidArgumentError, UnsupportedDTypeError, DeviceMismatchError.

    Example:
        >>> out = mn.flash_attn_decode(q, cache.k, cache.v, cache.lens)   # q: [B, 32, 1, 128]
        >>> out = mn.flash_attn_decode(q, cache.k, cache.v, cache.lens, k_new=k, v_new=v,
        ...                            rope=mn.RopeSpec(128, base=500000.0))   # then cache.lens += 1
    """
    op = "flash_attn_decode"
    w = _window_arg(op, window)
    cap = _softcap_arg(op, softcap)
    d = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() > 0 else 0
    if k_new is None and v_new is None and rope is None:
        return _flash_attn_decode(q, k_cache, v_cache, kv_lens, _scale_arg(op, scale, d), w, cap)
    if rope is not None and isinstance(q, torch.Tensor) and q.dim() > 0:
        check_rope_spec(op, q, rope)
    r = rope or RopeSpec(0)
    return _flash_attn_decode_append(q, k_cache, v_cache, kv_lens, k_new, v_new, _scale_arg(op, scale, d), w, cap,
                                     r.dims, bool(r.traditional), float(r.base), float(r.scale), r.freqs)


def _validate_append(q, k_cache, v_cache, kv_lens, k_new, v_new, scale, window, softcap, rope_dims, rope_freqs):
    op = "flash_attn_decode"
    _validate_decode(q, k_cache, v_cache, kv_lens, scale, window, softcap)
    if (k_new is None) != (v_new is None):
        given = "k_new" if v_new is None else "v_new"
        raise InvalidArgumentError(f"{op}: k_new and v_new go together (got only {given})")
    if k_new is not None:
        for name, t in (("k_new", k_new), ("v_new", v_new)):
            checks.check_tensor(op, name, t)
            _check_4d(op, name, t)
            checks.check_last_dim_contiguous(op, name, t)
        checks.check_same_device(op, "q", q, k_new=k_new, v_new=v_new)
        checks.check_same_dtype(op, "q", q, k_new=k_new, v_new=v_new)
        b, hkv, cap, d = k_cache.shape
        want = (b, hkv, q.shape[2], d)
        for name, t in (("k_new", k_new), ("v_new", v_new)):
            if tuple(t.shape) != want:
                raise InvalidArgumentError(f"{op}: {name} has shape {tuple(t.shape)}, expected {list(want)} "
                                           "(one row per query token and KV head)")
        if q.shape[2] > cap:
            raise InvalidArgumentError(f"{op}: cache too small: {q.shape[2]} new tokens do not fit in capacity {cap}")
    if rope_dims:
        check_rope_spec(op, q, RopeSpec(rope_dims, freqs=rope_freqs))


def _build_append(q, k_cache, v_cache, kv_lens, k_new, v_new, scale, window, softcap, rope_dims, rope_traditional,
                  rope_base, rope_freqs):
    _validate_append(q, k_cache, v_cache, kv_lens, k_new, v_new, scale, window, softcap, rope_dims, rope_freqs)
    if q.numel() == 0:
        return EMPTY
    rope = (rope_dims, rope_traditional, rope_base, rope_freqs is not None) if rope_dims else None
    return DecodePlan(q, k_cache, v_cache, kv_lens, window=window, softcap=softcap, k_new=k_new, v_new=v_new,
                      rope=rope)


_APPEND_PLANS = PlanCache(_build_append)


def _fake_append(q, k_cache, v_cache, kv_lens, k_new, v_new, scale, window, softcap, rope_dims, rope_traditional,
                 rope_base, rope_scale, rope_freqs):
    _validate_append(q, k_cache, v_cache, kv_lens, k_new, v_new, scale, window, softcap, rope_dims, rope_freqs)
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


@register_op("flash_attn_decode_append", fake=_fake_append, mutates_args=("k_cache", "v_cache"))
def _flash_attn_decode_append(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_lens: torch.Tensor,
                              k_new: Optional[torch.Tensor], v_new: Optional[torch.Tensor], scale: float, window: int,
                              softcap: float, rope_dims: int, rope_traditional: bool, rope_base: float,
                              rope_scale: float, rope_freqs: Optional[torch.Tensor]) -> torch.Tensor:
    key = (tensor_key(q), tensor_key(k_cache), tensor_key(v_cache), tensor_key(kv_lens), tensor_key(k_new),
           tensor_key(v_new), scale, window, softcap, rope_dims, rope_traditional, rope_base, tensor_key(rope_freqs))
    plan = _APPEND_PLANS.get(key, q, k_cache, v_cache, kv_lens, k_new, v_new, scale, window, softcap, rope_dims,
                             rope_traditional, rope_base, rope_freqs)
    _check_decode_lens(kv_lens, k_cache.shape[2], window, 0 if k_new is None else q.shape[2])
    if plan is EMPTY:
        return empty(q.shape, dtype=q.dtype, device=q.device)
    if use_triton("flash_attn_decode", q):
        return plan(q, k_cache, v_cache, kv_lens, scale, softcap, k_new, v_new, rope_freqs, rope_scale)
    rope = (rope_dims, rope_traditional, rope_base, rope_scale, rope_freqs) if rope_dims else None
    return ref.flash_attn_decode_append(q, k_cache, v_cache, kv_lens, k_new, v_new, scale, window or None,
                                        softcap or None, rope)


# --------------------------------------------------------------------------- scaled_dot_product_attention

def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    mask: Union[None, str, torch.Tensor] = None,
) -> torch.Tensor:
    """MLX ``mx.fast.scaled_dot_product_attention``: ``softmax(q @ k^T * scale + mask) @ v``.

    Args:
        q: ``[B, Hq, Lq, D]``; k, v: ``[B, Hkv, Lk, D]`` (GQA: not pre-tiled).
        scale: multiplies ``q @ k^T`` (required, as in MLX; must be > 0).
        mask: None, ``"causal"`` (lower-right aligned: the last query aligns
            with the last key), or a bool (True = attend) / additive array
            broadcastable to ``[B, Hq, Lq, Lk]``.

    Returns:
        ``[B, Hq, Lq, D]`` in q's dtype.

    Routing: a few queries (``Lq <= 8``) with no array mask (and ``Lq == 1`` or
    ``"causal"``) go to :func:`flash_attn_decode` (split-KV over the keys);
    everything else to :func:`flash_attn_prefill`.

    Example:
        >>> out = mn.scaled_dot_product_attention(q, k, v, scale=q.shape[-1] ** -0.5, mask="causal")
    """
    op = "scaled_dot_product_attention"
    causal = False
    array_mask = None
    if isinstance(mask, str):
        if mask != "causal":
            raise InvalidArgumentError(f"{op}: the only string mask is 'causal', got {mask!r}")
        causal = True
    elif mask is not None:
        array_mask = mask
    if scale is None:
        raise InvalidArgumentError(f"{op}: scale is required (MLX semantics), e.g. q.shape[-1] ** -0.5")
    if (array_mask is None and isinstance(q, torch.Tensor) and q.dim() == 4 and isinstance(k, torch.Tensor)
            and k.dim() == 4 and 1 <= q.shape[2] <= DECODE_ROUTE_MAX_Q and (causal or q.shape[2] == 1)):
        kv_lens = torch.full((q.shape[0],), k.shape[2], dtype=torch.int32, device=q.device)
        return flash_attn_decode(q, k, v, kv_lens, scale=scale)
    return flash_attn_prefill(q, k, v, scale=scale, causal=causal, mask=array_mask)


# --------------------------------------------------------------------------- kv_cache_write

def _validate_write(k_cache, v_cache, lens, k_new, v_new, n_new, ring) -> None:
    op = "kv_cache_write"
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("k_new", k_new), ("v_new", v_new)):
        checks.check_tensor(op, name, t)
        _check_4d(op, name, t)
    checks.check_same_device(op, "k_cache", k_cache, v_cache=v_cache, k_new=k_new, v_new=v_new)
    checks.check_same_dtype(op, "k_cache", k_cache, v_cache=v_cache, k_new=k_new, v_new=v_new)
    checks.check_same_shape(op, "k_cache", k_cache, v_cache=v_cache)
    checks.check_same_shape(op, "k_new", k_new, v_new=v_new)
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("k_new", k_new), ("v_new", v_new)):
        checks.check_last_dim_contiguous(op, name, t)
    b, h, cap, d = k_cache.shape
    if (k_new.shape[0], k_new.shape[1], k_new.shape[3]) != (b, h, d):
        raise InvalidArgumentError(
            f"{op}: k_new has shape {tuple(k_new.shape)}, expected [{b}, {h}, L_new, {d}] to match the cache"
        )
    _check_lens(op, "lens", lens, k_cache, b)
    if n_new is not None:
        _check_lens(op, "n_new", n_new, k_cache, b)
    l_new = k_new.shape[2]
    if l_new > cap and (not ring or n_new is not None):
        what = "a linear cache" if not ring else "a ring cache written with n_new"
        raise InvalidArgumentError(
            f"{op}: cache too small: {l_new} new tokens do not fit in {what} of capacity {cap}"
        )


def _build_write(k_cache, v_cache, lens, k_new, v_new, n_new, ring):
    _validate_write(k_cache, v_cache, lens, k_new, v_new, n_new, ring)
    if k_new.numel() == 0 or k_cache.numel() == 0:
        return EMPTY
    return WritePlan(k_cache, v_cache, lens, k_new, v_new, n_new, ring)


_WRITE_PLANS = PlanCache(_build_write)


def _fake_write(k_cache, v_cache, lens, k_new, v_new, n_new, ring, advance):
    _validate_write(k_cache, v_cache, lens, k_new, v_new, n_new, ring)


@register_op("kv_cache_write", fake=_fake_write, mutates_args=("k_cache", "v_cache", "lens"))
def _kv_cache_write(k_cache: torch.Tensor, v_cache: torch.Tensor, lens: torch.Tensor, k_new: torch.Tensor,
                    v_new: torch.Tensor, n_new: Optional[torch.Tensor], ring: bool, advance: bool) -> None:
    key = (tensor_key(k_cache), tensor_key(v_cache), tensor_key(lens), tensor_key(k_new), tensor_key(v_new),
           tensor_key(n_new), ring)
    plan = _WRITE_PLANS.get(key, k_cache, v_cache, lens, k_new, v_new, n_new, ring)
    cap, l_new = k_cache.shape[2], k_new.shape[2]
    if not ring and lens.device.type == "cpu":
        _check_lens_values("kv_cache_write", "lens", lens + (l_new if n_new is None else n_new), 0, cap,
                           f"cache too small: lens + new tokens must fit in capacity {cap}")
    _check_lens_values("kv_cache_write", "lens", lens, 0, None, "expected lens >= 0")
    if n_new is not None:
        _check_lens_values("kv_cache_write", "n_new", n_new, 0, l_new, f"expected 0 <= n_new <= {l_new}")
    if plan is not EMPTY:
        if use_triton("kv_cache_write", k_cache):
            plan(k_cache, v_cache, lens, k_new, v_new, n_new)
        else:
            ref.kv_cache_write(k_cache, v_cache, lens, k_new, v_new, n_new, ring)
    if advance:
        lens.add_(n_new.to(lens.dtype) if n_new is not None else l_new)


def kv_cache_write(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    lens: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    *,
    ring: bool = False,
    n_new: Optional[torch.Tensor] = None,
    advance: bool = True,
) -> None:
    """Append new K/V tokens to a static cache, in place, without host sync (CUDA-graph safe).

    Token ``i`` of sequence ``b`` goes to position ``lens[b] + i``: slot
    ``lens[b] + i`` of a linear cache, slot ``(lens[b] + i) % capacity`` of a
    ring cache. Then ``lens += n_new`` (or ``+= L_new``) unless ``advance`` is
    False (several layers sharing one ``lens`` advance it once).

    Args:
        k_cache, v_cache: ``[B, Hkv, capacity, D]`` (written in place).
        lens: int32/int64 ``[B]`` on the cache's device: tokens already written.
        k_new, v_new: ``[B, Hkv, L_new, D]``, the cache's dtype; any strides
            with a unit-stride last dim.
        ring: the cache is a ring buffer (sliding-window layers). Writing more
            than ``capacity`` tokens at once keeps the last ``capacity``.
        n_new: optional int ``[B]``: only the first ``n_new[b] <= L_new`` tokens
            of sequence ``b`` are written (ragged batches padded on the right).
        advance: add the written counts to ``lens``.

    Raises:
        InvalidArgumentError: shapes; ``L_new > capacity`` for a linear cache
            ("cache too small"); for CPU tensors also ``lens + L_new >
            capacity`` (on CUDA that check would need a host sync: positions
            past the capacity are dropped, never written out of bounds).
        UnsupportedDTypeError: new K/V dtype differs from the cache's.

    Example:
        >>> mn.kv_cache_write(cache.k, cache.v, cache.lens, k_step, v_step)   # k_step: [B, 8, 1, 128]
    """
    _kv_cache_write(k_cache, v_cache, lens, k_new, v_new, n_new, bool(ring), bool(advance))
