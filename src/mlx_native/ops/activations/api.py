"""Public activation ops: ``silu_mul``, ``gelu_mul``, ``sigmoid_mul``, ``softcap``, ``softmax``.

All compute in fp32 and round once to the input dtype. Inputs may have
strided rows (e.g. the gate and up halves of one fused projection); the last
dim must have stride 1. Outputs are contiguous.

No ``from __future__ import annotations``: torch.library reads the annotations.
"""

import torch
from torch.compiler import is_compiling

from ...errors import InvalidArgumentError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty_like
from ...runtime.plans import EMPTY, PlanCache, tensor_key
from . import elementwise as ew
from . import ref
from .softmax import SoftmaxPlan


def _validate_pair(op: str, a_name: str, a: torch.Tensor, b_name: str, b: torch.Tensor) -> None:
    checks.check_tensor(op, a_name, a)
    checks.check_tensor(op, b_name, b)
    checks.check_same_device(op, a_name, a, **{b_name: b})
    checks.check_same_dtype(op, a_name, a, **{b_name: b})
    checks.check_same_shape(op, a_name, a, **{b_name: b})
    checks.check_last_dim_contiguous(op, a_name, a)
    checks.check_last_dim_contiguous(op, b_name, b)


def _fake_like_first(*args):
    return torch.empty_like(args[0], memory_format=torch.contiguous_format)


def _pair_plans(op_name: str, a_name: str, b_name: str, code: int) -> PlanCache:
    def build(a, b):
        _validate_pair(op_name, a_name, a, b_name, b)
        return EMPTY if a.numel() == 0 else ew.ElementwisePlan(code, a, b)

    return PlanCache(build)


def _run_pair(plans: PlanCache, op_name: str, a: torch.Tensor, b: torch.Tensor, reference) -> torch.Tensor:
    try:  # the plan key, inline and flat (runtime/plans.py); a non-tensor argument raises here
        key = (a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device)
        plan = plans.plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is None:
        plan = plans.build(key, a, b)
    if plan is EMPTY:
        return empty_like(a)
    if use_triton(op_name, a):
        return plan(a, b)
    return reference(a, b)


_SILU_PLANS = _pair_plans("silu_mul", "gate", "up", ew.OP_SILU_MUL)
_GELU_TANH_PLANS = _pair_plans("gelu_mul", "gate", "up", ew.OP_GELU_TANH_MUL)
_GELU_ERF_PLANS = _pair_plans("gelu_mul", "gate", "up", ew.OP_GELU_ERF_MUL)
_SIGMOID_PLANS = _pair_plans("sigmoid_mul", "x", "gate", ew.OP_SIGMOID_MUL)


# --------------------------------------------------------------------------- silu_mul

def _fake_silu_mul(gate, up):
    _validate_pair("silu_mul", "gate", gate, "up", up)
    return _fake_like_first(gate)


@register_op("silu_mul", fake=_fake_silu_mul)
def _silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return _run_pair(_SILU_PLANS, "silu_mul", gate, up, ref.silu_mul)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """SwiGLU: ``silu(gate) * up`` (Llama, Qwen, Mistral MLPs).

    Args:
        gate, up: ``[..., N]`` same shape and dtype (float32/float16/bfloat16).

    Returns:
        ``[..., N]`` contiguous.

    Example:
        >>> gu = x @ w_gate_up.T                      # [T, 2I]
        >>> h = mn.silu_mul(gu[:, :I], gu[:, I:])     # strided halves, no copy
    """
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _silu_mul.op(gate, up)
    return _silu_mul.eager(gate, up)


# --------------------------------------------------------------------------- gelu_mul

def _check_approximate(approximate: str) -> None:
    if approximate not in ("tanh", "none"):
        raise InvalidArgumentError(f"gelu_mul: approximate must be 'tanh' or 'none', got {approximate!r}")


def _fake_gelu_mul(gate, up, approximate):
    _check_approximate(approximate)
    _validate_pair("gelu_mul", "gate", gate, "up", up)
    return _fake_like_first(gate)


@register_op("gelu_mul", fake=_fake_gelu_mul)
def _gelu_mul(gate: torch.Tensor, up: torch.Tensor, approximate: str) -> torch.Tensor:
    _check_approximate(approximate)
    plans = _GELU_TANH_PLANS if approximate == "tanh" else _GELU_ERF_PLANS
    return _run_pair(plans, "gelu_mul", gate, up, lambda g, u: ref.gelu_mul(g, u, approximate))


