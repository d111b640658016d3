"""Public token-selection ops: ``argmax`` and ``sample``.

Both run on the GPU with no host sync (the seed is a tensor), so a decode step
that ends in them can be captured in a CUDA graph and replayed; advance the
seed tensor in place between steps (e.g. ``seed += 1``) to draw new numbers.

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
from . import ref
from .kernel import ArgmaxPlan, SamplePlan


def _rows2d(x: torch.Tensor) -> torch.Tensor:
    """``[..., V]`` -> ``[R, V]`` (a view when the rows have one stride)."""
    if x.dim() == 1:
        return x.unsqueeze(0)
    if x.dim() == 2:
        return x
    try:
        return x.view(-1, x.shape[-1])
    except RuntimeError:
        return x.reshape(-1, x.shape[-1])


def _validate_logits(op: str, x: torch.Tensor) -> None:
    checks.check_tensor(op, "logits", x)
    checks.check_last_dim_contiguous(op, "logits", x)
    if x.shape[-1] == 0:
        raise InvalidArgumentError(f"{op}: logits have an empty last dim (no tokens to choose from)")


# --------------------------------------------------------------------------- argmax

def _build_argmax(x):
    _validate_logits("argmax", x)
    return EMPTY if x.numel() == 0 else ArgmaxPlan(x)


_ARGMAX_PLANS = PlanCache(_build_argmax)


def _fake_argmax(x):
    _validate_logits("argmax", x)
    return torch.empty(x.shape[:-1], dtype=torch.int64, device=x.device)


def _argmax_into(x: torch.Tensor, plan, out: torch.Tensor) -> torch.Tensor:
    """Fill ``out`` (``x.shape[:-1].numel()`` int64 elements, contiguous) with the indices; returns ``out``."""
    if plan is EMPTY:
        return out
    if use_triton("argmax", x):
        plan(_rows2d(x), out.view(-1))
    else:
        out.copy_(ref.argmax(x).view(out.shape))
    return out


@register_op("argmax", fake=_fake_argmax)
def _argmax(x: torch.Tensor) -> torch.Tensor:
    plan = _ARGMAX_PLANS.get(tensor_key(x), x)
    return _argmax_into(x, plan, empty(x.shape[:-1], dtype=torch.int64, device=x.device))


def _check_out(x: torch.Tensor, out: torch.Tensor) -> None:
    checks.check_tensor("argmax", "out", out, (torch.int64,), min_ndim=0)
    checks.check_same_device("argmax", "logits", x, out=out)
    if out.numel() != x.numel() // max(x.shape[-1], 1) or not out.is_contiguous():
        raise InvalidArgumentError(f"argmax: out must be a contiguous int64 tensor of {tuple(x.shape[:-1])} "
                                   f"elements, got shape {tuple(out.shape)}")


def _fake_argmax_out(x, out):
    _validate_logits("argmax", x)
    _check_out(x, out)


@register_op("argmax_out", fake=_fake_argmax_out, mutates_args=("out",))
def _argmax_out(x: torch.Tensor, out: torch.Tensor) -> None:
    plan = _ARGMAX_PLANS.get(tensor_key(x), x)
    _check_out(x, out)
    _argmax_into(x, plan, out)


def argmax(logits: torch.Tensor, axis: int = -1, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Index of the largest value along the last axis (greedy decoding), on the device.

    Ties pick the lowest index; NaN is treated as ``-inf``.

    Args:
        logits: ``[..., V]`` float32/float16/bfloat16, unit-stride last dim.
        axis: must be the last axis (-1 or ``logits.dim() - 1``).
        out: optional contiguous int64 tensor with ``logits.shape[:-1].numel()`` elements to write the
            indices into (e.g. a decode loop's token buffer, which then needs no copy).

    Returns:
        int64 ``logits.shape[:-1]`` (``out`` when given).

    Raises:
        InvalidArgumentError, UnsupportedDTypeError.

    Example:
        >>> next_token = mn.argmax(logits[:, -1])     # [B]
    """
    if isinstance(logits, torch.Tensor) and axis not in (-1, logits.dim() - 1):
        raise InvalidArgumentError(f"argmax: only the last axis is supported, got axis={axis}")
    if out is not None:
        _argmax_out(logits, out)
        return out
    return _argmax(logits)


# --------------------------------------------------------------------------- sample

