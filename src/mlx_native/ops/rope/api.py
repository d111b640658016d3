"""Public rotary-embedding ops: ``rope``, ``rope_multi``, ``head_norm_rope``.

Conventions:
  * ``rope`` follows MLX ``mx.fast.rope``: x is ``[..., L, D]`` and row l of the
    L axis sits at position ``offset + l`` (``offset`` an int, a 1-element
    tensor, or a ``[B]`` tensor of per-batch offsets for dim 0) unless
    ``positions`` (broadcastable to ``x.shape[:-1]``) gives every row's position.
  * ``rope_multi``: ``positions`` is ``[S, ...]``, one stream per section,
    each broadcastable to ``x.shape[:-1]``.
  * ``head_norm_rope``: x is ``[..., H, D]``; ``positions`` broadcast to
    ``x.shape[:-2]`` (the token dims), the same for every head.

No ``from __future__ import annotations``: torch.library reads the annotations.
"""

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import torch
from torch.compiler import is_compiling

from ...errors import InvalidArgumentError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty_like
from ...runtime.plans import EMPTY, PlanCache, tensor_key
from . import ref
from .kernel import RopePlan


@dataclass(frozen=True)
class RopeSpec:
    """The rotary embedding another op applies on the fly (``flash_attn_decode(..., rope=)``), with the
    arguments and semantics of :func:`rope`: ``dims`` rotated columns, NeoX half-split (``traditional=False``)
    or interleaved pairs, angles ``position * scale * base ** (-2i / dims)`` (``freqs``: ``1 / freqs[i]``
    instead of the base powers, as in MLX)."""

    dims: int
    base: float = 10000.0
    traditional: bool = False
    scale: float = 1.0
    freqs: Optional[torch.Tensor] = None


