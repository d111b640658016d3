"""Public norm ops: ``rms_norm``, ``add_rms_norm``, ``l2_norm``.

No ``from __future__ import annotations`` here: ``torch.library`` reads the
annotations of the registered functions to build their schemas.
"""

from typing import Optional

import torch
from torch.compiler import is_compiling

from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty_like
from ...runtime.plans import EMPTY, PlanCache
from . import ref
from .kernel import NormPlan


def _validate(op: str, x: torch.Tensor, weight: Optional[torch.Tensor], eps: float,
              residual: Optional[torch.Tensor] = None) -> None:
    checks.check_tensor(op, "x", x)
    checks.check_last_dim_contiguous(op, "x", x)
    if residual is not None:
        checks.check_tensor(op, "residual", residual)
        checks.check_same_device(op, "x", x, residual=residual)
        checks.check_same_dtype(op, "x", x, residual=residual)
        checks.check_same_shape(op, "x", x, residual=residual)
        checks.check_last_dim_contiguous(op, "residual", residual)
    if weight is not None:
        checks.check_weight(op, "weight", weight, x, x.shape[-1], "the last dim of x")
    checks.check_finite_float(op, "eps", eps)
    checks.check_positive(op, "eps", eps)


def _plan(op: str, mean: bool):
    def build(x, weight, residual, eps):
        _validate(op, x, weight, eps, residual)
        return EMPTY if x.numel() == 0 else NormPlan(x, weight, residual, mean)

    return PlanCache(build)


_RMS_PLANS = _plan("rms_norm", mean=True)
_ADD_RMS_PLANS = _plan("add_rms_norm", mean=True)
_L2_PLANS = _plan("l2_norm", mean=False)


def _fake_rms_norm(x, weight, eps, weight_offset):
    _validate("rms_norm", x, weight, eps)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@register_op("rms_norm", fake=_fake_rms_norm)
def _rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, weight_offset: float) -> torch.Tensor:
    try:  # the plan key, inline and flat (runtime/plans.py); a non-tensor argument raises here
        key = (x.shape, x.stride(), x.dtype, x.device,
               None if weight is None else (weight.shape, weight.stride(), weight.dtype, weight.device), eps)
        plan = _RMS_PLANS.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = _RMS_PLANS.build(key, x, weight, None, eps)
    if plan is EMPTY:
        return empty_like(x)
    if use_triton("rms_norm", x):
        return plan(x, weight, None, eps, weight_offset)[0]
    return ref.rms_norm(x, weight, eps, weight_offset)


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6, *,
             weight_offset: float = 0.0) -> torch.Tensor:
    """RMS norm over the last dim (MLX ``mx.fast.rms_norm``), fp32 math.

    ``y = x / sqrt(mean(x^2, -1) + eps) * (weight + weight_offset)``

    Args:
        x: ``[..., N]`` float32/float16/bfloat16; rows may be strided, the last
            dim must have stride 1.
        weight: ``[N]`` (any float dtype) or None for no scaling.
        eps: added to the mean square; must be > 0.
        weight_offset: added to ``weight``; 1.0 gives Gemma's ``(1 + w)`` norm.

    Returns:
        ``[..., N]`` contiguous, dtype of ``x``.

    Raises:
        UnsupportedDTypeError, InvalidArgumentError, DeviceMismatchError.

    Example:
        >>> y = mn.rms_norm(torch.randn(4, 4096, dtype=torch.bfloat16), w, 1e-6)
    """
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _rms_norm.op(x, weight, float(eps), float(weight_offset))
    return _rms_norm.eager(x, weight, float(eps), float(weight_offset))


def _fake_add_rms_norm(x, residual, weight, eps, weight_offset):
    _validate("add_rms_norm", x, weight, eps, residual)
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(x, memory_format=torch.contiguous_format))


@register_op("add_rms_norm", fake=_fake_add_rms_norm)
def _add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor], eps: float,
                  weight_offset: float) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        key = (x.shape, x.stride(), x.dtype, x.device, residual.shape, residual.stride(), residual.dtype,
               residual.device,
               None if weight is None else (weight.shape, weight.stride(), weight.dtype, weight.device), eps)
        plan = _ADD_RMS_PLANS.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = _ADD_RMS_PLANS.build(key, x, weight, residual, eps)
    if plan is EMPTY:
        return empty_like(x), empty_like(x)
    if use_triton("add_rms_norm", x):
        return plan(x, weight, residual, eps, weight_offset)
    return ref.add_rms_norm(x, residual, weight, eps, weight_offset)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor] = None,
                 eps: float = 1e-6, *, weight_offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add fused with RMS norm, one pass: ``h = x + residual``, ``rms_norm(h)``.

    Args:
        x, residual: ``[..., N]``, same shape and dtype, unit-stride last dim.
        weight, eps, weight_offset: as in :func:`rms_norm`.

    Returns:
        ``(normed, h)``, both ``[..., N]`` in x's dtype; ``h`` is the sum rounded
        to that dtype and ``normed == rms_norm(h, weight, eps)``.

    Example:
        >>> normed, hidden = mn.add_rms_norm(attn_out, hidden, w)
    """
    if is_compiling():
        return _add_rms_norm.op(x, residual, weight, float(eps), float(weight_offset))
    return _add_rms_norm.eager(x, residual, weight, float(eps), float(weight_offset))


def _fake_l2_norm(x, eps):
    _validate("l2_norm", x, None, eps)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@register_op("l2_norm", fake=_fake_l2_norm)
def _l2_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    try:
        key = (x.shape, x.stride(), x.dtype, x.device, eps)
        plan = _L2_PLANS.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = _L2_PLANS.build(key, x, None, None, eps)
    if plan is EMPTY:
        return empty_like(x)
    if use_triton("l2_norm", x):
        return plan(x, None, None, eps, 0.0)[0]
    return ref.l2_norm(x, eps)


def l2_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """L2 normalization over the last dim: ``x / sqrt(sum(x^2, -1) + eps)``.

    The convention of flash-linear-attention and Qwen3-Next/Qwen3.5 (used on
    q and k of gated delta net layers).

    Args:
        x: ``[..., N]`` float32/float16/bfloat16, unit-stride last dim.
        eps: added to the sum of squares; must be > 0.

    Returns:
        ``[..., N]`` contiguous, dtype of ``x``.
    """
    if is_compiling():
        return _l2_norm.op(x, float(eps))
    return _l2_norm.eager(x, float(eps))
