"""The integer-dot one-row mat-vec for GGUF Q6_K weights (``ops/ggml/q6k_idot.py``): ``gguf.quants`` dequantizes
the oracle weight, the fp64 product of x with it is the oracle, ``x @ w.to(dtype).T`` the error bar's baseline.

Every loop step holds the 8 super-block alignments (``2 j`` bytes past a 16-byte boundary), so every test below
runs all eight word selections; llama.cpp-quantized blocks (``quantized_blocks``), random bytes (every code and
scale pattern, negative scales) and the byte sweep (every byte value at every position) cover the codes. The GPU
tests at real sizes, and those of x at an odd offset and of Inf / NaN in x, are ``test_ggml_q6k_mv.py``'s, for both
one-row kernels."""

import dataclasses

import numpy as np
import pytest
import torch

import mlx_native as mn
from helpers import X_RANGES, assert_error_bar, randn, spy_plans, x_of_range
from mlx_native.ops.ggml import formats
from test_ggml import crafted_blocks, force_split, oracle_weight, plan_output, raw_tensor, rng_for
from test_ggml_q6k_mv import byte_sweep_blocks, quantized_blocks

Q6K = formats.BY_NAME["Q6_K"]


def _mod():
    from mlx_native.ops.ggml import q6k_idot

    return q6k_idot


def _run(device, raw: np.ndarray, n: int, k: int, dtype, x=None, baseline32=False, **plan_args):
    """``(out, oracle, baseline, plan)`` of one row of x against the Q6_K rows ``raw`` through a ``Q6kIdotLaunch``."""
    w = oracle_weight(raw, "Q6_K", (n, k))
    x = randn(1, k, dtype=dtype) if x is None else x
    plan = _mod().Q6kIdotLaunch(n, k, dtype, torch.device(device), **plan_args)
    return (*plan_output(device, plan, raw, w, x, baseline32), plan)


@pytest.fixture
def q6k_plans(monkeypatch):
    """The Q6_K one-row plans (the integer-dot and the streamed fp32 kernel) built while the test runs; the
    integer-dot kernel takes matrices of any size."""
    from mlx_native.ops.ggml import q6k_mv
    from mlx_native.runtime import plans

    monkeypatch.setattr(_mod(), "MIN_VALUES", 0)
    yield spy_plans(monkeypatch, _mod().Q6kIdotLaunch, q6k_mv.Q6kMvLaunch)
    plans.clear_all()


@pytest.mark.parametrize("n, k, dtype", [
    (37, 2048, torch.bfloat16),  # one step, N not a multiple of the 32-row tile
    (19, 4096, torch.float16),  # two steps, split in two (merged in the launch)
    (8, 6144, torch.bfloat16),  # three steps
])
def test_q6k_idot_error_bar(device, monkeypatch, request, q6k_plans, n, k, dtype):
    """``ggml_matmul`` of one row of x against Q6_K rows of whole 2048-value steps takes the integer-dot kernel: x
    quantized to int16 per 16 values stays within the error bar, with K split as far as the steps allow; a second
    call with new x finds the split's counters rearmed."""
    from test_quant import assert_merged_in_launch

    force_split(monkeypatch, request, _mod())
    raw = quantized_blocks(n, k, rng_for(request))
    w = oracle_weight(raw, "Q6_K", (n, k))
    for _ in range(2):
        x = randn(1, k, dtype=dtype)
        out = mn.ggml_matmul(x.to(device), raw_tensor(raw, device), "Q6_K", (n, k)).cpu()
        assert_error_bar(out, x.double() @ w.double().T, x @ w.to(dtype).T, what=f"Q6_K idot {n}x{k} {dtype}")
    (plan,) = q6k_plans
    assert type(plan).__name__ == "Q6kIdotLaunch" and plan.split == k // 2048
    assert plan.launch.constexprs["EVEN_N"] == (n % plan.launch.constexprs["BN"] == 0)
    if plan.split > 1:
        assert_merged_in_launch(plan)


