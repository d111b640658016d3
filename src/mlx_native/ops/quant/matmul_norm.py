"""The residual add + RMS norm after a decode row's projection, handed to the next projection's launch.

A decoder layer's o and down projections feed ``add_rms_norm(y, residual, w)``, whose ``normed`` feeds the next
projection (qkv, gate/up). For one row of x on MLX affine 4-bit weights the integer-dot mat-vec launches do it
without a norm launch (``kernels/norm_handoff.py``): :func:`matmul_add_rms_norm_handoff` returns
``h = x W^T + residual`` and a :class:`NormHandoff` (``h * w`` and partial sums of ``h^2``), and
:func:`handoff_matmul` applies ``1 / rms(h)`` to the next projection's result. Both fall back to the separate ops
where the kernel does not apply.

These are the model runner's decode-step fusions (plain launches, CUDA-graph safe), not registered ops.
"""

from typing import NamedTuple, Optional

import torch

from ...errors import InvalidArgumentError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.plans import PlanCache, tensor_key
from ..activations.api import gated_mul
from . import affine_idot
from .api import _validate_qmm, out_dtype, quantized_matmul
from .qmm import ACT_CODES

OP = "matmul_add_rms_norm_handoff"
TAKE_OP = "handoff_matmul"


def check_norm_args(op: str, x: torch.Tensor, n: int, residual: torch.Tensor, weight: torch.Tensor,
                    eps: float) -> None:
    """The residual ``[..., N]`` (x's leading dims), norm weight ``[N]`` and eps of a producer's call."""
    checks.check_tensor(op, "residual", residual)
    checks.check_tensor(op, "weight", weight)
    checks.check_same_device(op, "x", x, residual=residual, weight=weight)
    if tuple(residual.shape) != (*x.shape[:-1], n):
        raise InvalidArgumentError(f"{op}: residual has shape {tuple(residual.shape)}, expected "
                                   f"{[*x.shape[:-1], n]} (the projection's output)")
    checks.check_vector(op, "weight", weight, n, "one weight per output feature")
    checks.check_finite_float(op, "eps", eps)
    checks.check_positive(op, "eps", eps)


def _validate(x, w, scales, biases, residual, weight, eps, group_size, bits) -> tuple[int, int]:
    n, k = _validate_qmm(OP, x, w, scales, biases, True, group_size, bits)
    check_norm_args(OP, x, n, residual, weight, eps)
    return n, k


class NormHandoff(NamedTuple):
    """``rms_norm(h) * w`` of one row, not yet divided by ``rms(h)``: what a projection's launch hands to the next
    projection's (``kernels/norm_handoff.py``). ``scaled = h * w`` and ``h`` are ``[..., N]`` (one row), ``parts``
    fp32 partial sums of ``h^2``."""

    scaled: torch.Tensor
    h: torch.Tensor
    parts: torch.Tensor
    eps: float

    @property
    def shape(self) -> torch.Size:
        return self.h.shape

    def normed(self) -> torch.Tensor:
        """The normed row itself (for a consumer that cannot take the handoff)."""
        rstd = torch.rsqrt(self.parts.sum() / self.h.shape[-1] + self.eps)
        return (self.scaled.float() * rstd).to(self.scaled.dtype)


def _handoff_plan(x, w, scales, biases, residual, weight, eps, group_size,
                  bits) -> Optional[affine_idot.AffineIdotLaunch]:
    """The producer's plan where the one-launch kernel applies, else None (the two ops)."""
    n, k = _validate(x, w, scales, biases, residual, weight, eps, group_size, bits)
    od = out_dtype(x, scales, biases)
    rows = x.numel() // k if k else 0
    dense = all(t.is_contiguous() for t in (x, w, scales, biases, residual, weight))
    if (rows == 1 and n > 0 and dense and residual.dtype == od
            and affine_idot.supports(bits, group_size, True, x.dtype, od, 1, k, w.numel())):
        return affine_idot.AffineIdotLaunch(n, k, group_size, od, x.device, hand_off=True)
    return None


_HANDOFF_PLANS = PlanCache(_handoff_plan)


