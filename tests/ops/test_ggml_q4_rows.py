"""The streamed GGUF Q4_0 / Q4_1 mat-vec (``ops/ggml/q4_mv.py``) for 2-4 rows of x (``MR``), called through its
launch plan ``Q4MvLaunch(..., m=, x_row_stride=)`` directly (the routing of ``ggml_matmul`` is the lead's):
``gguf.quants`` dequantizes the oracle weight, the fp64 product of x with it is the oracle, ``x @ w.to(dtype).T``
the error bar's baseline."""

import dataclasses

import numpy as np
import pytest
import torch

from helpers import assert_error_bar, randn
from mlx_native.ops.ggml import formats
from test_ggml import EXTREME, FP16_FIELDS, crafted_blocks, oracle_weight, plan_output, rng_for, valid_blocks

IDS = {"Q4_0": 2, "Q4_1": 3}


def _q4_mv():
    from mlx_native.ops.ggml import q4_mv

    return q4_mv


def _run(device, raw: np.ndarray, name: str, m: int, n: int, k: int, dtype, pad: int = 0, x=None, plan=None):
    """``(out, oracle, baseline, x, plan)`` of ``m`` rows of x (the first ``k`` columns of a ``[m, k + pad]``
    tensor, row stride ``k + pad``) against the rows ``raw``; ``plan``: reuse a plan (else a new one)."""
    w = oracle_weight(raw, name, (n, k))
    if x is None:
        x = randn(m, k + pad, dtype=dtype)[:, :k]
    assert x.stride() == (k + pad, 1)
    if plan is None:
        plan = _q4_mv().Q4MvLaunch(IDS[name], n, k, dtype, torch.device(device), m=m, x_row_stride=k + pad)
    return (*plan_output(device, plan, raw, w, x), x, plan)


@pytest.fixture
def q4_rows(monkeypatch, request):
    """Small matrices allowed (any SM count); ``forced_split(True)`` splits K over as many programs as there are
    steps (merged in the launch), ``prescale(name, bool)`` picks the multi-row kernel's scale treatment."""
    from mlx_native.runtime import plans

    q4_mv = _q4_mv()
    monkeypatch.setattr(q4_mv, "ROWS_MIN_TILES_PER_SM", 0)
    request.addfinalizer(plans.clear_all)

    class Knobs:
        @staticmethod
        def forced_split(on: bool):
            if on:
                monkeypatch.setattr(q4_mv, "PROGRAMS_PER_SM", 64)
                monkeypatch.setattr(q4_mv, "LONG_PROGRAMS_PER_SM", 64)

        @staticmethod
        def prescale(name: str, on: bool):
            monkeypatch.setitem(q4_mv.PRESCALE_MIN_ROWS, IDS[name], 2 if on else q4_mv.ROWS_MAX + 1)

    return Knobs


