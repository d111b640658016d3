"""The streamed one-row mat-vec of MLX affine 3-, 5- and 6-bit weights (ops/quant/affine_mv_odd.py), called
directly: fp64 error bars and agreement with MLX's ``quantized_matmul`` for every bit width and group size,
bf16/fp16 x, ragged row tiles, one- and multi-step rows, a K split merged in the launch, scale dtypes,
Inf/NaN scales and x, the tile knobs, and the ``supports`` gate."""

import dataclasses
import types

import mlx.core as mx
import pytest
import torch

import test_quant
from helpers import assert_agrees_with, assert_error_bar, from_mlx, mlx_array, randn
from mlx_native.ops.quant import affine_mv_odd as odd
from mlx_native.runtime import env
from test_quant import assert_merged_in_launch, dequant64, lowp_qmm, mx_u32, qweight

splits_outer = test_quant.splits_outer  # the fixture: a K split's programs run split-major under the interpreter


@pytest.fixture
def one_sm(monkeypatch):
    """One SM: no K split from the CPU's core count (programs_per_sm=1 asks for one program per row tile)."""
    monkeypatch.setattr(odd, "device_info", lambda device: types.SimpleNamespace(sm_count=1))


def _plan(device, n, k, gs, bits, out_dtype, **knobs):
    return odd.AffineOddMvLaunch(n, k, gs, bits, out_dtype, torch.device(device), **knobs)


def _run(device, plan, x, wq, s, b):
    return plan(x.to(device), wq.view(torch.int32).to(device), s.to(device), b.to(device)).cpu()


def _check(device, n, k, gs, bits, dtype, s_dtype=None, mlx=True, **knobs):
    """One row of x against a random ``n x k`` weight: within the error bar of the fp64 oracle, and (``mlx``)
    agreeing with MLX; returns the plan."""
    wq, s, b = qweight(n, k, gs, bits, dtype)
    if s_dtype is not None:
        s, b = s.to(s_dtype), b.to(s_dtype)
    out_dtype = torch.promote_types(dtype, s.dtype)  # MLX's promotion (bf16 x, fp32 scales: fp32)
    x = randn(1, k, dtype=dtype)
    plan = _plan(device, n, k, gs, bits, out_dtype, **knobs)
    out = _run(device, plan, x, wq, s, b)
    assert out.shape == (1, n) and out.dtype == out_dtype
    oracle = x.double() @ dequant64(wq, s, b, gs, bits).T
    what = f"{bits}-bit g{gs} {n}x{k} {dtype} scales {s.dtype}"
    assert_error_bar(out, oracle, lowp_qmm(x, wq, s, b, gs, bits), what=what)
    if mlx:
        theirs = from_mlx(mx.quantized_matmul(mlx_array(x), mx_u32(wq), mlx_array(s), mlx_array(b), transpose=True,
                                              group_size=gs, bits=bits))
        assert_agrees_with(out, theirs, oracle, what=what + " vs MLX")
    return plan


# n, k: rows of 1-4 steps of 8-32 units, tiles ragged or whole (32-unit steps: 4 warps x RT rows, 16 / 32 for
# RT 4 / 8; 16- and 8-unit steps: 2x and 4x that); rows whose dividing step is 8 units take 32-unit steps and a
# partial one
SHAPES = [
    (20, 1024),  # one 32-unit step, a ragged second tile
    (64, 2048),  # two steps (one two-step iteration), whole tiles
    (24, 3072),  # three steps: the second step of the last iteration skipped
    (70, 768),  # three 8-unit steps, ragged
    (40, 512),  # one 16-unit step, ragged
    (32, 4096),  # four steps, whole tiles
    (20, 1280),  # one 32-unit step and a partial one of 8
    (13, 2304),  # two steps (one two-step iteration) and a partial one of 8
    (9, 1792),  # one step and a partial one of 24
]
CASES = [(bits, gs, dtype) for bits in (3, 5, 6) for gs in (32, 64, 128) for dtype in (torch.bfloat16, torch.float16)]


@pytest.mark.usefixtures("one_sm")
@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{b}bit-g{g}-{str(d)[6:]}" for b, g, d in CASES])
def test_odd_bits_matvec(device, case):
    """Every bit width, group size and x dtype (a shape each, rotating over ragged and whole tiles and 1-4
    steps), unsplit: within the error bar of the fp64 oracle and agreeing with MLX."""
    bits, gs, dtype = CASES[case]
    n, k = SHAPES[case % len(SHAPES)]
    plan = _check(device, n, k, gs, bits, dtype, programs_per_sm=1)
    assert plan.split == 1 and plan.launch.constexprs["EVEN_N"] == (n % plan.launch.constexprs["BN"] == 0)
    assert plan.launch.constexprs["PAIRS"] == (bits == 6)


