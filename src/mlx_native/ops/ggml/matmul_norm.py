"""The norm handoff of ``quant/matmul_norm.py`` on GGUF Q4_K, Q5_K, Q4_0 and Q4_1 rows (``kernels/norm_handoff.py``),
and the gated MLP's gate/up projection + activation in one launch of the same kernels.

:func:`ggml_matmul_add_rms_norm_handoff` is ``add_rms_norm(ggml_matmul(x, raw, ...), residual, w)`` for one row of
x in one launch of the integer-dot mat-vec (``q4k_idot.py``, ``q4_idot.py``), returning ``h`` and a
:class:`~mlx_native.ops.quant.matmul_norm.NormHandoff`; :func:`handoff_ggml_matmul` is the next projection of the
normed row, ``1 / rms(h)`` applied to its result in its own launch. Both fall back to the separate ops where the
kernel does not apply (other types, several rows, an fp32 x). :func:`ggml_gated_matmul` (and
:func:`handoff_ggml_matmul` with an ``activation``) runs ``act(x G^T) * (x U^T)`` on a matrix that stacks the gate
and up projections, each program taking gate and up rows of the same outputs.

These are the model runner's decode-step fusions (plain launches, CUDA-graph safe), not registered ops.
"""

from typing import Optional, Sequence

import torch

from ...errors import InvalidArgumentError
from ...runtime.dispatch import use_triton
from ...runtime.plans import PlanCache, tensor_key
from ..activations.api import gated_mul
from ..quant.matmul_norm import NormHandoff, check_norm_args
from ..quant.qmm import ACT_CODES
from . import q4_idot, q4k_idot, q4k_mv
from .api import TypeArg, _shape_list, _type_id, _validate_mm, ggml_matmul
from .kernel import streamed_plan_class

OP = "ggml_matmul_add_rms_norm_handoff"
TAKE_OP = "handoff_ggml_matmul"
GATED_OP = "ggml_gated_matmul"


def kernel_takes(ggml_type: int, x_dtype: torch.dtype, n: int, k: int, raw: torch.Tensor,
                 pairs: bool = False) -> bool:
    """Whether ``ggml_matmul`` of one row of ``x_dtype`` x against these ``(n, k)`` rows runs an integer-dot
    mat-vec, which can hand off or take a norm (Q4_K, Q5_K, Q4_0, Q4_1; ``kernel.streamed_launch``'s choice: small
    Q4_0 / Q4_1 matrices stay on the word-level kernel, and so does their norm), with a result in x's dtype;
    ``pairs``: stacked gate/up rows, which need rows of whole steps (other rows may end in a partial one)."""
    return raw.is_contiguous() and streamed_plan_class(ggml_type, x_dtype, 1, n, k, raw.device, pairs) in (
        q4k_idot.Q4kIdotLaunch, q4k_idot.Q5kIdotLaunch, q4_idot.Q4IdotLaunch)


def _launch(type_id: int, n: int, k: int, dtype: torch.dtype, device, **role):
    """The integer-dot plan of :func:`kernel_takes`' rows, as a producer (``hand_off``) or consumer
    (``take_parts``)."""
    if type_id == q4k_mv.Q4K_ID:
        return q4k_idot.Q4kIdotLaunch(n, k, dtype, device, **role)
    if type_id == q4k_mv.Q5K_ID:
        return q4k_idot.Q5kIdotLaunch(n, k, dtype, device, **role)
    return q4_idot.Q4IdotLaunch(type_id, n, k, dtype, device, **role)


def _handoff_plan(x, raw, type_id, shape, residual, weight, eps):
    """The producer's plan where the one-launch kernel applies, else None (the two ops)."""
    t, n, k = _validate_mm(x, raw, type_id, shape, OP)
    check_norm_args(OP, x, n, residual, weight, eps)
    dense = all(v.is_contiguous() for v in (x, residual, weight))
    if x.numel() == k and n > 0 and dense and residual.dtype == x.dtype and kernel_takes(t.id, x.dtype, n, k, raw):
        return _launch(t.id, n, k, x.dtype, x.device, hand_off=True)
    return None


_HANDOFF_PLANS = PlanCache(_handoff_plan)


def ggml_matmul_add_rms_norm_handoff(x: torch.Tensor, raw: torch.Tensor, ggml_type: TypeArg, shape: Sequence[int],
                                     residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                                     weight_offset: float = 0.0) -> Optional[NormHandoff]:
    """``add_rms_norm(ggml_matmul(x, raw, ggml_type, shape), residual, weight, eps)`` for a consumer that takes the
    norm as a :class:`NormHandoff` (:func:`handoff_ggml_matmul`).

    Args:
        x: ``[..., K]`` (one row); raw, ggml_type, shape: a GGUF matrix ``(N, K)`` as for :func:`ggml_matmul`;
            residual: ``[..., N]`` in x's dtype; weight: ``[N]`` norm weight; eps, weight_offset: as in
            :func:`add_rms_norm`.

    Returns:
        The handoff (its ``h`` is ``x W^T + residual``) from one launch, or None where the kernel does not apply
        (then run the two ops)."""
    eps, weight_offset = float(eps), float(weight_offset)
    type_id, dims = _type_id(OP, ggml_type), _shape_list(shape)
    plan = _HANDOFF_PLANS.get((tensor_key(x), tensor_key(raw), type_id, tuple(dims), tensor_key(residual),
                               tensor_key(weight), eps), x, raw, type_id, dims, residual, weight, eps)
    if plan is None or not use_triton(OP, x):
        return None
    scaled, h, parts = plan.hand_off(x, raw, residual, weight, weight_offset)
    return NormHandoff(scaled.view(residual.shape), h.view(residual.shape), parts, eps)