def check_rope_spec(op: str, x: torch.Tensor, spec: RopeSpec) -> None:
    """Validate ``spec`` for rows ``x [..., D]`` (typed errors naming ``op``)."""
    if not isinstance(spec, RopeSpec):
        raise InvalidArgumentError(f"{op}: rope must be an mn.RopeSpec, got {type(spec).__name__}")
    _check_dims(op, x, spec.dims)
    checks.check_finite_float(op, "rope.scale", spec.scale)
    if spec.freqs is None:
        checks.check_finite_float(op, "rope.base", spec.base)
        checks.check_positive(op, "rope.base", spec.base)
    else:
        checks.check_tensor(op, "rope.freqs", spec.freqs)
        checks.check_same_device(op, "q", x, **{"rope.freqs": spec.freqs})
        checks.check_vector(op, "rope.freqs", spec.freqs, spec.dims // 2, "dims / 2")


_INT32 = 1 << 31


def _check_dims(op: str, x: torch.Tensor, dims: int) -> None:
    if isinstance(dims, bool) or not isinstance(dims, int):
        raise InvalidArgumentError(f"{op}: dims must be an int, got {type(dims).__name__}")
    if dims <= 0 or dims % 2:
        raise InvalidArgumentError(f"{op}: dims must be a positive even number, got {dims}")
    if dims > x.shape[-1]:
        raise InvalidArgumentError(f"{op}: dims {dims} is larger than the last dim of x ({x.shape[-1]})")


def _check_common(op: str, x: torch.Tensor, dims: int, base: float, scale: float,
                  freqs: Optional[torch.Tensor]) -> None:
    checks.check_tensor(op, "x", x)
    checks.check_last_dim_contiguous(op, "x", x)
    _check_dims(op, x, dims)
    checks.check_finite_float(op, "scale", scale)
    if freqs is None:
        checks.check_finite_float(op, "base", base)
        checks.check_positive(op, "base", base)
    else:
        checks.check_tensor(op, "freqs", freqs)
        checks.check_same_device(op, "x", x, freqs=freqs)
        checks.check_vector(op, "freqs", freqs, dims // 2, "dims / 2")


def _check_positions(op: str, x: torch.Tensor, positions: torch.Tensor, shape: Sequence[int], what: str) -> None:
    checks.check_tensor(op, "positions", positions, dtypes=checks.INT_DTYPES)
    checks.check_same_device(op, "x", x, positions=positions)
    try:
        broadcast = torch.broadcast_shapes(positions.shape, tuple(shape))
    except RuntimeError:
        broadcast = None
    if broadcast != tuple(shape):
        raise InvalidArgumentError(
            f"{op}: positions of shape {tuple(positions.shape)} do not broadcast to {what} {tuple(shape)}"
        )


def _check_sections(op: str, dims: int, sections: Sequence[int], interleaved: bool) -> None:
    if not 1 <= len(sections) <= 4 or any(s < 0 for s in sections):
        raise InvalidArgumentError(f"{op}: sections must be 1 to 4 non-negative ints, got {list(sections)}")
    if sum(sections) != dims // 2:
        raise InvalidArgumentError(
            f"{op}: sections {list(sections)} sum to {sum(sections)}, expected dims / 2 = {dims // 2}"
        )
    if interleaved and len(sections) != 3:
        raise InvalidArgumentError(f"{op}: the interleaved layout takes 3 sections (t, h, w), got {len(sections)}")


# --------------------------------------------------------------------------- rope

def _validate_rope(x, dims, base, scale, offset_tensor, freqs, positions):
    op = "rope"
    _check_common(op, x, dims, base, scale, freqs)
    if positions is not None:
        if offset_tensor is not None:
            raise InvalidArgumentError(f"{op}: pass either offset or positions, not both")
        _check_positions(op, x, positions, x.shape[:-1], "x.shape[:-1]")
    elif x.dim() < 2:
        raise InvalidArgumentError(f"{op}: x must be [..., L, D] (at least 2 dims) unless positions are given, "
                                   f"got shape {tuple(x.shape)}")
    if offset_tensor is not None:
        checks.check_tensor(op, "offset", offset_tensor, dtypes=checks.INT_DTYPES, min_ndim=0)
        checks.check_same_device(op, "x", x, offset=offset_tensor)
        n = offset_tensor.numel()
        if n != 1 and not (offset_tensor.dim() == 1 and n == x.shape[0]):
            raise InvalidArgumentError(
                f"{op}: offset tensor must hold 1 value or one per batch ({x.shape[0]}), got shape "
                f"{tuple(offset_tensor.shape)}"
            )


def _fake_rope(x, dims, traditional, base, scale, offset, offset_tensor, freqs, positions):
    _validate_rope(x, dims, base, scale, offset_tensor, freqs, positions)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _rope_view(x: torch.Tensor, positions: Optional[torch.Tensor]):
    """Maps a call's position tensor (explicit positions or MLX offset tensor) to ``[1, *x.shape[:-1]]``."""
    rows = tuple(x.shape[:-1])
    if positions is not None:
        return lambda p: p.expand(*rows).unsqueeze(0)

    def offsets(o):
        o = o.reshape(-1)
        o = o.reshape(-1, *([1] * (len(rows) - 1))) if o.numel() > 1 else o.reshape(*([1] * len(rows)))
        return o.expand(*rows).unsqueeze(0)

    return offsets


def _build_rope(x, dims, traditional, base, scale, offset_tensor, freqs, positions):
    _validate_rope(x, dims, base, scale, offset_tensor, freqs, positions)
    if x.numel() == 0:
        return EMPTY
    raw = positions if positions is not None else offset_tensor
    return RopePlan(x, dims, _rope_view(x, positions), raw, 0 if positions is not None else x.shape[-2],
                    traditional=traditional, base=base, freqs=freqs, sections=None, interleaved=False)


_ROPE_PLANS = PlanCache(_build_rope)


def _check_offset(op: str, offset: int) -> None:
    if not -_INT32 <= offset < _INT32:
        raise InvalidArgumentError(f"{op}: offset {offset} is outside the int32 range")


@register_op("rope", fake=_fake_rope)
def _rope(x: torch.Tensor, dims: int, traditional: bool, base: float, scale: float, offset: int,
          offset_tensor: Optional[torch.Tensor], freqs: Optional[torch.Tensor],
          positions: Optional[torch.Tensor]) -> torch.Tensor:
    try:  # the plan key, inline and flat (runtime/plans.py); a non-tensor argument raises here
        key = (x.shape, x.stride(), x.dtype, x.device, dims, traditional, base, scale,
               None if positions is None else (positions.shape, positions.stride(), positions.dtype,
                                               positions.device),
               None if offset_tensor is None else (offset_tensor.shape, offset_tensor.stride(), offset_tensor.dtype,
                                                   offset_tensor.device),
               None if freqs is None else (freqs.shape, freqs.stride(), freqs.dtype, freqs.device))
        plan = _ROPE_PLANS.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = _ROPE_PLANS.build(key, x, dims, traditional, base, scale, offset_tensor, freqs, positions)
    if not -_INT32 <= offset < _INT32:
        _check_offset("rope", offset)
    if plan is EMPTY:
        return empty_like(x)
    if not use_triton("rope", x):
        return ref.rope(x, dims, traditional, base, scale, offset, offset_tensor, freqs, positions)
    raw = positions if positions is not None else offset_tensor
    return plan(x, raw, offset, scale, freqs)


def rope(
    x: torch.Tensor,
    dims: int,
    *,
    traditional: bool = False,
    base: Optional[float] = 10000.0,
    scale: float = 1.0,
    offset: Union[int, torch.Tensor] = 0,
    freqs: Optional[torch.Tensor] = None,
    positions: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Rotary positional embedding with MLX ``mx.fast.rope`` semantics, fp32 math.

    Args:
        x: ``[..., L, D]`` float32/float16/bfloat16, unit-stride last dim.
        dims: rotated feature dims (even, <= D); dims..D pass through unchanged.
        traditional: False: NeoX/half-split pairs ``(i, i + dims/2)``;
            True: interleaved pairs ``(2i, 2i+1)``.
        base: frequency base, ``inv_freq[i] = base ** (-2i / dims)``; ignored
            (may be None) when ``freqs`` is given.
        scale: positions are multiplied by this.
        offset: position of row 0 of the L axis: an int, a 1-element integer
            tensor, or a ``[B]`` tensor of per-batch offsets (dim 0 of x).
        freqs: ``[dims/2]`` frequencies (MLX: ``inv_freq = 1 / freqs``).
        positions: integer tensor broadcastable to ``x.shape[:-1]``: explicit
            per-row positions instead of ``offset + l``.

    Returns:
        ``[..., L, D]`` contiguous, dtype of ``x``.

    Example:
        >>> q = mn.rope(q, 128, offset=cache_len)          # q: [B, H, L, 128]
        >>> q = mn.rope(q, 64, positions=pos[:, None, :])  # pos: [B, L]
    """
    offset_tensor = offset if isinstance(offset, torch.Tensor) else None
    offset_int = 0 if offset_tensor is not None else int(offset)
    base_f = 10000.0 if base is None else float(base)
    if base is None and freqs is None:
        raise InvalidArgumentError("rope: base is None and no freqs were given; pass one of them")
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _rope.op(x, dims, bool(traditional), base_f, float(scale), offset_int, offset_tensor, freqs, positions)
    return _rope.eager(x, dims, bool(traditional), base_f, float(scale), offset_int, offset_tensor, freqs, positions)


# --------------------------------------------------------------------------- rope_multi

def _validate_rope_multi(x, dims, positions, sections, interleaved, base, scale, freqs):
    op = "rope_multi"
    _check_common(op, x, dims, base, scale, freqs)
    _check_sections(op, dims, sections, interleaved)
    _check_positions(op, x, positions, (len(sections), *x.shape[:-1]), "[len(sections), *x.shape[:-1]]")


def _fake_rope_multi(x, dims, positions, sections, interleaved, traditional, base, scale, freqs):
    _validate_rope_multi(x, dims, positions, sections, interleaved, base, scale, freqs)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _build_rope_multi(x, dims, positions, sections, interleaved, traditional, base, scale, freqs):
    _validate_rope_multi(x, dims, positions, sections, interleaved, base, scale, freqs)
    if x.numel() == 0:
        return EMPTY
    rows, n = tuple(x.shape[:-1]), len(sections)
    return RopePlan(x, dims, lambda p: p.expand(n, *rows), positions, 0, traditional=traditional, base=base,
                    freqs=freqs, sections=sections, interleaved=interleaved)


_ROPE_MULTI_PLANS = PlanCache(_build_rope_multi)


@register_op("rope_multi", fake=_fake_rope_multi)
def _rope_multi(x: torch.Tensor, dims: int, positions: torch.Tensor, sections: list[int], interleaved: bool,
                traditional: bool, base: float, scale: float, freqs: Optional[torch.Tensor]) -> torch.Tensor:
    key = (tensor_key(x), dims, tensor_key(positions), tuple(sections), interleaved, traditional, base, scale,
           tensor_key(freqs))
    plan = _ROPE_MULTI_PLANS.get(key, x, dims, positions, sections, interleaved, traditional, base, scale, freqs)
    if plan is EMPTY:
        return empty_like(x)
    if not use_triton("rope_multi", x):
        return ref.rope_multi(x, dims, positions, sections, interleaved, traditional, base, scale, freqs)
    return plan(x, positions, 0, scale, freqs)


def rope_multi(
    x: torch.Tensor,
    dims: int,
    positions: torch.Tensor,
    sections: Sequence[int],
    *,
    interleaved: bool = False,
    traditional: bool = False,
    base: float = 10000.0,
    scale: float = 1.0,
    freqs: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Multimodal RoPE (Qwen2-VL M-RoPE, Qwen3-VL/Qwen3.5 interleaved M-RoPE).

    Each of the ``dims/2`` frequencies takes its position from one of the
    ``S = len(sections)`` streams (temporal, height, width, ...):
    contiguous layout (``interleaved=False``, Qwen2-VL): the first
    ``sections[0]`` frequencies use stream 0, the next ``sections[1]`` stream
    1, and so on; interleaved layout (Qwen3-VL, Qwen3.5): frequency i uses
    stream 1 if ``i % 3 == 1 and i < 3*sections[1]``, stream 2 if
    ``i % 3 == 2 and i < 3*sections[2]``, else stream 0.

    Args:
        x: ``[..., D]`` float32/float16/bfloat16.
        dims: rotated dims (even, <= D); the rest pass through.
        positions: integer ``[S, ...]``, each stream broadcastable to ``x.shape[:-1]``
            (e.g. ``[3, B, 1, L]`` for x ``[B, H, L, D]``).
        sections: ``S`` ints (1 to 4) summing to ``dims / 2``.
        interleaved, traditional, base, scale, freqs: as described above and in :func:`rope`.

    Returns:
        ``[..., D]`` contiguous, dtype of ``x``.
    """
    return _rope_multi(x, dims, positions, [int(s) for s in sections], bool(interleaved), bool(traditional),
                       float(base), float(scale), freqs)


# --------------------------------------------------------------------------- head_norm_rope

def _validate_head_norm_rope(x, weight, eps, dims, base, scale, positions, freqs, sections, interleaved):
    op = "head_norm_rope"
    _check_common(op, x, dims, base, scale, freqs)
    if x.dim() < 2:
        raise InvalidArgumentError(f"{op}: x must be [..., H, D] (at least 2 dims), got shape {tuple(x.shape)}")
    if weight is not None:
        checks.check_weight(op, "weight", weight, x, x.shape[-1], "the head dim of x")
    checks.check_finite_float(op, "eps", eps)
    checks.check_positive(op, "eps", eps)
    tokens = tuple(x.shape[:-2])
    if sections is None:
        _check_positions(op, x, positions, tokens, "the token dims x.shape[:-2]")
    else:
        _check_sections(op, dims, sections, interleaved)
        _check_positions(op, x, positions, (len(sections), *tokens), "[len(sections), *x.shape[:-2]]")


def _fake_head_norm_rope(x, weight, eps, weight_offset, dims, base, scale, positions, traditional, freqs,
                         sections, interleaved):
    _validate_head_norm_rope(x, weight, eps, dims, base, scale, positions, freqs, sections, interleaved)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _token_view(x: torch.Tensor, sections: Optional[Sequence[int]]):
    """Maps positions over the token dims of ``x [..., H, D]`` (``[S, ...]`` with sections)
    to a view ``[S, *x.shape[:-1]]``: every head of a token shares its position."""
    rows = tuple(x.shape[:-1])
    if sections is None:
        return lambda p: p.unsqueeze(-1).expand(*rows).unsqueeze(0)
    n = len(sections)
    return lambda p: p.unsqueeze(-1).expand(n, *rows)


def _build_head_norm_rope(x, weight, eps, dims, base, scale, positions, traditional, freqs, sections, interleaved):
    _validate_head_norm_rope(x, weight, eps, dims, base, scale, positions, freqs, sections, interleaved)
    if x.numel() == 0:
        return EMPTY
    return RopePlan(x, dims, _token_view(x, sections), positions, 0, traditional=traditional, base=base, freqs=freqs, sections=sections,
                    interleaved=interleaved, norm=True, weight=weight)


_HEAD_NORM_ROPE_PLANS = PlanCache(_build_head_norm_rope)


@register_op("head_norm_rope", fake=_fake_head_norm_rope)
def _head_norm_rope(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, weight_offset: float, dims: int,
                    base: float, scale: float, positions: torch.Tensor, traditional: bool,
                    freqs: Optional[torch.Tensor], sections: Optional[list[int]],
                    interleaved: bool) -> torch.Tensor:
    try:  # the plan key, inline and flat (runtime/plans.py); a non-tensor argument raises here
        key = (x.shape, x.stride(), x.dtype, x.device, positions.shape, positions.stride(), positions.dtype,
               positions.device, eps, dims, base, scale, traditional, interleaved,
               None if weight is None else (weight.shape, weight.stride(), weight.dtype, weight.device),
               None if freqs is None else (freqs.shape, freqs.stride(), freqs.dtype, freqs.device),
               None if sections is None else tuple(sections))
        plan = _HEAD_NORM_ROPE_PLANS.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = _HEAD_NORM_ROPE_PLANS.build(key, x, weight, eps, dims, base, scale, positions, traditional, freqs,
                                           sections, interleaved)
    if plan is EMPTY:
        return empty_like(x)
    if not use_triton("head_norm_rope", x):
        return ref.head_norm_rope(x, weight, eps, weight_offset, dims, base, scale, positions, traditional, freqs,
                                  sections, interleaved)
    return plan(x, positions, 0, scale, freqs, weight, eps, weight_offset)


def head_norm_rope(
    x: torch.Tensor,
    weight: Optional[torch.Tensor],
    *,
    positions: torch.Tensor,
    eps: float = 1e-6,
    dims: Optional[int] = None,
    base: float = 10000.0,
    traditional: bool = False,
    freqs: Optional[torch.Tensor] = None,
    scale: float = 1.0,
    weight_offset: float = 0.0,
    sections: Optional[Sequence[int]] = None,
    interleaved: bool = False,
) -> torch.Tensor:
    """Per-head RMS norm then RoPE in one kernel (one read and one write of x).

    The q/k path of Qwen3, Gemma 3/4 and Qwen3.5 attention: each ``[D]`` head
    row is RMS-normalized (times ``weight + weight_offset``), then its first
    ``dims`` features are rotated; nothing is rounded in between.

    Args:
        x: ``[..., H, D]`` float32/float16/bfloat16 (e.g. ``[B, T, H, D]``).
        weight: ``[D]`` norm weight or None (unit norm, e.g. Gemma 4's v-norm).
        positions: integer tensor broadcastable to the token dims
            ``x.shape[:-2]`` (with ``sections``: ``[S, *token dims]``).
        eps: RMS-norm epsilon (> 0).
        dims: rotated dims (even, default D).
        base, traditional, freqs, scale: as in :func:`rope`.
        weight_offset: 1.0 for Gemma's ``(1 + w)`` norms.
        sections, interleaved: multi-section positions as in :func:`rope_multi`.

    Returns:
        ``[..., H, D]`` contiguous, dtype of ``x``.

    Example:
        >>> q = mn.head_norm_rope(q.view(B, T, H, 128), q_norm_w, positions=pos, eps=1e-6)
    """
    dims = x.shape[-1] if dims is None and isinstance(x, torch.Tensor) and x.dim() else dims
    args = (x, weight, float(eps), float(weight_offset), dims, float(base), float(scale), positions, bool(traditional),
            freqs, None if sections is None else [int(s) for s in sections], bool(interleaved))
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _head_norm_rope.op(*args)
    return _head_norm_rope.eager(*args)


# --------------------------------------------------------------------------- q/k pairs in one launch

def _validate_pair(op: str, q: torch.Tensor, k: torch.Tensor) -> None:
    checks.check_tensor(op, "k", k)
    checks.check_same_device(op, "q", q, k=k)
    checks.check_same_dtype(op, "q", q, k=k)
    checks.check_last_dim_contiguous(op, "k", k)
    if k.dim() != q.dim() or k.shape[-1] != q.shape[-1]:
        raise InvalidArgumentError(f"{op}: k has shape {tuple(k.shape)}, which does not match q's "
                                   f"{tuple(q.shape)} in rank or last dim")


def _pair_plan(op: str, build):
    """Build a pair plan; turn an unpairable layout into a typed error."""
    try:
        return build()
    except ValueError as exc:
        if isinstance(exc, InvalidArgumentError):
            raise
        raise InvalidArgumentError(f"{op}: q and k cannot share one launch: {exc}") from None


def _fake_rope_qk(q, k, dims, traditional, base, scale, offset, offset_tensor, freqs, positions):
    _validate_rope(q, dims, base, scale, offset_tensor, freqs, positions)
    _validate_pair("rope_qk", q, k)
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format))


def _build_rope_qk(q, k, dims, traditional, base, scale, offset_tensor, freqs, positions):
    _validate_rope(q, dims, base, scale, offset_tensor, freqs, positions)
    _validate_pair("rope_qk", q, k)
    if positions is not None:
        _check_positions("rope_qk", k, positions, k.shape[:-1], "k.shape[:-1]")
    if q.numel() == 0 or k.numel() == 0:
        return EMPTY
    raw = positions if positions is not None else offset_tensor
    return _pair_plan("rope_qk", lambda: RopePlan(
        q, dims, _rope_view(q, positions), raw, 0 if positions is not None else q.shape[-2],
        traditional=traditional, base=base, freqs=freqs, sections=None, interleaved=False, x2=k))


_ROPE_QK_PLANS = PlanCache(_build_rope_qk)


@register_op("rope_qk", fake=_fake_rope_qk)
def _rope_qk(q: torch.Tensor, k: torch.Tensor, dims: int, traditional: bool, base: float, scale: float, offset: int,
             offset_tensor: Optional[torch.Tensor], freqs: Optional[torch.Tensor],
             positions: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    try:  # the plan key, inline and flat (runtime/plans.py); a non-tensor argument raises here
        key = (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device, dims, traditional,
               base, scale,
               None if positions is None else (positions.shape, positions.stride(), positions.dtype,
                                               positions.device),
               None if offset_tensor is None else (offset_tensor.shape, offset_tensor.stride(), offset_tensor.dtype,
                                                   offset_tensor.device),
               None if freqs is None else (freqs.shape, freqs.stride(), freqs.dtype, freqs.device))
        plan = _ROPE_QK_PLANS.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = _ROPE_QK_PLANS.build(key, q, k, dims, traditional, base, scale, offset_tensor, freqs, positions)
    if not -_INT32 <= offset < _INT32:
        _check_offset("rope_qk", offset)
    if plan is EMPTY or not use_triton("rope_qk", q):
        args = (dims, traditional, base, scale, offset, offset_tensor, freqs, positions)
        return ref.rope(q, *args), ref.rope(k, *args)
    raw = positions if positions is not None else offset_tensor
    return plan(q, raw, offset, scale, freqs, x2=k)


def rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    dims: int,
    *,
    traditional: bool = False,
    base: Optional[float] = 10000.0,
    scale: float = 1.0,
    offset: Union[int, torch.Tensor] = 0,
    freqs: Optional[torch.Tensor] = None,
    positions: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rope(q, ...), rope(k, ...))`` with the same arguments, in one kernel launch.

    q and k may differ in one dim that positions do not depend on (the head
    count, e.g. ``[B, Hq, L, D]`` and ``[B, Hkv, L, D]``, or ``[B, L, Hq, D]`` and
    ``[B, L, Hkv, D]`` with positions ``[B, L, 1]``); the rotation angles are
    computed once per position and shared by all heads of both tensors.

    Args:
        q, k: ``[..., D]`` float32/float16/bfloat16, same dtype and device.
        dims, traditional, base, scale, offset, freqs, positions: as in :func:`rope`
            (``positions`` must broadcast to both row shapes).

    Returns:
        ``(q_out, k_out)``, contiguous.
    """
    offset_tensor = offset if isinstance(offset, torch.Tensor) else None
    offset_int = 0 if offset_tensor is not None else int(offset)
    if base is None and freqs is None:
        raise InvalidArgumentError("rope_qk: base is None and no freqs were given; pass one of them")
    args = (q, k, dims, bool(traditional), 10000.0 if base is None else float(base), float(scale), offset_int,
            offset_tensor, freqs, positions)
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _rope_qk.op(*args)
    return _rope_qk.eager(*args)


def _validate_head_norm_rope_qk(q, k, q_weight, k_weight, eps, dims, base, scale, positions, freqs, sections,
                                interleaved):
    _validate_head_norm_rope(q, q_weight, eps, dims, base, scale, positions, freqs, sections, interleaved)
    op = "head_norm_rope_qk"
    _validate_pair(op, q, k)
    if q.shape[:-2] != k.shape[:-2]:
        raise InvalidArgumentError(f"{op}: k has token dims {tuple(k.shape[:-2])}, q has {tuple(q.shape[:-2])}")
    if k_weight is not None:
        checks.check_weight(op, "k_weight", k_weight, q, k.shape[-1], "the head dim of k")
    if (q_weight is None) != (k_weight is None):
        raise InvalidArgumentError(f"{op}: pass both q_weight and k_weight or neither")


def _fake_head_norm_rope_qk(q, k, q_weight, k_weight, eps, weight_offset, dims, base, scale, positions, traditional,
                            freqs, sections, interleaved):
    _validate_head_norm_rope_qk(q, k, q_weight, k_weight, eps, dims, base, scale, positions, freqs, sections,
                                interleaved)
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format))


def _build_head_norm_rope_qk(q, k, q_weight, k_weight, eps, dims, base, scale, positions, traditional, freqs,
                             sections, interleaved):
    _validate_head_norm_rope_qk(q, k, q_weight, k_weight, eps, dims, base, scale, positions, freqs, sections,
                                interleaved)
    if q.numel() == 0 or k.numel() == 0:
        return EMPTY
    return _pair_plan("head_norm_rope_qk", lambda: RopePlan(
        q, dims, _token_view(q, sections), positions, 0, traditional=traditional, base=base, freqs=freqs, sections=sections,
        interleaved=interleaved, norm=True, weight=q_weight, x2=k, weight2=k_weight))


_HEAD_NORM_ROPE_QK_PLANS = PlanCache(_build_head_norm_rope_qk)


@register_op("head_norm_rope_qk", fake=_fake_head_norm_rope_qk)
def _head_norm_rope_qk(q: torch.Tensor, k: torch.Tensor, q_weight: Optional[torch.Tensor],
                       k_weight: Optional[torch.Tensor], eps: float, weight_offset: float, dims: int, base: float,
                       scale: float, positions: torch.Tensor, traditional: bool, freqs: Optional[torch.Tensor],
                       sections: Optional[list[int]], interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    try:  # the plan key, inline and flat (runtime/plans.py); a non-tensor argument raises here
        key = (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device, positions.shape,
               positions.stride(), positions.dtype, positions.device, eps, dims, base, scale, traditional,
               interleaved,
               None if q_weight is None else (q_weight.shape, q_weight.stride(), q_weight.dtype, q_weight.device),
               None if k_weight is None else (k_weight.shape, k_weight.stride(), k_weight.dtype, k_weight.device),
               None if freqs is None else (freqs.shape, freqs.stride(), freqs.dtype, freqs.device),
               None if sections is None else tuple(sections))
        plan = _HEAD_NORM_ROPE_QK_PLANS.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = _HEAD_NORM_ROPE_QK_PLANS.build(key, q, k, q_weight, k_weight, eps, dims, base, scale, positions,
                                              traditional, freqs, sections, interleaved)
    if plan is EMPTY or not use_triton("head_norm_rope_qk", q):
        args = (eps, weight_offset, dims, base, scale, positions, traditional, freqs, sections, interleaved)
        return ref.head_norm_rope(q, q_weight, *args), ref.head_norm_rope(k, k_weight, *args)
    return plan(q, positions, 0, scale, freqs, q_weight, eps, weight_offset, x2=k, weight2=k_weight)


def head_norm_rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: Optional[torch.Tensor],
    k_weight: Optional[torch.Tensor],
    *,
    positions: torch.Tensor,
    eps: float = 1e-6,
    dims: Optional[int] = None,
    base: float = 10000.0,
    traditional: bool = False,
    freqs: Optional[torch.Tensor] = None,
    scale: float = 1.0,
    weight_offset: float = 0.0,
    sections: Optional[Sequence[int]] = None,
    interleaved: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(head_norm_rope(q, q_weight, ...), head_norm_rope(k, k_weight, ...))`` in one launch.

    The whole q/k path of a Qwen3 / Gemma 3 attention layer (q_norm, k_norm,
    RoPE) as one kernel: one read and one write of q and k.

    Args:
        q: ``[..., Hq, D]``; k: ``[..., Hkv, D]`` with the same token dims.
        q_weight, k_weight: ``[D]`` norm weights (both, or both None).
        positions, eps, dims, base, traditional, freqs, scale, weight_offset,
        sections, interleaved: as in :func:`head_norm_rope`.

    Returns:
        ``(q_out, k_out)``, contiguous.
    """
    dims = q.shape[-1] if dims is None and isinstance(q, torch.Tensor) and q.dim() else dims
    args = (q, k, q_weight, k_weight, float(eps), float(weight_offset), dims, float(base), float(scale), positions,
            bool(traditional), freqs, None if sections is None else [int(s) for s in sections], bool(interleaved))
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _head_norm_rope_qk.op(*args)
    return _head_norm_rope_qk.eager(*args)