@pytest.mark.usefixtures("splits_outer")
@pytest.mark.parametrize("bits, n, k, gs, dtype", [
    (3, 20, 4096, 64, torch.bfloat16),  # 4 steps: up to 4 splits, 2 tiles
    (5, 40, 3072, 128, torch.float16),  # 3 steps: 3 splits of one step, 3 tiles (ragged)
    (6, 16, 2048, 32, torch.bfloat16),  # 2 steps: 2 splits
    (3, 20, 2304, 64, torch.bfloat16),  # 2 steps and a partial one of 8 units: 2 splits, the last one with it
])
def test_odd_bits_splitk_merged_in_launch(device, monkeypatch, bits, n, k, gs, dtype):
    """A K split (forced by asking for many programs per SM) is summed in the same launch by the last split
    to arrive: each call (new x every time) is within the error bar, the counters are back at zero, and the
    bits equal the two-launch path's (same summation order)."""
    from mlx_native.ops.quant import qmm

    monkeypatch.setattr(odd, "PROGRAMS_PER_SM", 64)
    wq, s, b = qweight(n, k, gs, bits, dtype)
    w64 = dequant64(wq, s, b, gs, bits)
    plan = _plan(device, n, k, gs, bits, dtype)
    xs = [randn(1, k, dtype=dtype) for _ in range(3)]
    fused = []
    for x in xs:
        fused.append(_run(device, plan, x, wq, s, b))
        assert_error_bar(fused[-1], x.double() @ w64.T, lowp_qmm(x, wq, s, b, gs, bits), what=f"{bits}-bit split")
        assert_merged_in_launch(plan)
    monkeypatch.setattr(qmm, "FUSED_SPLITK", False)
    two = _plan(device, n, k, gs, bits, dtype)
    assert two.split == plan.split and not two.splitk.fused
    for x, out in zip(xs, fused):
        assert torch.equal(out, _run(device, two, x, wq, s, b))


@pytest.mark.parametrize("bits, dtype, s_dtype", [
    (3, torch.bfloat16, torch.float32),  # fp32 scales: fp32 result
    (5, torch.float16, torch.float32),
    (6, torch.bfloat16, torch.float16),  # mixed half types: fp32 result
    (3, torch.float16, torch.bfloat16),
])
def test_odd_bits_scale_dtypes(device, bits, dtype, s_dtype):
    """Scales and biases of another float dtype than x, the result in MLX's promoted dtype."""
    _check(device, 24, 2048, 64, bits, dtype, s_dtype)


EXTREME = (float("inf"), float("-inf"), float("nan"), 0.0, -0.0)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the interpreter's NaN arithmetic
@pytest.mark.usefixtures("one_sm")
@pytest.mark.parametrize("bits", (3, 5, 6))
def test_odd_bits_extreme_scales(device, bits):
    """Inf / NaN / signed-zero scales (rows 0-4) and biases (rows 5-9) in one group of a row each: the outputs
    are non-finite exactly where the fp64 oracle's are (the Inf / NaN rows), and the finite ones stay within the
    error bar (whole and ragged row tiles)."""
    n, k, gs, dtype = {3: 64, 5: 40, 6: 48}[bits], 2048, 64, torch.bfloat16
    wq, s, b = qweight(n, k, gs, bits, dtype)
    for i, v in enumerate(EXTREME):
        s[i, (7 * i) % s.shape[1]] = v
        b[5 + i, (11 * i + 3) % b.shape[1]] = v
    x = randn(1, k, dtype=dtype)
    out = _run(device, _plan(device, n, k, gs, bits, dtype, programs_per_sm=1), x, wq, s, b)
    oracle = x.double() @ dequant64(wq, s, b, gs, bits).T
    assert torch.equal(torch.isfinite(oracle[0, :10]), torch.tensor([False] * 3 + [True] * 2 + [False] * 3 + [True] * 2))
    assert torch.equal(torch.isfinite(out), torch.isfinite(oracle))
    assert_error_bar(out, oracle, lowp_qmm(x, wq, s, b, gs, bits), what=f"{bits}-bit extreme scales")


def test_odd_bits_keep_inf_and_nan_of_x(device):
    """Inf / NaN in x make every output non-finite, as in the oracle."""
    n, k, gs = 16, 1024, 64
    for bits in (3, 6):
        wq, s, b = qweight(n, k, gs, bits, torch.bfloat16)
        plan = _plan(device, n, k, gs, bits, torch.bfloat16)
        for bad in (float("inf"), float("nan")):
            x = randn(1, k, dtype=torch.bfloat16)
            x[0, 77] = bad
            out = _run(device, plan, x, wq, s, b)
            oracle = x.double() @ dequant64(wq, s, b, gs, bits).T
            assert not torch.isfinite(oracle).any()
            assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), (bits, bad)


@pytest.mark.parametrize("knobs", [
    dict(prefetch=False),
    dict(fence=False),
    dict(max_t=8, rt=2),  # 8-unit steps: 16 lanes and warps on rows, 2 rows a thread
    dict(rt=8, warps=2),
    dict(max_t=16, rt=1),
], ids=str)
def test_odd_bits_knobs(device, knobs):
    """The tile knobs of the GPU sweep (no prefetch, no fence, step size, rows per thread, warps) give the same
    results."""
    for bits in (3, 5, 6):
        _check(device, 36, 2048, 64, bits, torch.bfloat16, mlx=False, **knobs)


