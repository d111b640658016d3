"""``kernels.launch.Launch`` refuses a launch that leaves out one of the kernel's constexprs: the compiled kernel's
C launcher takes every constexpr value, defaults included, so on the GPU such a launch fails at its first fast call
(``function takes exactly N arguments``), while the interpreter fills in the default and hides it."""

import pytest
import torch
import triton
import triton.language as tl

from mlx_native.kernels.launch import Launch, constexpr_names


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, TWICE: tl.constexpr = False):
    i = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + i, mask=i < n)
    if TWICE:
        v = v * 2
    tl.store(out_ptr + i, v, mask=i < n)


def test_constexpr_names_of_a_kernel():
    assert constexpr_names(_scale_kernel) == ["BLOCK", "TWICE"]


def test_launch_refuses_a_missing_constexpr():
    with pytest.raises(TypeError, match=r"_scale_kernel: constexprs \['TWICE'\] not given"):
        Launch(_scale_kernel, (1,), dict(BLOCK=32), num_warps=1)


def test_launch_with_every_constexpr_runs(device):
    x = torch.arange(20, dtype=torch.float32, device=device)
    out = torch.full_like(x, float("nan"))
    Launch(_scale_kernel, (1,), dict(BLOCK=32, TWICE=True), num_warps=1)(x, out, 20)
    assert torch.equal(out, 2 * x)
