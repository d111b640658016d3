"""Shared test helpers: the flash-attention style error bar, random inputs."""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import torch

import mlx_native as mn

LOW_PRECISION = (torch.float16, torch.bfloat16)
ALL_FLOAT = (torch.float32, torch.float16, torch.bfloat16)


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def assert_error_bar(
    out: torch.Tensor,
    oracle: torch.Tensor,
    baseline: torch.Tensor,
    *,
    factor: float = 2.0,
    atol: float | None = None,
    what: str = "",
) -> None:
    """Kernel error vs the fp64 oracle is at most ``factor`` x the error of
    ``baseline`` (the same math done by PyTorch in the low dtype) plus ``atol``.

    ``atol`` defaults to one ulp of ``out``'s dtype at the oracle's largest
    magnitude. NaN/inf in ``out`` where the oracle is finite always fails
    (this is what catches unwritten, NaN-prefilled elements).
    """
    assert out.shape == oracle.shape, f"{what}: shape {tuple(out.shape)} != {tuple(oracle.shape)}"
    finite = torch.isfinite(oracle)
    bad = ~torch.isfinite(out.double()) & finite
    assert not bad.any(), f"{what}: {int(bad.sum())} non-finite outputs (first at {bad.nonzero()[0].tolist()})"
    if atol is None:
        scale = oracle[finite].abs().max().item() if finite.any() else 1.0
        atol = torch.finfo(out.dtype).eps * max(scale, 1e-6)
    err = max_err(out[finite], oracle[finite])
    base = max_err(baseline[finite], oracle[finite])
    assert err <= factor * base + atol, f"{what}: error {err:.3e} > {factor} x baseline {base:.3e} + atol {atol:.3e}"


def spy_plans(monkeypatch, *classes) -> list:
    """The objects of ``classes`` (launch plans) built from now until the test ends, in build order;
    clears the plan caches so a cached plan cannot hide a build."""
    from mlx_native.runtime import plans

    built = []
    for cls in classes:
        def spy(self, *args, _init=cls.__init__, **kwargs):
            _init(self, *args, **kwargs)
            built.append(self)

        monkeypatch.setattr(cls, "__init__", spy)
    plans.clear_all()
    return built


def randn(*shape: int, dtype=torch.float32, device="cpu", scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, dtype=torch.float32) * scale).to(dtype=dtype, device=device)


X_RANGES = ("outliers", "tiny", "zero_chunks", "wide_range")


def x_of_range(case: str, k: int, chunk: int, tiny: float = 1e-30) -> torch.Tensor:
    """One fp32 row of x ``[1, k]`` for the integer-dot kernels' x-quantization tests (their int16 scale follows
    each ``chunk`` values' magnitude): ``outliers`` (every 97th value 1000x), ``tiny`` (all times ``tiny``),
    ``zero_chunks`` (every third chunk 0) or ``wide_range`` (chunk magnitudes across 2**-60..2**60)."""
    x = randn(1, k, dtype=torch.float32)
    if case == "outliers":
        x[0, ::97] *= 1000.0
    elif case == "tiny":
        x *= tiny
    elif case == "zero_chunks":
        x.view(-1, chunk)[::3] = 0.0
    elif case == "wide_range":
        x *= torch.exp2(torch.randint(-60, 61, (k // chunk, 1)).float()).repeat_interleave(chunk, 0).view(1, k)
    else:
        raise ValueError(case)
    return x


def row_strided(t: torch.Tensor, device="cpu") -> torch.Tensor:
    """``t`` on ``device`` as a view with twice its row stride (the last dim contiguous), garbage in the gaps."""
    return torch.cat([t, torch.full_like(t, 7)], dim=-1).to(device)[..., : t.shape[-1]]


@contextlib.contextmanager
def reference_backend() -> Iterator[None]:
    with mn.use_backend("reference"):
        yield


def assert_agrees_with(ours: torch.Tensor, theirs: torch.Tensor, oracle: torch.Tensor, *, what: str = "") -> None:
    """Agreement with a third-party implementation (MLX, gguf, transformers).

    Ours is at least as accurate as theirs against the fp64 oracle (within the
    2x error bar), and the two differ by no more than theirs' own error plus
    a few ulps: a different convention (offset, pairing, scaling) fails.
    """
    theirs = theirs.to(oracle.device)
    assert_error_bar(ours, oracle, theirs, what=what)
    scale = oracle.abs().max().item() if oracle.numel() else 1.0
    tol = 2 * max_err(theirs, oracle) + 4 * torch.finfo(ours.dtype).eps * max(scale, 1e-6)
    diff = max_err(ours, theirs)
    assert diff <= tol, f"{what}: differs from the third party by {diff:.3e} > {tol:.3e}"


def mlx_array(t: torch.Tensor):
    """A torch float tensor as an MLX array of the same dtype (CPU)."""
    import mlx.core as mx  # here, not at the top: GPU runs of tests without MLX oracles need no mlx wheel

    mx_dtype = {torch.float32: mx.float32, torch.float16: mx.float16, torch.bfloat16: mx.bfloat16}[t.dtype]
    return mx.array(t.detach().cpu().float().numpy()).astype(mx_dtype)


def from_mlx(a) -> torch.Tensor:
    """An MLX float array as a float64 torch tensor."""
    import mlx.core as mx

    return torch.from_numpy(np.array(a.astype(mx.float32))).double()