@pytest.mark.parametrize("blocks", ["random", "byte_sweep"])
@pytest.mark.parametrize("bn, prefetch", [(8, True), (16, True), (32, True), (64, True), (16, False), (32, False)])
def test_q6k_idot_codes_and_tiles(device, monkeypatch, request, blocks, bn, prefetch):
    """Random bytes (every code, high-pair and scale bit pattern, negative scales) and the byte sweep (every byte
    value at every position of the 8 alignments) in row tiles of 8-64 rows (1-8 rows a lane), with and without the
    register prefetch, 21 rows (ragged) of two steps (the prefetch carried from one step to the next)."""
    import types

    monkeypatch.setattr(_mod(), "device_info", lambda device: types.SimpleNamespace(sm_count=1))  # no K split
    n, k = 21, 4096
    rng = rng_for(request)
    raw = crafted_blocks("Q6_K", n * k // 256, rng) if blocks == "random" else byte_sweep_blocks(n * k // 256, rng)
    out, oracle, baseline, plan = _run(device, raw, n, k, torch.bfloat16, bn=bn, prefetch=prefetch,
                                       programs_per_sm=1)
    assert_error_bar(out, oracle, baseline, what=f"Q6_K idot {blocks} BN {bn} prefetch {prefetch}")
    c = plan.launch.constexprs
    assert (c["BN"], c["PREFETCH"], c["EVEN_N"], plan.split) == (bn, prefetch, n % bn == 0, 1)


@pytest.mark.parametrize("m, n, k, stride", [(2, 21, 2048, None), (3, 16, 4096, 4098), (4, 9, 2048, 2050)])
def test_q6k_idot_rows_of_x(device, monkeypatch, request, m, n, k, stride):
    """2-4 rows of x (contiguous or at an even row stride) stream the weights once, their codes decoded once: each row
    within the error bar of its own product; two steps split over K (merged in the launch)."""
    from test_quant import assert_merged_in_launch

    force_split(monkeypatch, request, _mod())
    raw = quantized_blocks(n, k, rng_for(request))
    x = randn(m, stride or k, dtype=torch.bfloat16)[:, :k]
    out, oracle, baseline, plan = _run(device, raw, n, k, torch.bfloat16, x=x, m=m, x_row_stride=stride)
    assert_error_bar(out, oracle, baseline, what=f"Q6_K idot {m} rows {n}x{k}")
    assert plan.launch.constexprs["MR"] == m and plan.split == k // 2048
    if plan.split > 1:
        assert_merged_in_launch(plan)


@pytest.mark.parametrize("case", X_RANGES)
def test_q6k_idot_x_ranges(device, request, case):
    """x's per-16-value int16 scale follows each group's magnitude: a 1000x outlier in some groups, values around
    1e-30, all-zero groups, and groups whose magnitudes span 2**-60..2**60."""
    n, k = 16, 2048
    raw = quantized_blocks(n, k, rng_for(request))
    x = x_of_range(case, k, 16).to(torch.bfloat16)
    out, oracle, baseline, _ = _run(device, raw, n, k, torch.bfloat16, x=x)
    assert_error_bar(out, oracle, baseline, what=case)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the oracle's numpy
def test_q6k_idot_extreme_d(device, request):
    """fp16 ``d`` of 65504, 3e4, 1e-5, 6e-8 (subnormal), +-0, +-Inf and NaN in random blocks: the outputs are
    non-finite exactly where the fp64 oracle's are, the finite ones within the error bar of the fp32 product."""
    n, k = 24, 2048
    raw = crafted_blocks("Q6_K", n * k // 256, rng_for(request), extreme=True)
    x = randn(1, k, dtype=torch.bfloat16)
    out, oracle, baseline, _ = _run(device, raw, n, k, torch.bfloat16, x=x, baseline32=True)
    finite = torch.isfinite(oracle)
    assert 0 < int(finite.sum()) < n
    assert torch.equal(torch.isfinite(out), finite)
    assert_error_bar(out, oracle, baseline, what="Q6_K idot extreme d")


def test_q6k_idot_route(device, monkeypatch, q6k_plans, request):
    """1-4 rows of bf16/fp16 x against Q6_K rows of whole steps take the integer-dot kernel (of any size here:
    ``q6k_plans``); rows of no whole step (K = 1536) and ``MLX_NATIVE_GGML_IDOT=0`` keep the streamed fp32 kernel."""
    from mlx_native.runtime import env, plans

    rng = rng_for(request)
    for m, k in ((1, 2048), (1, 1536), (2, 2048)):
        raw = quantized_blocks(8, k, rng)
        mn.ggml_matmul(randn(m, k, dtype=torch.bfloat16).to(device), raw_tensor(raw, device), "Q6_K", (8, k))
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, ggml_idot=False))
    plans.clear_all()
    mn.ggml_matmul(randn(1, 2048, dtype=torch.bfloat16).to(device), raw_tensor(quantized_blocks(8, 2048, rng), device),
                   "Q6_K", (8, 2048))
    assert [type(p).__name__ for p in q6k_plans] == ["Q6kIdotLaunch", "Q6kMvLaunch", "Q6kIdotLaunch", "Q6kMvLaunch"]


