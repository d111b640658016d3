"""Backend choice: Triton kernel or pure-PyTorch reference, per call.

``auto`` (the default): CUDA tensors run the Triton kernels; CPU tensors run
the reference, or the Triton kernels through Triton's interpreter when
``TRITON_INTERPRET=1``. ``reference`` forces the reference on any device;
``triton`` forces the kernels (CPU tensors then need ``TRITON_INTERPRET=1``).
The environment sets the default; :func:`use_backend` overrides it for a block.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from ..errors import BackendError, ConfigError
from . import env

_override: str | None = None


def current_backend() -> str:
    """The backend in force: "auto", "reference" or "triton"."""
    return _override if _override is not None else env.settings.backend


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run the block with backend ``name`` ("auto", "reference" or "triton").

    Example:
        >>> with mn.use_backend("reference"):
        ...     y = mn.rms_norm(x, w)
    """
    global _override
    if name not in env.BACKENDS:
        raise ConfigError(f"use_backend: unknown backend {name!r}; expected one of {', '.join(env.BACKENDS)}")
    previous, _override = _override, name
    try:
        yield
    finally:
        _override = previous


def use_triton(op: str, x: torch.Tensor) -> bool:
    """True when ``op`` on tensor ``x`` should run its Triton kernel."""
    backend = _override or env.settings.backend  # current_backend() inlined: this runs on every eager call
    if backend == "reference":
        return False
    if x.is_cuda:
        return True
    if env.settings.triton_interpret:
        return True
    if backend == "triton":
        raise BackendError(
            f"{op}: backend 'triton' needs CUDA tensors, or TRITON_INTERPRET=1 for CPU tensors; "
            f"got a tensor on {x.device}"
        )
    return False