def _act_code(op: str, activation: Optional[str], required: bool = False) -> Optional[int]:
    if activation is None and not required:
        return None
    if activation not in ACT_CODES:
        raise InvalidArgumentError(f"{op}: activation must be one of {sorted(ACT_CODES)}, got {activation!r}")
    return ACT_CODES[activation]


def _gated_rows(op: str, n: int, act: Optional[int]) -> int:
    """Outputs of an ``(n, K)`` matrix: ``n``, or ``n / 2`` where it stacks gate and up (``act`` given)."""
    if act is None:
        return n
    if n % 2:
        raise InvalidArgumentError(f"{op}: a stacked gate/up matrix has an even number of rows, got {n}")
    return n // 2


def _gated(y: torch.Tensor, act: Optional[int], activation: Optional[str]) -> torch.Tensor:
    """The two-op fallback's ``act(gate) * up`` of a stacked result ``[..., 2 I]``."""
    if act is None:
        return y
    i = y.shape[-1] // 2
    return gated_mul(y[..., :i], y[..., i:], activation)


def _take_plan(hand: NormHandoff, raw, type_id, shape, act):
    t, n, k = _validate_mm(hand.scaled, raw, type_id, shape, TAKE_OP)
    outs = _gated_rows(TAKE_OP, n, act)
    if n > 0 and hand.scaled.numel() == k and kernel_takes(t.id, hand.scaled.dtype, n, k, raw, act is not None):
        return _launch(t.id, outs, k, hand.scaled.dtype, hand.scaled.device, take_parts=hand.parts.numel(), act=act)
    return None


_TAKE_PLANS = PlanCache(_take_plan)


def handoff_ggml_matmul(hand: NormHandoff, raw: torch.Tensor, ggml_type: TypeArg, shape: Sequence[int], *,
                        activation: Optional[str] = None) -> torch.Tensor:
    """``ggml_matmul(hand.normed(), raw, ggml_type, shape)``, one launch where an integer-dot mat-vec applies
    (:func:`kernel_takes`). Result ``[..., N]`` like ``hand.h``; with ``activation`` ("silu", "gelu_tanh") the
    ``(N, K)`` matrix stacks gate and up and the result is ``act(normed G^T) * (normed U^T)``, ``[..., N / 2]``."""
    type_id, dims, act = _type_id(TAKE_OP, ggml_type), _shape_list(shape), _act_code(TAKE_OP, activation)
    plan = _TAKE_PLANS.get((tensor_key(hand.scaled), hand.parts.numel(), tensor_key(raw), type_id, tuple(dims), act),
                           hand, raw, type_id, dims, act)
    if plan is None or not use_triton(TAKE_OP, hand.scaled):
        return _gated(ggml_matmul(hand.normed(), raw, type_id, dims), act, activation)
    return plan.take(hand.scaled, hand.parts, hand.eps, raw).view(*hand.h.shape[:-1], plan.n)


def _gated_plan(x, raw, type_id, shape, act):
    t, n, k = _validate_mm(x, raw, type_id, shape, GATED_OP)
    outs = _gated_rows(GATED_OP, n, act)
    if n > 0 and x.numel() == k and x.is_contiguous() and kernel_takes(t.id, x.dtype, n, k, raw, act is not None):
        return _launch(t.id, outs, k, x.dtype, x.device, act=act)
    return None


_GATED_PLANS = PlanCache(_gated_plan)


def ggml_gated_matmul(x: torch.Tensor, raw: torch.Tensor, ggml_type: TypeArg, shape: Sequence[int],
                      activation: str = "silu") -> torch.Tensor:
    """A gated MLP's ``act(x G^T) * (x U^T)`` from a GGUF matrix stacking gate and up.

    Args:
        x: ``[..., K]``; raw, ggml_type, shape: a GGUF matrix ``(2 I, K)`` as for :func:`ggml_matmul`, gate rows
            first; activation: "silu" or "gelu_tanh".

    Returns:
        ``[..., I]`` in x's dtype: one launch of the integer-dot mat-vec for one row of x where it applies
        (:func:`kernel_takes`), else ``ggml_matmul`` and the activation."""
    type_id, dims, act = _type_id(GATED_OP, ggml_type), _shape_list(shape), _act_code(GATED_OP, activation, True)
    plan = _GATED_PLANS.get((tensor_key(x), tensor_key(raw), type_id, tuple(dims), act), x, raw, type_id, dims, act)
    if plan is None or not use_triton(GATED_OP, x):
        return _gated(ggml_matmul(x, raw, type_id, dims), act, activation)
    return plan(x, raw).view(*x.shape[:-1], plan.n)