def test_odd_bits_x_at_odd_offset(device):
    """x read as int32 words: a view of x at an odd 2-byte offset is copied first."""
    n, k, gs, bits = 16, 1024, 32, 5
    wq, s, b = qweight(n, k, gs, bits, torch.float16)
    x = randn(1, k + 1, dtype=torch.float16).to(device)[:, 1:]
    assert x.data_ptr() % 4 == 2
    out = _plan(device, n, k, gs, bits, torch.float16)(x, wq.to(device), s.to(device), b.to(device)).cpu()
    x = x.cpu()
    assert_error_bar(out, x.double() @ dequant64(wq, s, b, gs, bits).T, lowp_qmm(x, wq, s, b, gs, bits))


def test_odd_bits_gate(monkeypatch):
    """``supports``: one row of bf16/fp16 x, 3/5/6 bits, transpose, group 32/64/128, rows of whole steps of at
    least ODD_MIN_T units (or of ODD_MAX_T and a partial one), int32 word offsets, and MLX_NATIVE_AFFINE_MV on;
    ``tiling`` / ``tile_rows``."""
    ok = dict(bits=3, group_size=64, transpose=True, x_dtype=torch.bfloat16, m=1, k=4096, words=10)

    def sup(**kw):
        return odd.supports(**dict(ok, **kw))

    assert all(sup(bits=b, group_size=g, x_dtype=d) for b in (3, 5, 6) for g in (32, 64, 128)
               for d in (torch.bfloat16, torch.float16))
    assert sup(k=256) and sup(k=14336) and sup(k=11008) and sup(words=2**31 - 1)
    assert not any(sup(bits=b) for b in (2, 4, 8))
    assert not sup(transpose=False) and not sup(m=2) and not sup(m=0) and not sup(x_dtype=torch.float32)
    assert not sup(group_size=16) and not sup(words=2**31)
    assert not sup(k=96) and not sup(k=160) and not sup(k=320)  # 3, 5, 10 units: no step of 8
    assert odd.tiling(4096) == (32, 0) and odd.tiling(14336) == (32, 0) and odd.tiling(11008) == (32, 24)
    assert odd.tiling(768) == (8, 0) and odd.tiling(512) == (16, 0) and odd.tiling(320) == (0, 0)
    assert odd.tiling(4096, max_t=128) == (128, 0) and odd.tiling(14336, max_t=128) == (64, 0)
    # 16-unit steps: a partial step where they split K into one-step programs (37 steps, 112 tiles), else whole
    assert odd.tiling(18944, 3584, 132) == (32, 16) and odd.tiling(2560, 9728, 132) == (16, 0)
    # 8-unit steps kept where only the 32-unit ones would split K one step a program (5 steps over 256 tiles)
    assert odd.tiling(5376, 4096, 132) == (8, 0) and odd.tiling(11008, 4096, 132) == (32, 24)
    assert odd.tile_rows(32, 4) == 16 and odd.tile_rows(8, 4) == 64 and odd.tile_rows(128, 8) == 8
    assert odd.tile_rows(32, 2, warps=2) == 4
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_mv=False))
    assert not sup()


@pytest.mark.gpu
@pytest.mark.parametrize("bits", (3, 5, 6))
@pytest.mark.parametrize("nk", [(14336, 4096), (4096, 14336)], ids=["4096x14336", "14336x4096"])
def test_gpu_odd_bits_real_sizes(bits, nk):
    """Llama-3-8B's MLP shapes (K x N) on the GPU with the default tiles (14336 x 4096: a K split merged in the
    launch), against the fp64 oracle; a second call with new x reuses the plan."""
    n, k = nk
    wq, s, b = qweight(n, k, 64, bits, torch.bfloat16)
    w64 = dequant64(wq, s, b, 64, bits)
    plan = _plan("cuda", n, k, 64, bits, torch.bfloat16)
    for _ in range(2):
        x = randn(1, k, dtype=torch.bfloat16)
        out = _run("cuda", plan, x, wq, s, b)
        assert_error_bar(out, x.double() @ w64.T, lowp_qmm(x, wq, s, b, 64, bits), what=f"{bits}-bit {k}x{n}")


@pytest.mark.parametrize("bits", [3, 5, 6])
def test_quantized_matmul_routes_odd_bits_here(device, monkeypatch, bits):
    """``mn.quantized_matmul`` of one bf16 row against 3/5/6-bit weights (rows of whole steps) runs this kernel by
    default; ``MLX_NATIVE_AFFINE_MV=0`` turns it off."""
    from helpers import spy_plans
    from mlx_native.ops.quant import gemv
    from mlx_native.runtime import plans

    plans.clear_all()
    built = spy_plans(monkeypatch, odd.AffineOddMvLaunch, gemv.GemvLaunch)
    test_quant._check_qmm(device, 1, 40, 512, 64, bits, torch.bfloat16)
    assert [type(p).__name__ for p in built] == ["AffineOddMvLaunch"]
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_mv=False))
    plans.clear_all()
    test_quant._check_qmm(device, 1, 40, 512, 64, bits, torch.bfloat16)
    assert "AffineOddMvLaunch" not in [type(p).__name__ for p in built[1:]]
    plans.clear_all()
