"""The integer-dot mat-vec for GGUF Q4_K / Q5_K weights and 2-4 rows of x (``ops/ggml/q4k_idot_rows.py``), called
through its launch plans ``Q4kIdotRowsLaunch`` / ``Q5kIdotRowsLaunch`` directly (the routing of ``ggml_matmul`` is the
lead's): ``gguf.quants`` dequantizes the oracle weight, the fp64 product of x with it is the oracle,
``x @ w.to(dtype).T`` the error bar's baseline."""

import dataclasses
import types

import numpy as np
import pytest
import torch

import test_quant
from helpers import assert_error_bar, randn
from mlx_native.ops.ggml import formats
from mlx_native.ops.quant.affine_idot_rows import row_parts
from mlx_native.runtime.device import device_info
from test_ggml import EXTREME, oracle_weight, plan_output, rng_for, valid_blocks

splits_outer = test_quant.splits_outer  # the fixture: a K split's programs run split-major under the interpreter
Q4K = formats.BY_NAME["Q4_K"]


def _rows():
    from mlx_native.ops.ggml import q4k_idot_rows

    return q4k_idot_rows


def _run(device, raw: np.ndarray, m: int, n: int, k: int, dtype, pad: int = 0, x=None, plan=None, name="Q4_K",
         **knobs):
    """``(out, oracle, baseline, x, plan)`` of ``m`` rows of x (the first ``k`` columns of a ``[m, k + pad]``
    tensor, row stride ``k + pad``) against the rows ``raw`` of type ``name`` (Q4_K or Q5_K); ``plan``: reuse a plan
    (else a new one, with the sweep's ``knobs``)."""
    w = oracle_weight(raw, name, (n, k))
    if x is None:
        x = randn(m, k + pad, dtype=dtype)[:, :k]
    assert x.stride() == (k + pad, 1)
    if plan is None:
        launch = _rows().Q5kIdotRowsLaunch if name == "Q5_K" else _rows().Q4kIdotRowsLaunch
        plan = launch(m, n, k, dtype, k + pad, torch.device(device), **knobs)
    return (*plan_output(device, plan, raw, w, x), x, plan)


@pytest.fixture
def one_sm(monkeypatch, request):
    """One SM (no K split from the CPU's core count); plans cleared afterwards."""
    from mlx_native.runtime import plans

    monkeypatch.setattr(_rows(), "device_info", lambda device: types.SimpleNamespace(sm_count=1))
    request.addfinalizer(plans.clear_all)


def _steps(k: int) -> int:
    rows = _rows()
    return k // 256 // (8 * rows.step_warps(k))


@pytest.mark.usefixtures("one_sm")
@pytest.mark.parametrize("name, m, n, k, dtype, prefetch", [
    ("Q4_K", 2, 37, 2048, torch.bfloat16, False),  # one part of 2 rows, ragged row tile, one 1-warp step
    ("Q4_K", 3, 13, 4096, torch.float16, True),  # parts 2 + 1, one 2-warp step
    ("Q4_K", 4, 21, 6144, torch.bfloat16, True),  # one part of 4 rows, three 1-warp steps (prefetch reloads the last)
    ("Q4_K", 2, 16, 8192, torch.float16, False),  # two 2-warp steps, whole row tiles
    ("Q4_K", 3, 9, 2048, torch.bfloat16, False),  # parts 2 + 1, 9 rows: a last tile of 1 row
    ("Q4_K", 4, 24, 4096, torch.float16, False),
    ("Q5_K", 2, 37, 2048, torch.bfloat16, False),
    ("Q5_K", 3, 13, 4096, torch.float16, True),
    ("Q5_K", 4, 21, 6144, torch.bfloat16, True),
])
def test_q4k_rows_error_bar(device, name, m, n, k, dtype, prefetch, request):
    """2-4 rows of x against quantized random weights: every row within the error bar of the fp64 oracle, with one
    or several loop steps, with and without register prefetch, ragged row tiles; the rows of x run as the
    powers of two of M's binary digits."""
    rows = _rows()
    raw = valid_blocks(name, n, k, rng_for(request))
    out, oracle, baseline, _, plan = _run(device, raw, m, n, k, dtype, prefetch=prefetch, name=name)
    assert_error_bar(out, oracle, baseline, what=f"{name} {m}x{n}x{k} {dtype}")
    c = plan.launch.constexprs
    sms = device_info(torch.device(device)).sm_count
    assert c["BN"] == rows.tile_rows(n, sms) and c["CH"] == 32 * rows.step_warps(k) and c["PREFETCH"] is prefetch
    assert c["EVEN_N"] == (n % c["BN"] == 0)
    parts = [c[f"R{i}"] for i in range(4)]
    assert parts == list(row_parts(m)) + [0] * (4 - len(row_parts(m)))
    assert plan.split == 1 and plan.splitk is None and plan.ints[:3] == (n, k, _steps(k))


