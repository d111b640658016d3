"""The tensor-core decode kernel for GGUF Q6_K and 5-16 rows of x (``ops/ggml/q6k_mmv.py``), through its launch plan
(``Q6kMmvLaunch``) and through ``ggml_matmul``'s routing: ``gguf.quants`` dequantizes the oracle weight, the fp64
product of x with it is the oracle, ``x @ w.to(dtype).T`` the error bar's baseline."""

import numpy as np
import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar, randn, spy_plans
from mlx_native.ops.ggml import formats
from test_ggml import crafted_blocks, oracle_weight, plan_output, raw_tensor, rng_for
from test_ggml_q6k_mv import Q6K, byte_sweep_blocks, quantized_blocks


def _run(device, raw: np.ndarray, m: int, n: int, k: int, dtype, pad: int = 0, x=None, plan=None,
         programs_per_sm: int = 2, baseline32: bool = False):
    """``(out, oracle, baseline, plan)`` of ``m`` rows of x (the first ``k`` columns of a ``[m, k + pad]`` tensor)
    against the Q6_K rows ``raw``; ``programs_per_sm``: the plan's K split target (64: as many splits as steps allow)."""
    from mlx_native.ops.ggml import q6k_mmv

    w = oracle_weight(raw, "Q6_K", (n, k))
    if x is None:
        x = randn(m, k + pad, dtype=dtype)[:, :k]
    if plan is None:
        plan = q6k_mmv.Q6kMmvLaunch(m, n, k, dtype, x.stride(0), torch.device(device), programs_per_sm)
    return (*plan_output(device, plan, raw, w, x, baseline32), plan)


