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