@pytest.mark.parametrize("name, m, n, k, dtype, prescale, pad, split", [
    ("Q4_0", 2, 19, 512, torch.bfloat16, False, 0, False),  # one 16-block step, ragged row tile
    ("Q4_0", 3, 40, 1536, torch.float16, False, 24, True),  # three steps, K split in 3, row stride K + 24
    ("Q4_0", 4, 37, 2048, torch.bfloat16, True, 8, True),  # four steps, scales applied before the dot
    ("Q4_0", 2, 8, 256, torch.float16, True, 0, False),  # one 8-block step (64 units)
    ("Q4_1", 2, 24, 1024, torch.float16, True, 40, True),  # two steps, row stride K + 40
    ("Q4_1", 3, 19, 512, torch.bfloat16, False, 0, False),  # d a + m xs per row of x
    ("Q4_1", 3, 16, 768, torch.float16, True, 8, True),  # three 8-block steps, K split in 3
    ("Q4_1", 4, 21, 8192, torch.bfloat16, True, 0, True),  # long rows (LONG_K tiling): 16 steps
])
def test_q4_rows_error_bar(device, q4_rows, name, m, n, k, dtype, prescale, pad, split, request):
    """2-4 rows of x against quantized random weights: every row within the error bar of the fp64 oracle, with one
    or several loop steps, ragged row tiles, x rows inside a wider tensor, both scale treatments, and K split
    (partials ``[split, m, n]``) merged in the launch, whose counters are back at zero for a second call."""
    from test_quant import assert_merged_in_launch

    q4_mv = _q4_mv()
    q4_rows.forced_split(split)
    q4_rows.prescale(name, prescale)
    raw = valid_blocks(name, n, k, rng_for(request))
    out, oracle, baseline, _, plan = _run(device, raw, name, m, n, k, dtype, pad)
    assert_error_bar(out, oracle, baseline, what=f"{name} {m}x{n}x{k} {dtype}")
    c = plan.launch.constexprs
    assert c["MR"] == m and c["PRESCALE"] is prescale and c["BN"] == q4_mv.ROWS_BN[m]
    assert c["EVEN_N"] == (n % c["BN"] == 0) and c["Q4_1"] == (name == "Q4_1")
    assert plan.ints[:2] == (n, k + pad)
    steps = k // 4 // q4_mv.step_units(k)
    assert plan.split == (steps if split else 1)
    if split:
        assert_merged_in_launch(plan)
        assert plan.splitk.shape == (plan.split, m, n)
        out2, oracle2, baseline2, _, _ = _run(device, raw, name, m, n, k, dtype, pad, plan=plan)
        assert_error_bar(out2, oracle2, baseline2, what=f"{name} {m}x{n}x{k} {dtype} second call")
        assert not plan.splitk.counters.any()


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
def test_q4_rows_are_the_rows_of_x(device, q4_rows, name, request):
    """Each output row belongs to its row of x: x rows that are multiples of one another (1, -2, 0.5, 4) give
    outputs in the same ratios (bitwise: powers of two), so a swapped or repeated row of x fails."""
    m, n, k = 4, 16, 512
    raw = valid_blocks(name, n, k, rng_for(request))
    x0 = randn(1, k, dtype=torch.bfloat16)
    x = torch.cat([x0, -2 * x0, 0.5 * x0, 4 * x0])
    for prescale in (False, True):
        q4_rows.prescale(name, prescale)
        out, oracle, baseline, _, _ = _run(device, raw, name, m, n, k, torch.bfloat16, x=x)
        assert_error_bar(out, oracle, baseline, what=f"{name} scaled rows")
        for r, f in enumerate((1.0, -2.0, 0.5, 4.0)):
            assert torch.equal(out[r], (f * out[0].float()).to(torch.bfloat16)), (prescale, r)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("name, m, dtype", [("Q4_0", 3, torch.bfloat16), ("Q4_1", 2, torch.float16),
                                            ("Q4_1", 4, torch.bfloat16)])