def _check_params(temperature: float, top_k: int, top_p: float, min_p: float) -> None:
    op = "sample"
    checks.check_finite_float(op, "temperature", temperature)
    if temperature < 0:
        raise InvalidArgumentError(f"sample: temperature must be >= 0, got {temperature}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise InvalidArgumentError(f"sample: top_k must be an int >= 0 (0 = off), got {top_k!r}")
    checks.check_finite_float(op, "top_p", top_p)
    if not 0.0 < top_p <= 1.0:
        raise InvalidArgumentError(f"sample: top_p must be in (0, 1] (1 = off), got {top_p}")
    checks.check_finite_float(op, "min_p", min_p)
    if not 0.0 <= min_p <= 1.0:
        raise InvalidArgumentError(f"sample: min_p must be in [0, 1] (0 = off), got {min_p}")


def _validate_sample(x, seed, temperature, top_k, top_p, min_p):
    _validate_logits("sample", x)
    _check_params(temperature, top_k, top_p, min_p)
    checks.check_tensor("sample", "seed", seed, dtypes=checks.INT_DTYPES, min_ndim=0)
    checks.check_same_device("sample", "logits", x, seed=seed)
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    if seed.dim() > 1 or seed.numel() not in (1, rows):
        raise InvalidArgumentError(f"sample: seed must hold 1 value or one per row ({rows}), got shape "
                                   f"{tuple(seed.shape)}")
    if seed.dim() == 1 and seed.numel() > 1 and seed.stride(0) != 1:
        raise InvalidArgumentError("sample: seed must be contiguous")


def _build_sample(x, seed, temperature, top_k, top_p, min_p):
    _validate_sample(x, seed, temperature, top_k, top_p, min_p)
    if x.numel() == 0:
        return EMPTY
    return SamplePlan(x, top_k, top_p, min_p), ArgmaxPlan(x)


_SAMPLE_PLANS = PlanCache(_build_sample)


def _fake_sample(x, seed, temperature, top_k, top_p, min_p):
    _validate_sample(x, seed, temperature, top_k, top_p, min_p)
    return torch.empty(x.shape[:-1], dtype=torch.int64, device=x.device)


@register_op("sample", fake=_fake_sample)
def _sample(x: torch.Tensor, seed: torch.Tensor, temperature: float, top_k: int, top_p: float,
            min_p: float) -> torch.Tensor:
    plan = _SAMPLE_PLANS.get((tensor_key(x), tensor_key(seed), temperature, top_k, top_p, min_p), x, seed,
                             temperature, top_k, top_p, min_p)
    if plan is EMPTY:
        return empty(x.shape[:-1], dtype=torch.int64, device=x.device)
    if not use_triton("sample", x):
        return ref.sample(x, seed, temperature, top_k, top_p, min_p)
    sample_plan, argmax_plan = plan
    x2 = _rows2d(x)
    if temperature == 0.0:
        return argmax_plan(x2)
    inv_temp = float(torch.tensor(1.0 / temperature, dtype=torch.float32))
    log_min_p = math.log(min_p) if min_p > 0 else 0.0
    return sample_plan(x2, seed.reshape(-1), top_k, inv_temp, top_p, log_min_p)


def sample(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    seed: Union[torch.Tensor, int, None] = None,
) -> torch.Tensor:
    """Draw one token per row from ``softmax(logits / temperature)``, filtered, on the device.

    Filters, in this order, on the temperature-scaled distribution:
    ``top_k`` keeps the tokens whose logit is >= the k-th largest (ties at the
    boundary are all kept); ``top_p`` (nucleus) then keeps the smallest set of
    the most likely survivors whose probability mass, renormalized over the
    top-k survivors, reaches ``top_p``; ``min_p`` keeps tokens with probability
    >= ``min_p`` x the most likely one's. The token is drawn from the
    renormalized survivors with the Gumbel-max trick: random numbers come from
    a counter-based hash of (seed, row, token id), so the same seed gives the
    same tokens, with no host sync and no generator state (CUDA-graph safe).

    Args:
        logits: ``[..., V]`` float32/float16/bfloat16, unit-stride last dim.
        temperature: >= 0; 0 is greedy (:func:`argmax`).
        top_k: 0 (off) or the number of most likely tokens kept.
        top_p: in (0, 1]; 1 is off.
        min_p: in [0, 1]; 0 is off.
        seed: int64/int32 tensor with 1 element or one per row, on the logits'
            device (advance it in place between steps); a Python int is
            converted (not graph-capturable); None draws one from torch's RNG.

    Returns:
        int64 ``logits.shape[:-1]``.

    Raises:
        InvalidArgumentError: bad parameter values or seed shape.
        UnsupportedDTypeError, DeviceMismatchError.

    Example:
        >>> seed = torch.tensor([42], device="cuda")
        >>> tok = mn.sample(logits, temperature=0.7, top_p=0.9, seed=seed); seed += 1
    """
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    if isinstance(seed, int) and not isinstance(seed, bool):
        device = logits.device if isinstance(logits, torch.Tensor) else "cpu"
        seed = torch.tensor([seed], dtype=torch.int64, device=device)
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise InvalidArgumentError(f"sample: top_k must be an int >= 0 (0 = off), got {top_k!r}")
    for name, value in (("temperature", temperature), ("top_p", top_p), ("min_p", min_p)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError(f"sample: {name} must be a number, got {value!r}")
    return _sample(logits, seed, float(temperature), int(top_k), float(top_p), float(min_p))
