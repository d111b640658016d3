"""``quantized_matmul_add_rms_norm``: a projection followed by the next residual add + RMS norm.

A decoder layer's o and down projections feed ``add_rms_norm(y, residual, w)``. For one row of x on MLX
affine 4-bit weights the integer-dot mat-vec does both in one launch (its last program runs the norm:
``kernels/norm_tail.py``); every other case runs the two ops. Either way the result is the one of
``add_rms_norm(quantized_matmul(x, ...), residual, weight, eps)``.

No ``from __future__ import annotations``: torch.library reads the annotations.
"""

from typing import Optional

import torch

from ...errors import InvalidArgumentError
from ...kernels.arrival import can_fuse
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.plans import PlanCache, tensor_key
from ..norms.api import add_rms_norm
from . import affine_idot
from .api import _validate_qmm, out_dtype, quantized_matmul

OP = "quantized_matmul_add_rms_norm"


def _validate(x, w, scales, biases, residual, weight, eps, group_size, bits) -> tuple[int, int]:
    n, k = _validate_qmm(OP, x, w, scales, biases, True, group_size, bits)
    checks.check_tensor(OP, "residual", residual)
    checks.check_tensor(OP, "weight", weight)
    checks.check_same_device(OP, "x", x, residual=residual, weight=weight)
    if tuple(residual.shape) != (*x.shape[:-1], n):
        raise InvalidArgumentError(f"{OP}: residual has shape {tuple(residual.shape)}, expected "
                                   f"{[*x.shape[:-1], n]} (the projection's output)")
    checks.check_vector(OP, "weight", weight, n, "one weight per output feature")
    checks.check_finite_float(OP, "eps", eps)
    checks.check_positive(OP, "eps", eps)
    return n, k


def _plan(x, w, scales, biases, residual, weight, eps, group_size, bits) -> Optional[affine_idot.AffineIdotLaunch]:
    """The one-launch kernel where it applies, else None (the two ops)."""
    n, k = _validate(x, w, scales, biases, residual, weight, eps, group_size, bits)
    od = out_dtype(x, scales, biases)
    rows = x.numel() // k if k else 0
    dense = all(t.is_contiguous() for t in (x, w, scales, biases, residual, weight))
    if (rows == 1 and n > 0 and dense and residual.dtype == od and can_fuse(x.device)
            and affine_idot.supports(bits, group_size, True, x.dtype, od, 1, k, w.numel())):
        return affine_idot.AffineIdotLaunch(n, k, group_size, od, x.device, norm=True)
    return None


_PLANS = PlanCache(_plan)


def _fake(x, w, scales, biases, residual, weight, eps, weight_offset, group_size, bits):
    n, _ = _validate(x, w, scales, biases, residual, weight, eps, group_size, bits)
    out = x.new_empty((*x.shape[:-1], n), dtype=out_dtype(x, scales, biases))
    return out, torch.empty_like(out)


@register_op(OP, fake=_fake)
def _quantized_matmul_add_rms_norm(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                                   residual: torch.Tensor, weight: torch.Tensor, eps: float, weight_offset: float,
                                   group_size: int, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    plan = _PLANS.get((tensor_key(x), tensor_key(w), tensor_key(scales), tensor_key(biases), tensor_key(residual),
                       tensor_key(weight), eps, group_size, bits), x, w, scales, biases, residual, weight, eps,
                      group_size, bits)
    if plan is not None and use_triton(OP, x):
        words = w.view(torch.int32) if w.dtype == torch.uint32 else w  # the kernel reads int32 words
        normed, h = plan.add_rms_norm(x, words, scales, biases, residual, weight, eps, weight_offset)
        return normed.view(residual.shape), h.view(residual.shape)
    y = quantized_matmul(x, w, scales, biases, transpose=True, group_size=group_size, bits=bits)
    return add_rms_norm(y, residual, weight, eps, weight_offset=weight_offset)


def quantized_matmul_add_rms_norm(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                                  residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                                  weight_offset: float = 0.0, group_size: int = 64,
                                  bits: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """``add_rms_norm(quantized_matmul(x, w, scales, biases), residual, weight, eps)`` (``transpose=True``).

    Args:
        x: ``[..., K]``; w, scales, biases: an MLX affine matrix ``[N, K]`` (as in :func:`quantized_matmul`).
        residual: ``[..., N]`` in the projection's result dtype; weight: ``[N]`` norm weight.
        eps, weight_offset: as in :func:`add_rms_norm` (``weight_offset=1``: Gemma's ``1 + w``).

    Returns:
        ``(normed, h)``, both ``[..., N]``: ``h = x @ W^T + residual`` and ``normed = rms_norm(h) * weight``.
        One row of x on 4-bit weights takes one launch (the integer-dot mat-vec; its last program does the
        norm); other shapes and formats run the two ops.

    Example:
        >>> x, h = mn.quantized_matmul_add_rms_norm(attn, wq, s, b, h, post_norm_w, 1e-5)   # decode step
    """
    return _quantized_matmul_add_rms_norm(x, w, scales, biases, residual, weight, float(eps), float(weight_offset),
                                          group_size, bits)