def matmul_add_rms_norm_handoff(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor,
                                residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                                weight_offset: float = 0.0, group_size: int = 64,
                                bits: int = 4) -> Optional[NormHandoff]:
    """``add_rms_norm(quantized_matmul(x, w, scales, biases), residual, weight, eps)`` (``transpose=True``) for
    a consumer that takes the norm as a :class:`NormHandoff` (:func:`handoff_matmul`).

    Args:
        x: ``[..., K]`` (one row); w, scales, biases: an MLX affine matrix ``[N, K]``; residual: ``[..., N]`` in
            the projection's result dtype; weight: ``[N]`` norm weight; eps, weight_offset: as in
            :func:`add_rms_norm` (``weight_offset=1``: Gemma's ``1 + w``).

    Returns:
        The handoff (``h = x W^T + residual`` is its ``h``) from one launch, or None where the kernel does not
        apply (then run ``add_rms_norm(quantized_matmul(...), ...)``)."""
    eps, weight_offset = float(eps), float(weight_offset)
    plan = _HANDOFF_PLANS.get((tensor_key(x), tensor_key(w), tensor_key(scales), tensor_key(biases),
                               tensor_key(residual), tensor_key(weight), eps, group_size, bits), x, w, scales,
                              biases, residual, weight, eps, group_size, bits)
    if plan is None or not use_triton(OP, x):
        return None
    words = w.view(torch.int32) if w.dtype == torch.uint32 else w
    scaled, h, parts = plan.hand_off(x, words, scales, biases, residual, weight, weight_offset)
    return NormHandoff(scaled.view(residual.shape), h.view(residual.shape), parts, eps)


def _take_plan(hand: NormHandoff, w, scales, biases, group_size, bits, up, act):
    scaled = hand.scaled
    n, k = _validate_qmm(TAKE_OP, scaled, w, scales, biases, True, group_size, bits)
    if up is not None:
        n_up, _ = _validate_qmm(TAKE_OP, scaled, *up, True, group_size, bits)
        if n_up != n:
            raise InvalidArgumentError(f"{TAKE_OP}: the up projection has {n_up} rows, the gate {n}")
    od = out_dtype(scaled, scales, biases)
    dense = all(t.is_contiguous() for t in (w, scales, biases, *(up or ())))
    if (n > 0 and dense and od == scaled.dtype and scaled.numel() == k
            and affine_idot.supports(bits, group_size, True, scaled.dtype, od, 1, k, w.numel(), pairs=act is not None)):
        return affine_idot.AffineIdotLaunch(n, k, group_size, od, scaled.device, act=act,
                                            take_parts=hand.parts.numel())
    return None


_TAKE_PLANS = PlanCache(_take_plan)


def handoff_matmul(hand: NormHandoff, w: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor, *,
                   group_size: int = 64, bits: int = 4, up: Optional[tuple] = None,
                   activation: Optional[str] = None) -> torch.Tensor:
    """``quantized_matmul(hand.normed(), w, scales, biases)`` (``transpose=True``), one launch where the
    integer-dot mat-vec applies; with ``up = (w_up, scales_up, biases_up)`` and ``activation`` ("silu",
    "gelu_tanh") ``act(normed @ W^T) * (normed @ W_up^T)``. Result ``[..., N]`` like ``hand.h``."""
    act = None if up is None else ACT_CODES[activation]
    plan = _TAKE_PLANS.get((tensor_key(hand.scaled), hand.parts.numel(), tensor_key(w), tensor_key(scales),
                            tensor_key(biases), *(tensor_key(t) for t in up or ()), group_size, bits, act), hand, w,
                           scales, biases, group_size, bits, up, act)
    lead = hand.h.shape[:-1]
    if plan is None or not use_triton(TAKE_OP, hand.scaled):
        x = hand.normed()
        y = quantized_matmul(x, w, scales, biases, transpose=True, group_size=group_size, bits=bits)
        if up is None:
            return y
        u = quantized_matmul(x, *up, transpose=True, group_size=group_size, bits=bits)
        return gated_mul(y, u, activation)
    words = [t.view(torch.int32) if t.dtype == torch.uint32 else t for t in (w, *(up[:1] if up else ()))]
    if up is None:
        y = plan.take(hand.scaled, hand.parts, hand.eps, words[0], scales, biases)
    else:
        y = plan.take(hand.scaled, hand.parts, hand.eps, words[0], scales, biases, words[1], up[1], up[2])
    return y.view(*lead, plan.n)
