"""On the GPU: the prepared launch's fast path (Triton's C launcher called with raw pointers) and its
fallback for misaligned pointers and installed launch hooks."""

import pytest
import torch
import triton
import triton.language as tl

from mlx_native.kernels import launch as launch_mod
from mlx_native.kernels.launch import Launch

pytestmark = pytest.mark.gpu


@triton.jit
def _axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=ok).to(tl.float32)
    tl.store(out_ptr + offs, (alpha * x + y).to(out_ptr.dtype.element_ty), mask=ok)


def _fast_path_expected() -> bool:
    from triton.backends.nvidia import driver

    return getattr(driver, "_BASE_ARGS_FORMAT", None) == launch_mod._C_LAUNCHER_HEAD


def _run(launch, x, y, alpha):
    out = torch.full_like(x, float("nan"))
    launch(x, y, out, x.numel(), alpha)
    return out


def test_fast_path_results_and_fallbacks():
    n = 1000
    base = torch.randn(n + 8, device="cuda")
    y = torch.randn(n, device="cuda")
    launch = Launch(_axpy_kernel, (triton.cdiv(n, 256),), dict(BLOCK=256), num_warps=4)
    x = base[:n]
    torch.testing.assert_close(_run(launch, x, y, 2.0), 2.0 * x + y)  # compiles
    if _fast_path_expected():
        assert launch.fast is not None
    for alpha in (0.5, -3.0):  # the fast path, a new scalar each call
        torch.testing.assert_close(_run(launch, x, y, alpha), alpha * x + y)
    odd = base[1:n + 1]  # 4-byte offset: the general path compiles the misaligned variant
    torch.testing.assert_close(_run(launch, odd, y, 1.5), 1.5 * odd + y)
    assert len(launch.compiled) == 2
    torch.testing.assert_close(_run(launch, x, y, 4.0), 4.0 * x + y)  # back to the fast path


def test_fast_path_yields_to_launch_hooks():
    """An installed launch hook sees every launch: the fast path (when this Triton has it) steps aside."""
    n = 512
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    launch = Launch(_axpy_kernel, (2,), dict(BLOCK=256), num_warps=4)
    _run(launch, x, y, 1.0)
    seen = []

    def hook(metadata):
        seen.append(metadata)

    chain = launch_mod._knobs.runtime.launch_enter_hook
    chain.add(hook)
    try:
        torch.testing.assert_close(_run(launch, x, y, 3.0), 3.0 * x + y)
    finally:
        chain.remove(hook)
    assert len(seen) == 1


def test_fast_path_under_cuda_graph_capture():
    n = 4096
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    launch = Launch(_axpy_kernel, (n // 256,), dict(BLOCK=256), num_warps=4)
    launch(x, y, out, n, 1.0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch(x, y, out, n, 2.0)
    x.copy_(torch.randn(n, device="cuda"))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2.0 * x + y)