def gelu_mul(gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """GeGLU: ``gelu(gate) * up`` (Gemma MLPs use the tanh approximation).

    Args:
        gate, up: ``[..., N]`` same shape and dtype.
        approximate: "tanh" or "none" (exact erf GELU), as in ``torch.nn.functional.gelu``.

    Returns:
        ``[..., N]`` contiguous.
    """
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _gelu_mul.op(gate, up, approximate)
    return _gelu_mul.eager(gate, up, approximate)


def gated_mul(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    """``act(gate) * up`` for a gated MLP's ``activation``: "silu" (:func:`silu_mul`) or "gelu_tanh"
    (:func:`gelu_mul` with the tanh approximation)."""
    return silu_mul(gate, up) if activation == "silu" else gelu_mul(gate, up, "tanh")


# --------------------------------------------------------------------------- sigmoid_mul

def _fake_sigmoid_mul(x, gate):
    _validate_pair("sigmoid_mul", "x", x, "gate", gate)
    return _fake_like_first(x)


@register_op("sigmoid_mul", fake=_fake_sigmoid_mul)
def _sigmoid_mul(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    return _run_pair(_SIGMOID_PLANS, "sigmoid_mul", x, gate, ref.sigmoid_mul)


def sigmoid_mul(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """Sigmoid gating ``x * sigmoid(gate)`` (Qwen3-Next / Qwen3.5 attention output gate).

    Args:
        x, gate: ``[..., N]`` same shape and dtype.

    Returns:
        ``[..., N]`` contiguous.
    """
    if is_compiling():  # the registered op; eager calls skip its caller (runtime/library.py)
        return _sigmoid_mul.op(x, gate)
    return _sigmoid_mul.eager(x, gate)


# --------------------------------------------------------------------------- softcap

def _validate_softcap(x, cap):
    checks.check_tensor("softcap", "x", x)
    checks.check_last_dim_contiguous("softcap", "x", x)
    checks.check_finite_float("softcap", "cap", cap)
    checks.check_positive("softcap", "cap", cap)


def _fake_softcap(x, cap):
    _validate_softcap(x, cap)
    return _fake_like_first(x)


def _build_softcap(x, cap):
    _validate_softcap(x, cap)
    return EMPTY if x.numel() == 0 else ew.ElementwisePlan(ew.OP_SOFTCAP, x, None)


_SOFTCAP_PLANS = PlanCache(_build_softcap)


@register_op("softcap", fake=_fake_softcap)
def _softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    plan = _SOFTCAP_PLANS.get((tensor_key(x), cap), x, cap)
    if plan is EMPTY:
        return empty_like(x)
    if use_triton("softcap", x):
        return plan(x, None, cap)
    return ref.softcap(x, cap)


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Logit soft-capping ``cap * tanh(x / cap)`` (Gemma 2/3 final logits).

    Args:
        x: ``[..., N]`` float32/float16/bfloat16.
        cap: > 0.

    Returns:
        ``[..., N]`` contiguous.
    """
    return _softcap(x, float(cap))


# --------------------------------------------------------------------------- softmax

def _validate_softmax(x, axis):
    checks.check_tensor("softmax", "x", x)
    return checks.check_axis("softmax", axis, x.dim())


def _fake_softmax(x, axis):
    _validate_softmax(x, axis)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _build_softmax(x, axis):
    axis = _validate_softmax(x, axis)
    if x.numel() == 0:
        return EMPTY
    if axis == x.dim() - 1:
        return axis, SoftmaxPlan(x)
    return axis, SoftmaxPlan(x.movedim(axis, -1))  # the plan copies the moved view to contiguous rows


_SOFTMAX_PLANS = PlanCache(_build_softmax)


@register_op("softmax", fake=_fake_softmax)
def _softmax(x: torch.Tensor, axis: int) -> torch.Tensor:
    plan = _SOFTMAX_PLANS.get((tensor_key(x), axis), x, axis)
    if plan is EMPTY:
        return empty_like(x)
    axis, kernel_plan = plan
    if not use_triton("softmax", x):
        return ref.softmax(x, axis).contiguous()
    if axis == x.dim() - 1:
        return kernel_plan(x)
    return kernel_plan(x.movedim(axis, -1)).movedim(-1, axis).contiguous()


def softmax(x: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """Softmax along ``axis`` with fp32 accumulation (MLX ``mx.softmax``, always "precise").

    Args:
        x: float32/float16/bfloat16 tensor of at least 1 dim.
        axis: the reduced dim (negative counts from the end).

    Returns:
        Contiguous tensor of x's shape and dtype. A row of all ``-inf`` gives
        NaN, as in PyTorch and MLX.
    """
    return _softmax(x, int(axis))