def test_q6k_idot_default_tiles(device):
    """One row: 16-row tiles where they alone fill ``PROGRAMS_PER_SM`` programs per SM, else 8-row tiles split over K
    up to that many programs; 2-4 rows: ``ROWS_BN`` rows split up to ``ROWS_PROGRAMS_PER_SM`` programs per SM."""
    from mlx_native.runtime.device import device_info

    q6k_idot, bf = _mod(), torch.bfloat16
    programs = q6k_idot.PROGRAMS_PER_SM * device_info(device).sm_count
    k = 8 * 2048  # 8 steps

    def tiles(n, m=1):
        plan = q6k_idot.Q6kIdotLaunch(n, k, bf, device, m=m)
        return plan.launch.constexprs["BN"], plan.split

    assert tiles(q6k_idot.IDOT_BN * programs) == (q6k_idot.IDOT_BN, 1)
    assert tiles(q6k_idot.IDOT_BN * (programs - 1)) == (q6k_idot.IDOT_SMALL_BN, 1)
    assert tiles(q6k_idot.IDOT_SMALL_BN * programs // 4) == (q6k_idot.IDOT_SMALL_BN, 4)
    rows_programs = q6k_idot.ROWS_PROGRAMS_PER_SM * device_info(device).sm_count
    assert tiles(q6k_idot.ROWS_BN * rows_programs // 2, m=2) == (q6k_idot.ROWS_BN, 2)


def test_q6k_idot_supports_and_bad_plans(device):
    """The gate (whole 2048-value steps, at least ``MIN_VALUES`` weights, one row, bf16/fp16 x and result, int32
    offsets, Q6_K only) and the plan's own checks of its arguments."""
    q6k_idot, bf = _mod(), torch.bfloat16

    def takes(m=1, n=14336, k=4096, x=bf, out=bf, raw_bytes=10, t=Q6K.id):
        return q6k_idot.supports(t, x, out, m, n, k, raw_bytes)

    assert takes() and takes(n=4096, k=14336, x=torch.float16, out=torch.float16) and takes(n=128256)
    assert not takes(n=4096) and not takes(n=1024)  # 4096 x 4096 and attn_v: q6k_mv is faster
    assert not takes(k=11008) and not takes(n=2**16, k=1024)  # no whole step
    assert q6k_idot.supports(Q6K.id, bf, bf, 4, 14336, 4096, 10, 4098) and not takes(m=5)
    assert not q6k_idot.supports(Q6K.id, bf, bf, 2, 14336, 4096, 10, 4097)  # odd x row stride: x is read in words
    assert not takes(out=torch.float32) and not takes(x=torch.float32, out=torch.float32)
    assert not takes(raw_bytes=2**31) and not takes(t=formats.BY_NAME["Q4_K"].id)
    with pytest.raises(ValueError, match="q6k_idot"):
        q6k_idot.Q6kIdotLaunch(8, 1536, bf, torch.device(device))
    with pytest.raises(ValueError, match="q6k_idot"):
        q6k_idot.Q6kIdotLaunch(8, 2048, bf, torch.device(device), bn=24)
