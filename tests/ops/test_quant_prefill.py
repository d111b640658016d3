"""Many-row quantized matmuls through chunked dequantization + cuBLAS (``qmm.ChunkedPrefill``): the chunk rule,
and results split over several chunks against the fp64 oracle (MLX affine and GGUF)."""

import numpy as np
import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar, randn, spy_plans
from mlx_native.ops.quant import qmm, ref
from test_ggml import crafted_blocks, gguf_values


def test_chunk_rows_widest_chunks():
    """The fewest equal chunks of at most 128 MB of dequantized rows, in multiples of 64 rows (the GEMM of the
    widest chunk ran fastest: 4 x 3584 rows of K 4096 ran 0.67-0.69x cuBLAS at M = 1024, one chunk 0.73x)."""
    assert qmm.chunk_rows(14336, 2 * 4096) == 14336  # 117 MB: one chunk
    assert qmm.chunk_rows(4096, 2 * 14336) == 4096
    assert qmm.chunk_rows(14336, 2 * 14336) == 3584  # 128 MB holds 4681 rows: 4 chunks of 3584
    assert qmm.chunk_rows(128256, 2 * 4096) == 16064  # an LM head: 8 chunks
    assert qmm.chunk_rows(40, 2 * 64) == 40


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 64 rows: a few chunks even at interpreter sizes; yields the ChunkedPrefill plans built."""
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


@pytest.mark.parametrize("fmt, m", [("affine8", 17), ("Q6_K", 65), ("Q4_0", 65), ("Q8_0", 96)])
def test_rows_past_decode_take_the_chunks(device, monkeypatch, fmt, m):
    """From 17 rows (``qmm.PREFILL_CUBLAS_MIN_M``) the formats and row counts the tensor-core decode kernel does not
    take (``mmv.MID_ROWS_MAX``: here MLX 8-bit and Q4_0 past 64 rows; Q6_K and Q8_0 past ``block_mmv``'s 64) run
    chunked dequantize + cuBLAS, not the tiled kernel (which measured 1.4-80x slower there on the H100), within the
    error bar."""
    from mlx_native.ops.quant import mmv

    built = spy_plans(monkeypatch, qmm.ChunkedPrefill, mmv.MmvLaunch)
    n, k = 40, 256
    x = randn(m, k, dtype=torch.bfloat16)
    if fmt == "affine8":
        wq, s, b = mn.quantize(randn(n, k, dtype=torch.bfloat16, scale=0.05), 64, 8)
        out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), bits=8)
        w64 = ref.dequantize(wq, s, b, 64, 8, dtype=torch.float64, compute=torch.float64)
    else:
        raw = crafted_blocks(fmt, n * k // (256 if fmt.endswith("_K") else 32), np.random.default_rng(1))
        out = mn.ggml_matmul(x.to(device), torch.from_numpy(raw).to(device), fmt, (n, k))
        w64 = torch.from_numpy(gguf_values(raw, fmt, (n, k))).double()
    assert [type(p) for p in built] == [qmm.ChunkedPrefill]
    assert_error_bar(out.cpu(), x.double() @ w64.T, x @ w64.to(torch.bfloat16).T)