@pytest.mark.parametrize("m, n, k, dtype, pad, pps, split", [
    (5, 19, 512, torch.bfloat16, 0, 0, 1),  # four steps (half super-blocks), one ragged row tile, x tile of 8 rows
    (8, 70, 768, torch.float16, 6, 0, 1),  # rows of 3 super-blocks (their alignment alternates), row stride K + 6
    (7, 21, 256, torch.bfloat16, 0, 0, 1),  # one super-block a row
    (9, 64, 2816, torch.bfloat16, 2, 64, 4),  # x tile of 16 rows, 22 steps split 6 + 6 + 6 + 4, merged in the launch
    (16, 33, 4096, torch.float16, 0, 64, 8),  # sixteen rows, 32 steps split in eight
    (12, 40, 1536, torch.bfloat16, 3, 0, 1),  # an odd row stride: x copied to contiguous rows (read as words)
    (6, 130, 3072, torch.float16, 0, 64, 4),  # three row tiles, 24 steps split in four
])
def test_q6k_mmv_error_bar(device, m, n, k, dtype, pad, pps, split, request):
    """5-16 rows of x against quantized weights: every row within the error bar of the fp64 oracle (each weight is
    rounded twice, ``d sc`` then the product, as ``mmv``'s Q4_K tiles), with one or several loop steps, super-blocks
    at both alignments, ragged row tiles, x rows inside a wider tensor, and a K split (``pps`` 64: as far as
    ``MIN_STEPS`` allows; 0: none) merged in the launch whose counters are back at zero for a second call."""
    from test_quant import assert_merged_in_launch

    raw = quantized_blocks(n, k, rng_for(request))
    out, oracle, baseline, plan = _run(device, raw, m, n, k, dtype, pad, programs_per_sm=pps)
    assert_error_bar(out, oracle, baseline, what=f"Q6_K {m}x{n}x{k} {dtype}")
    c = plan.launch.constexprs
    assert c["MP"] == (8 if m <= 8 else 16) and c["X_F16"] == (dtype == torch.float16)
    assert c["PREFETCH"] == (split == 1 or m > 8)  # both forms of the loop run in these cases
    assert plan.ints == (m, n, k, k if pad % 2 else k + pad, k // 256 * 210, -(-k // 128 // split))
    assert plan.split == split
    if split > 1:
        assert_merged_in_launch(plan)
        out2, oracle2, baseline2, _ = _run(device, raw, m, n, k, dtype, pad, plan=plan)
        assert_error_bar(out2, oracle2, baseline2, what=f"Q6_K {m}x{n}x{k} {dtype} second call")
        assert not plan.splitk.counters.any()


@pytest.mark.parametrize("m, dtype", [(5, torch.bfloat16), (16, torch.float16)])
def test_q6k_mmv_every_byte_at_every_position(device, m, dtype, request):
    """Blocks whose bytes 0-207 run through every value at every position (256 super-blocks: every code, high pair
    and scale, in super-blocks of both alignments, whole words and joined halves): within the error bar."""
    n, k = 64, 1024
    raw = byte_sweep_blocks(n * k // 256, rng_for(request))
    out, oracle, baseline, _ = _run(device, raw, m, n, k, dtype)
    assert_error_bar(out, oracle, baseline, what=f"Q6_K byte sweep {m} rows {dtype}")


def test_q6k_mmv_rows_are_the_rows_of_x(device, request):
    """Each output row belongs to its row of x: rows that are power-of-two multiples of one another give outputs in
    the same ratios, bitwise, so a swapped or repeated row of x fails."""
    n, k = 24, 1024
    raw = quantized_blocks(n, k, rng_for(request))
    x0 = randn(1, k, dtype=torch.bfloat16)
    f = (1.0, -2.0, 0.5, 4.0, -0.25, 8.0)
    x = torch.cat([s * x0 for s in f])
    out, oracle, baseline, _ = _run(device, raw, len(f), n, k, torch.bfloat16, x=x)
    assert_error_bar(out, oracle, baseline, what="Q6_K scaled rows")
    for r, s in enumerate(f):
        assert torch.equal(out[r], (s * out[0].float()).to(torch.bfloat16)), r


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the oracle's numpy
def test_q6k_mmv_extreme_d(device, request):
    """bf16 x, fp16 ``d`` of 65504, 3e4, 1e-5, 6e-8 (subnormal), +-0, +-Inf and NaN: the outputs are non-finite
    exactly where the fp64 oracle's are, the finite ones within the error bar of the fp32 product. (With fp16 x a
    scale ``d sc`` past 65504 is Inf, as the dequantized fp16 weight ``d sc (q - 32)`` is.)"""
    n, k, m = 24, 1024, 5
    raw = crafted_blocks("Q6_K", n * k // 256, rng_for(request), extreme=True)
    d = raw.reshape(-1, Q6K.block_bytes)[:, 208:210].copy().view(np.float16)
    assert np.isinf(d).any() and np.isnan(d).any() and (np.abs(d) == 65504).any() and (d == 0).any()
    out, oracle, baseline, _ = _run(device, raw, m, n, k, torch.bfloat16, baseline32=True)
    finite = torch.isfinite(oracle)
    assert 0 < int(finite.sum()) < m * n
    assert torch.equal(torch.isfinite(out), finite)
    assert_error_bar(out, oracle, baseline, what="Q6_K extreme d")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q6k_mmv_keeps_inf_and_nan_of_x(device, dtype, request):
    """Inf / NaN in a row of x reach that row's outputs and no other's."""
    n, k, m = 16, 1024, 6
    raw = quantized_blocks(n, k, rng_for(request))
    for bad in (float("inf"), float("-inf"), float("nan")):
        x = randn(m, k, dtype=dtype)
        x[3, 700] = bad
        out, oracle, _, _ = _run(device, raw, m, n, k, dtype, x=x)
        assert not torch.isfinite(oracle[3]).any() and torch.isfinite(oracle[[0, 1, 2, 4, 5]]).all()
        assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), bad


def test_q6k_mmv_supports(monkeypatch):
    """The gate: ``ROWS_MIN`` to ``ROWS_MAX`` rows of bf16/fp16 x against Q6_K rows of whole super-blocks under
    2 GiB, while ``MLX_NATIVE_MMV`` is not off; the plan refuses rows that are not whole super-blocks."""
    import dataclasses

    from mlx_native.ops.ggml import q6k_mmv
    from mlx_native.runtime import env

    q6, bf = Q6K.id, torch.bfloat16
    nbytes = 4096 * 16 * 210
    for m in range(q6k_mmv.ROWS_MIN, q6k_mmv.ROWS_MAX + 1):
        assert q6k_mmv.supports(q6, bf, m, 4096, nbytes) and q6k_mmv.supports(q6, torch.float16, m, 4096, nbytes)
    assert not q6k_mmv.supports(q6, bf, q6k_mmv.ROWS_MIN - 1, 4096, nbytes)
    assert not q6k_mmv.supports(q6, bf, q6k_mmv.ROWS_MAX + 1, 4096, nbytes)
    assert q6k_mmv.supports(q6, bf, 8, 768, nbytes) and not q6k_mmv.supports(q6, bf, 8, 4096 + 128, nbytes)
    assert not q6k_mmv.supports(q6, torch.float32, 8, 4096, nbytes)
    assert not q6k_mmv.supports(q6, bf, 8, 4096, 2**31)
    for other in ("Q4_K", "Q5_K", "Q8_0"):
        assert not q6k_mmv.supports(formats.BY_NAME[other].id, bf, 8, 4096, nbytes)
    with pytest.raises(ValueError, match="q6k_mmv"):
        q6k_mmv.Q6kMmvLaunch(8, 64, 4096 + 128, bf, 4096 + 128, torch.device("cpu"))
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="off"))
    assert not q6k_mmv.supports(q6, bf, 8, 4096, nbytes)