def test_q4_rows_extreme_scales(device, q4_rows, name, m, dtype, request):
    """Scales from fp16's extremes (65504, subnormals, +-0, +-inf, NaN): outputs are non-finite exactly where the
    oracle (rounded to the output dtype) is, and the finite ones stay within the error bar. Half the weight rows
    keep only finite extremes (with an fp16 result only the small ones: subnormals, 1e-5, +-0), so that both
    kinds of rows are there."""
    q4_rows.prescale(name, name == "Q4_1")
    n, k = 32, 256
    t = formats.BY_NAME[name]
    rng = rng_for(request)
    raw = crafted_blocks(name, n * k // 32, rng, extreme=True).reshape(n, k // 32, t.block_bytes)
    finite_vals = EXTREME[np.isfinite(EXTREME) & ((np.abs(EXTREME) < 1) | (dtype == torch.bfloat16))]
    for off in FP16_FIELDS[name]:
        vals = rng.choice(finite_vals, (n // 2, k // 32)).astype(np.float16)
        raw[: n // 2, :, off:off + 2] = vals.view(np.uint8).reshape(n // 2, k // 32, 2)
    out, oracle, baseline, _, _ = _run(device, raw.reshape(-1), name, m, n, k, dtype)
    finite = torch.isfinite(oracle.to(dtype))
    assert torch.equal(torch.isfinite(out), finite)
    ok = finite & torch.isfinite(baseline)
    assert 4 <= int(ok.sum()) < m * n, int(ok.sum())
    assert not finite[:, n // 2:].all()
    assert_error_bar(out[ok], oracle[ok], baseline[ok], what=f"{name} extreme scales {dtype}")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
def test_q4_rows_keep_inf_and_nan_in_their_row(device, q4_rows, name, request):
    """Inf in one row of x and NaN in another reach exactly their rows' outputs; the other rows stay finite."""
    m, n, k = 4, 16, 512
    raw = valid_blocks(name, n, k, rng_for(request))
    for prescale in (False, True):
        q4_rows.prescale(name, prescale)
        x = randn(m, k, dtype=torch.float16)
        x[1, 100] = float("inf")
        x[2, 401] = float("nan")
        out, oracle, _, _, _ = _run(device, raw, name, m, n, k, torch.float16, x=x)
        finite = torch.isfinite(oracle)
        assert not finite[[1, 2]].any() and finite[[0, 3]].all()
        assert torch.equal(torch.isfinite(out), finite), prescale


def test_q4_rows_supports(monkeypatch):
    """``supports`` takes 1 to ROWS_MAX rows of bf16/fp16 x against Q4_0 / Q4_1 rows of whole 8-16-block steps,
    with a row tile per SM (the multi-row tiles' ``ROWS_BN``) and below 2**31 bytes; not fp32 x, other types, 0
    or 5 rows, or with ``MLX_NATIVE_GGUF_MV=0``."""
    from mlx_native.runtime import env

    q4_mv = _q4_mv()
    supports = q4_mv.supports
    bf16, sms, big = torch.bfloat16, 132, 2**20
    assert q4_mv.ROWS_MAX == 4
    for name, tid in IDS.items():
        assert supports(tid, bf16, 1, 4096, 4096, big, sms) and supports(tid, torch.float16, 1, 4096, 4096, big, sms)
        for m in (2, 3, 4):
            assert supports(tid, bf16, m, 4096, 4096, big, sms), (name, m)
            assert supports(tid, torch.float16, m, 14336, 4096, big, sms)
            assert not supports(tid, torch.float32, m, 4096, 4096, big, sms)
            assert not supports(tid, bf16, m, 4096, 576, big, sms)  # no whole step of 8 blocks
            few = q4_mv.ROWS_BN[m] * (sms - 1)  # one row tile short of a tile per SM
            assert not supports(tid, bf16, m, few, 4096, big, sms)
            assert supports(tid, bf16, m, few + q4_mv.ROWS_BN[m], 4096, big, sms)
            assert not supports(tid, bf16, m, 4096, 4096, 2**31, sms)
        for m in (0, 5):
            assert not supports(tid, bf16, m, 4096, 4096, big, sms), m
    for name in ("Q8_0", "Q4_K", "Q5_0", "Q6_K"):
        assert not supports(formats.BY_NAME[name].id, bf16, 2, 4096, 4096, big, sms), name
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))
    assert not supports(2, bf16, 1, 4096, 4096, big, sms)
    assert not supports(2, bf16, 2, 4096, 4096, big, sms)


def test_q4_rows_plans(device, monkeypatch):
    """One row keeps the one-row plan (its tiling, MR = 1, no PRESCALE whatever PRESCALE_MIN_ROWS says, x's row
    stride passed as K: one compiled variant); 2-4 rows get ROWS_BN tiles and PRESCALE by type; 5 rows are
    refused."""
    q4_mv = _q4_mv()
    dev = torch.device(device)
    monkeypatch.setitem(q4_mv.PRESCALE_MIN_ROWS, 2, 1)
    monkeypatch.setitem(q4_mv.PRESCALE_MIN_ROWS, 3, 1)
    for k, bn in ((4096, q4_mv.Q4_BN), (14336, q4_mv.LONG_BN)):
        one = q4_mv.Q4MvLaunch(2, 4096, k, torch.bfloat16, dev, x_row_stride=k + 64)
        c = one.launch.constexprs
        assert c["MR"] == 1 and c["PRESCALE"] is False and c["BN"] == bn and one.m == 1
        assert one.ints[:2] == (4096, k)
    monkeypatch.setitem(q4_mv.PRESCALE_MIN_ROWS, 2, q4_mv.ROWS_MAX + 1)
    monkeypatch.setitem(q4_mv.PRESCALE_MIN_ROWS, 3, 3)
    for m in (2, 3, 4):
        for tid in (2, 3):
            plan = q4_mv.Q4MvLaunch(tid, 4096, 14336, torch.float16, dev, m=m)
            c = plan.launch.constexprs
            assert c["MR"] == m and c["BN"] == q4_mv.ROWS_BN[m] and plan.ints[:2] == (4096, 14336)
            assert c["PRESCALE"] is (tid == 3 and m >= 3) and plan.ints[-1] == 0  # ``zero``
    with pytest.raises(ValueError, match=r"q4_mv: 5 rows of x \(1 to 4\)"):
        q4_mv.Q4MvLaunch(2, 4096, 4096, torch.bfloat16, dev, m=5)
