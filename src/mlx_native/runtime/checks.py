"""Argument validation shared by all ops.

Each check raises a typed error whose message starts with the op name and
names the argument. They read only tensor metadata (no device sync), so they
are safe inside CUDA-graph capture and on fake tensors.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..errors import DeviceMismatchError, InvalidArgumentError, UnsupportedDTypeError

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INT_DTYPES = (torch.int32, torch.int64)

_DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float64: "float64",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def check_tensor(
    op: str, name: str, t: object, dtypes: Sequence[torch.dtype] = FLOAT_DTYPES, min_ndim: int = 1
) -> torch.Tensor:
    """``t`` is a tensor of one of ``dtypes`` with at least ``min_ndim`` dims."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        allowed = ", ".join(dtype_name(d) for d in dtypes)
        raise UnsupportedDTypeError(f"{op}: {name} has dtype {dtype_name(t.dtype)}; supported: {allowed}")
    if t.dim() < min_ndim:
        raise InvalidArgumentError(f"{op}: {name} must have at least {min_ndim} dims, got shape {tuple(t.shape)}")
    return t


def check_same_device(op: str, ref_name: str, ref: torch.Tensor, **others: torch.Tensor | None) -> None:
    """All ``others`` (None skipped) live on ``ref``'s device."""
    for name, t in others.items():
        if t is not None and t.device != ref.device:
            raise DeviceMismatchError(f"{op}: {name} is on {t.device} but {ref_name} is on {ref.device}")


def check_same_dtype(op: str, ref_name: str, ref: torch.Tensor, **others: torch.Tensor | None) -> None:
    """All ``others`` (None skipped) have ``ref``'s dtype."""
    for name, t in others.items():
        if t is not None and t.dtype != ref.dtype:
            raise UnsupportedDTypeError(
                f"{op}: {name} has dtype {dtype_name(t.dtype)} but {ref_name} has {dtype_name(ref.dtype)}"
            )


def check_same_shape(op: str, ref_name: str, ref: torch.Tensor, **others: torch.Tensor) -> None:
    for name, t in others.items():
        if t.shape != ref.shape:
            raise InvalidArgumentError(
                f"{op}: {name} has shape {tuple(t.shape)} but {ref_name} has shape {tuple(ref.shape)}"
            )


def check_last_dim_contiguous(op: str, name: str, t: torch.Tensor) -> None:
    """The last dim has stride 1 (rows may be strided)."""
    if t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise InvalidArgumentError(
            f"{op}: {name} must have a contiguous last dim (stride 1), got strides {tuple(t.stride())}"
        )


def check_vector(op: str, name: str, t: torch.Tensor, length: int, what: str) -> None:
    """``t`` is 1-D with ``length`` elements (``what`` says where the length comes from)."""
    if t.dim() != 1 or t.shape[0] != length:
        raise InvalidArgumentError(
            f"{op}: {name} has shape {tuple(t.shape)}, expected ({length},) ({what})"
        )


def check_weight(op: str, name: str, w: torch.Tensor, x: torch.Tensor, length: int, what: str) -> None:
    """A float ``[length]`` parameter vector on ``x``'s device (norm weights)."""
    check_tensor(op, name, w)
    check_same_device(op, "x", x, **{name: w})
    check_vector(op, name, w, length, what)


def check_positive(op: str, name: str, value: float) -> None:
    if not value > 0:  # also rejects NaN
        raise InvalidArgumentError(f"{op}: {name} must be > 0, got {value}")


def check_finite_float(op: str, name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")):
        raise InvalidArgumentError(f"{op}: {name} must be a finite number, got {value!r}")


def check_axis(op: str, axis: int, ndim: int) -> int:
    """Normalize ``axis`` for a tensor of ``ndim`` dims (negative allowed)."""
    if not -ndim <= axis < ndim:
        raise InvalidArgumentError(f"{op}: axis {axis} is out of range for a tensor with {ndim} dims")
    return axis % ndim


def check_index_range(op: str, name: str, idx: torch.Tensor, count: int, what: str) -> None:
    """Indices (row ids, expert ids, matrix indices) must lie in ``[0, count)``; the message names ``count``
    ``what`` ("rows", "experts", ...).

    Checked before launch whenever the indices are host-visible (CPU tensors): reading CUDA indices would force
    a host sync, which no call path may do. The kernels never read outside their tables for out-of-range
    indices (their rows come out NaN).
    """
    if idx.device.type == "cpu" and idx.numel():
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= count:
            raise InvalidArgumentError(f"{op}: {name} holds {lo if lo < 0 else hi}, out of range for {count} {what}")