@pytest.mark.usefixtures("one_sm")
@pytest.mark.parametrize("m, pad, dtype", [(2, 24, torch.bfloat16), (3, 64, torch.float16), (4, 8, torch.float16)])
def test_q4k_rows_strided_x(device, m, pad, dtype, request):
    """Rows of x inside a wider tensor: row stride K + 24 / K + 8 (not a multiple of 16: no 16-byte vector may be
    assumed) and K + 64."""
    n, k = 19, 2048
    raw = valid_blocks("Q4_K", n, k, rng_for(request))
    out, oracle, baseline, _, plan = _run(device, raw, m, n, k, dtype, pad)
    assert plan.ints[1] == k + pad
    assert_error_bar(out, oracle, baseline, what=f"stride {k + pad}")


@pytest.mark.usefixtures("one_sm")
@pytest.mark.parametrize("name, m", [("Q4_K", 3), ("Q4_K", 4), ("Q5_K", 3)])
def test_q4k_rows_are_the_rows_of_x(device, name, m, request):
    """Each output row belongs to its row of x: x rows that are multiples of one another (1, -2, 0.5, 4) give
    outputs in the same ratios (bitwise: x's int16 scales are powers of two), so a swapped or repeated row of x
    (or part) fails."""
    n, k = 16, 2048
    raw = valid_blocks(name, n, k, rng_for(request))
    f = (1.0, -2.0, 0.5, 4.0)[:m]
    x0 = randn(1, k, dtype=torch.bfloat16)
    x = torch.cat([v * x0 for v in f])
    out, oracle, baseline, _, _ = _run(device, raw, m, n, k, torch.bfloat16, x=x, name=name)
    assert_error_bar(out, oracle, baseline, what="scaled rows")
    for r, v in enumerate(f):
        assert torch.equal(out[r], (v * out[0].float()).to(torch.bfloat16)), r


@pytest.mark.parametrize("name, m, n, k, dtype", [
    ("Q4_K", 2, 20, 8192, torch.bfloat16),  # 2 splits of one 2-warp step each, 3 row tiles
    ("Q4_K", 3, 12, 6144, torch.float16),  # 3 splits of one 1-warp step, parts 2 + 1: a counter per row tile and part
    ("Q4_K", 4, 8, 6144, torch.bfloat16),  # 3 splits, one row tile
    ("Q5_K", 3, 12, 6144, torch.bfloat16),
])
def test_q4k_rows_splitk_merged_in_launch(device, monkeypatch, splits_outer, name, m, n, k, dtype, request):
    """K split as far as the steps allow (many programs per SM asked for): partials ``[split, m, n]``, the last split
    of each (row tile, part) to arrive sums its partials in the launch; new x in each call finds the counters back
    at zero, and the bits equal those of the two-launch path (same summation order)."""
    from mlx_native.ops.quant import qmm
    from mlx_native.runtime import plans
    from test_quant import assert_merged_in_launch

    rows = _rows()
    request.addfinalizer(plans.clear_all)
    monkeypatch.setattr(rows, "PROGRAMS_PER_SM", 64)
    raw = valid_blocks(name, n, k, rng_for(request))
    xs = [randn(m, k, dtype=dtype) for _ in range(2)]
    plan, fused = None, []
    for x in xs:
        out, oracle, baseline, _, plan = _run(device, raw, m, n, k, dtype, x=x, plan=plan, name=name)
        assert_error_bar(out, oracle, baseline, what=f"M{m} split {plan.split}")
        fused.append(out)
        assert plan.split == _steps(k) and plan.splitk.shape == (plan.split, m, n)
        parts = len(row_parts(m))
        if parts == 1:
            assert_merged_in_launch(plan)
        else:
            assert plan.splitk.fused and plan.splitk.reduce is None
            assert plan.splitk.counters.shape == (plan.launch.grid[0] * parts,)
            assert not plan.splitk.counters.any(), plan.splitk.counters
    monkeypatch.setattr(qmm, "FUSED_SPLITK", False)
    plan2 = None
    for x, a in zip(xs, fused):
        b, _, _, _, plan2 = _run(device, raw, m, n, k, dtype, x=x, plan=plan2, name=name)
        assert not plan2.splitk.fused and plan2.splitk.reduce is not None
        assert torch.equal(a, b)


