"""Many-row quantized matmuls through chunked dequantization + cuBLAS (``qmm.ChunkedPrefill``): the chunk rule,
and results split over several chunks against the fp64 oracle (MLX affine and GGUF)."""

import numpy as np
import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar, randn, spy_plans
from mlx_native.ops.quant import qmm, ref
from test_ggml import crafted_blocks, gguf_values


def test_chunk_rows_fill_the_gpu():
    """L2-sized chunks (32 MB) unless the GEMM of one chunk would not give every SM two 128 x 128 tiles; then
    larger ones, up to 128 MB, split evenly in multiples of 64 rows."""
    sms = 132
    assert qmm.chunk_rows(4096, 14336, 2 * 4096, sms) == 3584  # 32 MB would be 4096 rows: 4 equal chunks
    assert qmm.chunk_rows(1024, 4096, 2 * 14336, sms) == 4096  # 1152-row chunks gave 72 tiles: one chunk
    assert qmm.chunk_rows(1024, 128256, 2 * 4096, sms) == 4160  # 8 x 33 tiles per chunk, 31 chunks
    assert qmm.chunk_rows(128, 14336, 2 * 14336, sms) == 3584  # 128 MB holds 4681 rows: 4 chunks of 3584
    assert qmm.chunk_rows(128, 40, 2 * 64, sms) == 40


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 64 rows: a few chunks even at interpreter sizes; yields the ChunkedPrefill plans built."""
    monkeypatch.setattr(qmm, "CHUNK_WAVES", 0)
    monkeypatch.setattr(qmm, "CHUNK_BYTES", 64 * 256 * 2)
    built = spy_plans(monkeypatch, qmm.ChunkedPrefill)
    yield built
    assert [p.chunk for p in built] == [64]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_chunked_prefill_affine(device, small_chunks, dtype):
    m, n, k, gs = 130, 200, 256, 64  # 4 chunks of 64, 64, 64, 8 rows -> 4 x 50
    w = randn(n, k, dtype=dtype, scale=0.05)
    wq, s, b = mn.quantize(w, gs, 4)
    x = randn(m, k, dtype=dtype)
    out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs)
    w64 = ref.dequantize(wq, s, b, gs, 4, dtype=torch.float64, compute=torch.float64)
    assert_error_bar(out.cpu(), x.double() @ w64.T, x @ ref.dequantize(wq, s, b, gs, 4, dtype=dtype).T)


def test_chunked_prefill_gguf(device, small_chunks):
    m, n, k = 129, 136, 256
    raw = crafted_blocks("Q4_K", n * k // 256, np.random.default_rng(0))
    x = randn(m, k, dtype=torch.bfloat16)
    out = mn.ggml_matmul(x.to(device), torch.from_numpy(raw).to(device), "Q4_K", (n, k))
    w64 = torch.from_numpy(gguf_values(raw, "Q4_K", (n, k))).double()
    assert_error_bar(out.cpu(), x.double() @ w64.T, x @ w64.to(torch.bfloat16).T)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["affine", "Q4_0"])
def test_gpu_chunked_prefill_overlap(monkeypatch, fmt):
    """The dequantization of chunk i + 1 on a side stream while chunk i multiplies (two workspaces): equal to the
    serial chunks bit for bit (same kernels, same GEMM shapes), at the Llama-3-8B up-projection size (4 chunks),
    called back to back without a sync (a workspace refilled before its GEMM read it would differ), and replayed
    from a CUDA graph (the side stream forks from and joins the capturing stream)."""
    m, k, n = 1024, 4096, 14336
    x = randn(m, k, dtype=torch.bfloat16, device="cuda")
    if fmt == "affine":
        w = mn.quantize(randn(n, k, dtype=torch.bfloat16, device="cuda", scale=0.02), 64, 4)

        def run(x):
            return mn.quantized_matmul(x, *w)
    else:
        blocks = np.random.default_rng(1).integers(0, 256, (n * k // 32, 18), dtype=np.uint8)
        blocks[:, :2] = np.full((len(blocks), 1), 0.01, dtype=np.float16).view(np.uint8)  # sane block scales
        raw = torch.from_numpy(blocks.reshape(-1)).cuda()

        def run(x):
            return mn.ggml_matmul(x, raw, fmt, (n, k))
    monkeypatch.setattr(qmm, "OVERLAP", False)
    serial = run(x)
    monkeypatch.setattr(qmm, "OVERLAP", True)
    built = spy_plans(monkeypatch, qmm.ChunkedPrefill)
    outs = [run(x) for _ in range(3)]
    assert len(built) == 1 and built[0].chunk < n
    for out in outs:
        assert torch.equal(out, serial)
    static_x = x.clone()
    run(static_x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run(static_x)
    static_x.copy_(x.flip(0))
    graph.replay()
    assert torch.equal(captured, run(x.flip(0)))
