"""On the GPU: every op under torch.compile(fullgraph=True) with inductor, inside CUDA-graph
capture, and through opcheck with CUDA tensors."""

import pytest
import torch

import mlx_native as mn
from op_cases import CASE_IDS, CASES
from test_runtime import _captured_op_calls

pytestmark = pytest.mark.gpu


def _close(a, b):
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            _close(x, y)
    else:
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,fn,make", CASES, ids=CASE_IDS)
def test_inductor_fullgraph(name, fn, make):
    args = make("cuda")
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)
    _close(compiled(*args), fn(*args))


@pytest.mark.parametrize("name,fn,make", CASES, ids=CASE_IDS)
def test_cuda_graph_capture_and_replay(name, fn, make):
    static = make("cuda")
    fn(*static)  # compile the kernels outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*static)
    fresh = make("cuda")
    for s, f in zip(static, fresh):
        s.copy_(f)
    graph.replay()
    torch.cuda.synchronize()
    _close(out, fn(*fresh))


@pytest.mark.parametrize("name,fn,make", CASES, ids=CASE_IDS)
def test_opcheck_cuda(name, fn, make):
    for op, args in _captured_op_calls(fn, make("cuda")):
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("name,fn,make", CASES, ids=CASE_IDS)
def test_repeated_calls_use_the_fast_launch(name, fn, make):
    """After a plan's first call, launches bypass Triton's launcher: results must stay exact."""
    for _ in range(3):
        args = make("cuda")
        got = fn(*args)
        with mn.use_backend("reference"):
            expected = fn(*args)
        _close_lowp(got, expected)


def _close_lowp(a, b):
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            _close_lowp(x, y)
    else:
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2, equal_nan=True)


def test_fast_launch_respects_pointer_alignment():
    """Same plan (shapes/strides), different 16-byte alignment: Triton compiles separate variants."""
    base = torch.randn(64, 2 * 1024 + 8, device="cuda", dtype=torch.bfloat16)
    for shift in (0, 1, 0, 3, 1):  # aligned, misaligned, back again...
        g = base[:, shift:shift + 1024]
        u = base[:, 1024 + shift:2048 + shift]
        out = mn.silu_mul(g, u)
        expected = (torch.nn.functional.silu(g.float()) * u.float()).to(g.dtype)
        torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)