@pytest.mark.parametrize("bn, warps, prefetch, programs_per_sm", [
    (4, 1, True, 1), (16, 2, False, 1), (8, 1, True, 64),  # the last: prefetch with one step per split
])
def test_q4k_rows_launch_configs(device, one_sm, bn, warps, prefetch, programs_per_sm, request):
    """The knobs the GPU sweep turns: row tiles of 4-16, 1-2 warps, register prefetch on and off, K split or not
    (one SM); 3 rows of x (two parts) against 21 rows (a ragged last tile) of 16 super-blocks."""
    m, n, k = 3, 21, 4096
    raw = valid_blocks("Q4_K", n, k, rng_for(request))
    out, oracle, baseline, _, plan = _run(device, raw, m, n, k, torch.bfloat16, bn=bn, warps=warps,
                                          programs_per_sm=programs_per_sm, prefetch=prefetch)
    assert_error_bar(out, oracle, baseline, what=f"BN{bn} warps{warps} prefetch{prefetch} split{plan.split}")
    c = plan.launch.constexprs
    assert c["BN"] == bn and c["CH"] == 32 * warps and c["PREFETCH"] is prefetch
    assert plan.split == (1 if programs_per_sm == 1 else k // 256 // (8 * warps))


@pytest.mark.usefixtures("one_sm")
@pytest.mark.parametrize("name, m, dtype", [("Q4_K", 3, torch.bfloat16), ("Q4_K", 4, torch.float16),
                                           ("Q4_K", 2, torch.float16), ("Q5_K", 3, torch.float16)])
def test_q4k_rows_keep_inf_and_nan_in_their_row(device, name, m, dtype, request):
    """Inf / -Inf / NaN in one row of x reach exactly that row's outputs, through the sub-blocks' float sums (the
    integers cannot carry them), in every part of the rows; the other rows stay within the error bar."""
    n, k = 16, 2048
    raw = valid_blocks(name, n, k, rng_for(request))
    plan = None
    for r, (bad, col) in enumerate(zip((float("inf"), float("-inf"), float("nan")), (100, 1037, 2047))):
        r %= m
        x = randn(m, k, dtype=dtype)
        x[r, col] = bad
        out, oracle, baseline, _, plan = _run(device, raw, m, n, k, dtype, x=x, plan=plan, name=name)
        finite = torch.isfinite(oracle)
        assert not finite[r].any() and finite[torch.arange(m) != r].all()
        assert torch.equal(torch.isfinite(out), finite), (bad, r)
        others = torch.arange(m) != r
        assert_error_bar(out[others], oracle[others], baseline[others], what=f"rows beside {bad}")


@pytest.mark.usefixtures("one_sm")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in numpy
@pytest.mark.parametrize("m", [2, 3])
def test_q4k_rows_extreme_scales(device, m, request):
    """Super-block scales d / dmin from fp16's extremes (65504, subnormals, +-0, 1e-5, 3e4, +-inf, NaN), one per
    weight row (d in rows 0-10, dmin in rows 11-21): outputs are non-finite exactly where the oracle's are, and
    each weight row's finite outputs stay within its error bar (bf16 results: no overflow of the output dtype)."""
    n, k, dtype = 22, 2048, torch.bfloat16
    rng = rng_for(request)
    raw = valid_blocks("Q4_K", n, k, rng).reshape(n, k // 256, Q4K.block_bytes)
    for j in range(n):
        off = 0 if j < len(EXTREME) else 2  # d, dmin
        v = np.array([EXTREME[j % len(EXTREME)]], dtype=np.float16)
        raw[j, j % (k // 256), off:off + 2] = v.view(np.uint8)
    out, oracle, baseline, _, _ = _run(device, raw.reshape(-1), m, n, k, dtype)
    finite = torch.isfinite(oracle)
    assert torch.equal(torch.isfinite(out), finite)
    bad_rows = {j for j in range(n) if not np.isfinite(EXTREME[j % len(EXTREME)])}
    assert {j for j in range(n) if not finite[:, j].all()} == bad_rows
    for j in sorted(set(range(n)) - bad_rows):
        assert_error_bar(out[:, j], oracle[:, j], baseline[:, j], what=f"weight row {j}: {EXTREME[j % len(EXTREME)]}")


def test_q4k_rows_supports(monkeypatch):
    """``supports_rows`` takes 2 to IDOT_ROWS_MAX rows of bf16/fp16 x with a bf16/fp16 result against Q4_K rows of
    whole integer-dot steps below 2**31 bytes (Q5_K: 2 to Q5K_ROWS_MAX); not 1 or IDOT_ROWS_MAX + 1 rows, fp32 x or
    result, other types, rows of no whole step (1280, 1536), 2**31 bytes, or with ``MLX_NATIVE_GGML_IDOT=0`` /
    ``MLX_NATIVE_GGUF_MV=0``. The plan refuses x rows past int32 offsets."""
    from mlx_native.runtime import env

    rows = _rows()
    supports = rows.supports_rows
    q4k, bf16, fp16, big = Q4K.id, torch.bfloat16, torch.float16, 2**20
    assert rows.IDOT_ROWS_MAX == 2  # from 3 rows the tensor-core kernel (quant/mmv.py) is faster on the H100
    for m in range(2, rows.IDOT_ROWS_MAX + 1):
        assert supports(q4k, bf16, bf16, m, 4096, big) and supports(q4k, fp16, fp16, m, 14336, big), m
        assert supports(q4k, bf16, bf16, m, 2048, 2**31 - 1) and supports(q4k, fp16, fp16, m, 6144, big), m
        assert not supports(q4k, bf16, torch.float32, m, 4096, big)
        assert not supports(q4k, torch.float32, torch.float32, m, 4096, big)
        assert not supports(q4k, bf16, bf16, m, 1280, big) and not supports(q4k, bf16, bf16, m, 1536, big)
        assert not supports(q4k, bf16, bf16, m, 4096, 2**31)
    for m in (0, 1, rows.IDOT_ROWS_MAX + 1, 8):
        assert not supports(q4k, bf16, bf16, m, 4096, big), m
    for name in ("Q4_0", "Q4_1", "Q6_K", "Q8_0"):
        assert not supports(formats.BY_NAME[name].id, bf16, bf16, 2, 4096, big), name
    q5k = formats.BY_NAME["Q5_K"].id
    assert rows.Q5K_ROWS_MAX == 4  # no tensor-core kernel for Q5_K
    assert all(supports(q5k, bf16, bf16, m, 4096, big) for m in range(2, rows.Q5K_ROWS_MAX + 1))
    assert not supports(q5k, bf16, bf16, 5, 4096, big) and not supports(q5k, bf16, bf16, 2, 1536, big)
    for flag in ("ggml_idot", "gguf_mv"):
        with monkeypatch.context() as mp:
            mp.setattr(env, "settings", dataclasses.replace(env.settings, **{flag: False}))
            assert not supports(q4k, bf16, bf16, 2, 4096, big), flag
    assert supports(q4k, bf16, bf16, 2, 4096, big)
    with pytest.raises(ValueError, match="int32"):
        rows.Q4kIdotRowsLaunch(3, 16, 4096, bf16, 2**30, torch.device("cpu"))


def test_tile_rows_rule():
    """8-row weight tiles where they give at least BIG_TILES_PER_SM per SM (K 4096 x N 14336 on 132 SMs), else
    4-row tiles (14336 x 4096: 512 tiles of 8 rows, under 8 per SM)."""
    rows = _rows()
    assert rows.tile_rows(14336, 132) == rows.IDOT_ROWS_BN == 8
    assert rows.tile_rows(4096, 132) == rows.IDOT_ROWS_SMALL_BN == 4
    assert rows.tile_rows(8 * rows.BIG_TILES_PER_SM * 132, 132) == 8
    assert rows.tile_rows(8 * rows.BIG_TILES_PER_SM * 132 - 8, 132) == 4