@pytest.mark.parametrize("m, k, mmv, kind", [(5, 512, "on", "q6k mmv"), (16, 768, "auto", "q6k mmv"),
                                             (8, 512, "off", "streamed slices"), (12, 512, "off", "decode")])
def test_ggml_matmul_routes_q6k_rows_to_mmv(device, monkeypatch, m, k, mmv, kind, request):
    """``ggml_matmul`` sends 5-16 rows of x against Q6_K here (x a row-strided view that starts at an odd element:
    copied to aligned rows) unless ``MLX_NATIVE_MMV=off`` (then 5-8 rows run as 4-row slices, more on the tiled
    decode kernel); the result within the error bar."""
    import dataclasses

    from mlx_native.ops.ggml import kernel
    from mlx_native.runtime import env, plans

    request.addfinalizer(plans.clear_all)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv=mmv))
    built = spy_plans(monkeypatch, kernel.MatmulPlan)
    n = 24
    raw = quantized_blocks(n, k, rng_for(request))
    w = oracle_weight(raw, "Q6_K", (n, k))
    wide = randn(m, k + 66, dtype=torch.bfloat16)
    x = wide.to(device)[:, 1:k + 1]
    out = mn.ggml_matmul(x, raw_tensor(raw, device), "Q6_K", (n, k))
    assert built[0].kind == kind
    xc = wide[:, 1:k + 1]
    assert_error_bar(out.cpu(), xc.double() @ w.double().T, xc @ w.to(torch.bfloat16).T, what=f"Q6_K {m} rows")


@pytest.mark.gpu
@pytest.mark.parametrize("m", [5, 8, 16])
def test_q6k_mmv_real_sizes(device, m, request):
    """Llama-3-8B shapes (4096 x 14336, 14336 x 4096), in a CUDA graph too."""
    rng = rng_for(request)
    for n, k in ((14336, 4096), (4096, 14336)):
        raw = quantized_blocks(n, k, rng)
        out, oracle, baseline, plan = _run(device, raw, m, n, k, torch.bfloat16)
        assert_error_bar(out, oracle, baseline, what=f"Q6_K {m}x{n}x{k}")
        x = randn(m, k, dtype=torch.bfloat16, device=device)
        r = raw_tensor(raw, device)
        eager = plan(x, r).clone()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            replay = plan(x, r)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(replay, eager)
