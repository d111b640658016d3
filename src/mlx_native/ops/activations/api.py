"""Public activation ops: ``silu_mul``, ``gelu_mul``, ``sigmoid_mul``, ``softcap``, ``softmax``.

All compute in fp32 and round once to the input dtype. Inputs may have
strided rows (e.g. the gate and up halves of one fused projection); the last
dim must have stride 1. Outputs are contiguous.

No ``from __future__ import annotations``: torch.library reads the annotations.
"""

from typing import Optional

import torch

from ...errors import InvalidArgumentError
from ...runtime import checks
from ...runtime.dispatch import use_triton
from ...runtime.library import register_op
from ...runtime.memory import empty_like
from . import elementwise as ew
from . import ref
from .softmax import softmax_last


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


def _run(op_name: str, code: int, a: torch.Tensor, b: Optional[torch.Tensor], reference, cap: float = 1.0):
    if a.numel() == 0:
        return empty_like(a)
    if use_triton(op_name, a):
        return ew.elementwise(code, a, b, cap)
    return reference()


# --------------------------------------------------------------------------- silu_mul

def _fake_silu_mul(gate, up):
    _validate_pair("silu_mul", "gate", gate, "up", up)
    return _fake_like_first(gate)


@register_op("silu_mul", fake=_fake_silu_mul)
def _silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    _validate_pair("silu_mul", "gate", gate, "up", up)
    return _run("silu_mul", ew.OP_SILU_MUL, gate, up, lambda: ref.silu_mul(gate, up))


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
    return _silu_mul(gate, up)


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
    _validate_pair("gelu_mul", "gate", gate, "up", up)
    code = ew.OP_GELU_TANH_MUL if approximate == "tanh" else ew.OP_GELU_ERF_MUL
    return _run("gelu_mul", code, gate, up, lambda: ref.gelu_mul(gate, up, approximate))


def gelu_mul(gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """GeGLU: ``gelu(gate) * up`` (Gemma MLPs use the tanh approximation).

    Args:
        gate, up: ``[..., N]`` same shape and dtype.
        approximate: "tanh" or "none" (exact erf GELU), as in ``torch.nn.functional.gelu``.

    Returns:
        ``[..., N]`` contiguous.
    """
    return _gelu_mul(gate, up, approximate)


# --------------------------------------------------------------------------- sigmoid_mul

def _fake_sigmoid_mul(x, gate):
    _validate_pair("sigmoid_mul", "x", x, "gate", gate)
    return _fake_like_first(x)


@register_op("sigmoid_mul", fake=_fake_sigmoid_mul)
def _sigmoid_mul(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    _validate_pair("sigmoid_mul", "x", x, "gate", gate)
    return _run("sigmoid_mul", ew.OP_SIGMOID_MUL, x, gate, lambda: ref.sigmoid_mul(x, gate))


def sigmoid_mul(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """Sigmoid gating ``x * sigmoid(gate)`` (Qwen3-Next / Qwen3.5 attention output gate).

    Args:
        x, gate: ``[..., N]`` same shape and dtype.

    Returns:
        ``[..., N]`` contiguous.
    """
    return _sigmoid_mul(x, gate)


# --------------------------------------------------------------------------- softcap

def _validate_softcap(x, cap):
    checks.check_tensor("softcap", "x", x)
    checks.check_last_dim_contiguous("softcap", "x", x)
    checks.check_finite_float("softcap", "cap", cap)
    checks.check_positive("softcap", "cap", cap)


def _fake_softcap(x, cap):
    _validate_softcap(x, cap)
    return _fake_like_first(x)


@register_op("softcap", fake=_fake_softcap)
def _softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    _validate_softcap(x, cap)
    return _run("softcap", ew.OP_SOFTCAP, x, None, lambda: ref.softcap(x, cap), cap)


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


@register_op("softmax", fake=_fake_softmax)
def _softmax(x: torch.Tensor, axis: int) -> torch.Tensor:
    axis = _validate_softmax(x, axis)
    if x.numel() == 0:
        return empty_like(x)
    if not use_triton("softmax", x):
        return ref.softmax(x, axis).contiguous()
    if axis == x.dim() - 1:
        if x.shape[-1] > 1 and x.stride(-1) != 1:
            x = x.contiguous()
        return softmax_last(x)
    moved = x.movedim(axis, -1).contiguous()
    return softmax_last(moved).movedim(-1, axis).contiguous()


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
