"""GGUF blocks: ``gguf.quants`` (llama.cpp's Python package) is the oracle of every type's
dequantization (bit-exact, random and crafted blocks, extreme scales); matmuls against
dequantize + fp64 matmul with the error bar; embedding rows; bad input."""

import dataclasses
import types

import gguf
import numpy as np
import pytest
import torch
import triton
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

import mlx_native as mn
from helpers import X_RANGES, assert_error_bar, randn, spy_plans, x_of_range
from mlx_native.ops.ggml import formats

QTYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
MATMUL_TYPES = ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K")
# byte offsets of the fp16 scale fields of each block
FP16_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q2_K": (80, 82),
               "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}
EXTREME = np.array([65504.0, -65504.0, 6e-8, -6e-8, 1e-5, 3.0e4, 0.0, -0.0, np.inf, -np.inf, np.nan],
                   dtype=np.float16)


def crafted_blocks(name: str, n_blocks: int, rng: np.random.Generator, extreme: bool = False) -> np.ndarray:
    """Random code bytes with controlled fp16 scale fields (``[n_blocks * block_bytes]`` uint8)."""
    t = formats.BY_NAME[name]
    raw = rng.integers(0, 256, (n_blocks, t.block_bytes), dtype=np.uint8)
    for off in FP16_FIELDS[name]:
        if extreme:
            vals = rng.choice(EXTREME, n_blocks)
        else:
            vals = (rng.uniform(2e-3, 2e-2, n_blocks) * rng.choice([-1, 1], n_blocks)).astype(np.float16)
            if name in ("Q2_K", "Q4_K", "Q5_K") and off == 2:
                vals = np.abs(vals)  # dmin
        raw[:, off:off + 2] = vals.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(-1)


def valid_blocks(name: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks of a quantized random weight where gguf can quantize this type, else crafted ones."""
    qtype = gguf.GGMLQuantizationType[name]
    try:
        w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
        return np.ascontiguousarray(gguf_quantize(w, qtype)).reshape(-1)
    except NotImplementedError:
        t = formats.BY_NAME[name]
        return crafted_blocks(name, n * k // t.block_elems, rng)


def float_raw(name: str, n: int, k: int) -> np.ndarray:
    dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[name]
    return (torch.randn(n, k) * 0.05).to(dtype).contiguous().view(torch.uint8).reshape(-1).numpy()


def raw_tensor(raw: np.ndarray, device) -> torch.Tensor:
    return torch.from_numpy(raw.copy()).to(device)


def gguf_values(raw: np.ndarray, name: str, shape) -> np.ndarray:
    return gguf_dequantize(raw, gguf.GGMLQuantizationType[name]).astype(np.float32).reshape(shape)


def oracle_weight(raw: np.ndarray, name: str, shape) -> torch.Tensor:
    """gguf.quants' float32 values of raw blocks (extreme block scales may overflow to Inf / NaN: no warning)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return torch.from_numpy(gguf_values(raw, name, shape))


def plan_output(device, plan, raw: np.ndarray, w: torch.Tensor, x: torch.Tensor, baseline32: bool = False):
    """``(out, oracle, baseline)`` of one call of a mat-vec plan on ``x [m, k]`` (copied to ``device`` with its row
    stride) against the raw rows whose values are ``w [n, k]``: the fp64 oracle and the same-dtype baseline of the
    error bar (``baseline32``: the fp32 product rounded to x's dtype, for weights that do not fit it); the output's
    shape and dtype are checked."""
    xd = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device)
    xd.copy_(x)
    out = plan(xd, raw_tensor(raw, device)).cpu()
    assert out.shape == (x.shape[0], w.shape[0]) and out.dtype == x.dtype
    baseline = (x.float() @ w.T).to(x.dtype) if baseline32 else x @ w.to(x.dtype).T
    return out, x.double() @ w.double().T, baseline


def check_plan(device, plan, raw: np.ndarray, w: torch.Tensor, x: torch.Tensor, what: str) -> torch.Tensor:
    """One call of a mat-vec plan (:func:`plan_output`) within the error bar of the fp64 oracle; returns the
    output."""
    out, oracle, baseline = plan_output(device, plan, raw, w, x)
    assert_error_bar(out, oracle, baseline, what=what)
    return out


def force_split(monkeypatch, request, module, name: str = "PROGRAMS_PER_SM") -> None:
    """Ask ``module``'s streamed mat-vec plans for many programs per SM (its constant ``name``): K is split as far as
    the row's steps allow, the parts merged in the launch; the plans built meanwhile are dropped after the test."""
    from mlx_native.runtime import plans

    monkeypatch.setattr(module, name, 64)
    request.addfinalizer(plans.clear_all)


def assert_bit_exact(ours: torch.Tensor, theirs: np.ndarray, what: str) -> None:
    ours = ours.cpu().numpy()
    nan_o, nan_t = np.isnan(ours), np.isnan(theirs)
    assert np.array_equal(nan_o, nan_t), f"{what}: NaN positions differ"
    a, b = ours[~nan_o].view(np.uint32), theirs[~nan_t].view(np.uint32)
    bad = np.nonzero(a != b)[0]
    assert bad.size == 0, f"{what}: {bad.size} values differ, first {ours[~nan_o][bad[0]]} vs {theirs[~nan_t][bad[0]]}"


def rng_for(request) -> np.random.Generator:
    return np.random.default_rng(torch.initial_seed() % 2**32)


# --------------------------------------------------------------------------- dequantize


@pytest.mark.parametrize("name", QTYPES)
def test_dequantize_bit_exact_vs_gguf(device, name, request):
    rng = rng_for(request)
    t = formats.BY_NAME[name]
    n, k = 3, 2 * 256
    raw = crafted_blocks(name, n * k // t.block_elems, rng)
    ours = mn.ggml_dequantize(raw_tensor(raw, device), name, (n, k))
    assert ours.shape == (n, k) and ours.dtype == torch.float32
    assert_bit_exact(ours, gguf_values(raw, name, (n, k)), name)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("name", QTYPES)
def test_dequantize_extreme_scales_bit_exact(device, name, request):
    rng = rng_for(request)
    t = formats.BY_NAME[name]
    raw = crafted_blocks(name, 24 if t.block_elems == 256 else 64, rng, extreme=True)
    shape = (raw.size // t.block_bytes * t.block_elems,)
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = gguf_values(raw, name, shape)
    assert_bit_exact(mn.ggml_dequantize(raw_tensor(raw, device), gguf.GGMLQuantizationType[name], shape), theirs,
                     name)


@pytest.mark.parametrize("name", ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"))
def test_dequantize_gguf_quantized_weights(device, name, request):
    rng = rng_for(request)
    raw = valid_blocks(name, 5, 96, rng)
    ours = mn.ggml_dequantize(raw_tensor(raw, device), formats.BY_NAME[name].id, [5, 96])
    assert_bit_exact(ours, gguf_values(raw, name, (5, 96)), name)


@pytest.mark.parametrize("name", ("F32", "F16", "BF16"))
def test_dequantize_float_types(device, name):
    raw = float_raw(name, 4, 33)
    ours = mn.ggml_dequantize(raw_tensor(raw, device), name, (4, 33))
    assert_bit_exact(ours, gguf_values(raw, name, (4, 33)), name)


def test_dequantize_out_dtype(device, request):
    raw = crafted_blocks("Q4_K", 4, rng_for(request))
    out = mn.ggml_dequantize(raw_tensor(raw, device), "q4_k", (2, 512), dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out.cpu(), torch.from_numpy(gguf_values(raw, "Q4_K", (2, 512))).to(torch.bfloat16))


# --------------------------------------------------------------------------- matmul


def _check_matmul(device, name, m, n, k, dtype, rng, lead=()):
    raw = float_raw(name, n, k) if name in ("F32", "F16", "BF16") else valid_blocks(name, n, k, rng)
    w = torch.from_numpy(gguf_values(raw, name, (n, k)))
    x = randn(*lead, m, k, dtype=dtype)
    out = mn.ggml_matmul(x.to(device), raw_tensor(raw, device), name, (n, k))
    assert out.shape == (*lead, m, n) and out.dtype == dtype
    oracle = x.double() @ w.double().T
    baseline = x @ w.to(dtype).T
    assert_error_bar(out.cpu(), oracle, baseline, what=f"ggml_matmul {name} {m}x{n}x{k} {dtype}")


@pytest.mark.parametrize("name", MATMUL_TYPES)
@pytest.mark.parametrize("m", [1, 3, 17])
def test_matmul_error_bar(device, name, m, request):
    k = 512
    _check_matmul(device, name, m, 40, k, torch.bfloat16, rng_for(request))


@pytest.mark.parametrize("name", MATMUL_TYPES + ("F32", "F16", "BF16"))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmul_dtypes(device, name, dtype, request):
    _check_matmul(device, name, 2, 24, 256, dtype, rng_for(request))


@pytest.mark.parametrize("name", ("Q4_0", "Q4_K", "Q6_K"))
def test_matmul_prefill_odd_n(device, name, request):
    _check_matmul(device, name, 40, 37, 256, torch.bfloat16, rng_for(request))


def test_matmul_m300_batched(device, request):
    _check_matmul(device, "Q8_0", 300, 9, 64, torch.bfloat16, rng_for(request))
    _check_matmul(device, "Q4_1", 5, 20, 64, torch.bfloat16, rng_for(request), lead=(2,))


@pytest.mark.parametrize("name", ("Q5_0", "Q5_1", "Q2_K", "Q3_K"))
def test_matmul_types_without_fused_kernel(device, name, request):
    _check_matmul(device, name, 3, 16, 256, torch.bfloat16, rng_for(request))


@pytest.fixture(params=[False, True], ids=["scale-after-dot", "prescaled"])
def mmv_launches(monkeypatch, request):
    """The tensor-core decode plans (quant/mmv.py, ``MmvLaunch``) built while the test runs (plans are
    cleared around it, so cached ones do not hide a build), with either treatment of the group scales (dots of
    raw codes scaled after the dot, or tiles dequantized before it: ``mmv.PRESCALE_MIN_ROWS``)."""
    from mlx_native.ops.quant import mmv
    from mlx_native.runtime import env, plans

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))  # Q4_K rows too
    monkeypatch.setattr(mmv, "PRESCALE_MIN_ROWS", 1 if request.param else mmv.MAX_ROWS + 1)
    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    yield built
    assert all(p.launch.constexprs["PRESCALE"] is request.param for p in built)
    # prescaled Q4_K, Q4_1 (rows of an even number of blocks; 8-block steps in rows of a multiple of 8) and Q4_0
    # (rows of a multiple of 8 blocks) tiles are packed (two codes an instruction; in fp32 under the interpreter)
    assert all(p.launch.constexprs["PACKED"] is (request.param and (p.launch.constexprs["FMT"] == Q4_K_ID or
                                                                   p.launch.constexprs["FMT"] == Q4_1_ID and
                                                                   p.launch.constexprs["GPS"] in (2, 4, 8) or
                                                                   p.launch.constexprs["FMT"] == Q4_0_ID and
                                                                   p.launch.constexprs["GPS"] == 8))
               for p in built)
    plans.clear_all()


Q4_K_ID = formats.BY_NAME["Q4_K"].id
Q4_1_ID = formats.BY_NAME["Q4_1"].id
Q4_0_ID = formats.BY_NAME["Q4_0"].id


def _streamed_modules():
    from mlx_native.ops.ggml import q4_mv, q4k_mv

    return q4_mv, q4k_mv


@pytest.mark.parametrize("name, n, k", [
    # Q4_K steps of 1 / 1 / 4 blocks, then 4 steps of 4 and a partial one of 1
    ("Q4_K", 16, 256), ("Q4_K", 19, 768), ("Q4_K", 72, 2048), ("Q4_K", 40, 4352),
    ("Q4_0", 32, 256), ("Q4_0", 40, 1536), ("Q4_1", 19, 512), ("Q4_1", 72, 8192),  # steps of 8 / 16 blocks
])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_streamed_gguf_matvec(device, monkeypatch, name, n, k, dtype, request):
    """One row against Q4_K (ops/ggml/q4k_mv.py, its integer-dot variant off) or Q4_0 / Q4_1 (ops/ggml/q4_mv.py):
    the streamed kernel takes it, with steps of one to several blocks, rows not a multiple of the tile, random
    scale bytes (all eight Q4_K sub-block encodings), and a K split merged in the launch (forced by asking for
    many programs per SM)."""
    from mlx_native.runtime import env, plans
    from test_quant import assert_merged_in_launch

    q4_mv, q4k_mv = _streamed_modules()
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, ggml_idot=False))
    mod, cls, per_word = (q4k_mv, q4k_mv.Q4kMvLaunch, 8) if name == "Q4_K" else (q4_mv, q4_mv.Q4MvLaunch, 4)
    monkeypatch.setattr(mod, "PROGRAMS_PER_SM", 64)
    monkeypatch.setattr(mod, "LONG_PROGRAMS_PER_SM", 64, raising=False)
    built = spy_plans(monkeypatch, cls)
    request.addfinalizer(plans.clear_all)
    _check_matmul(device, name, 1, n, k, dtype, rng_for(request))
    (plan,) = built
    steps = k // per_word // (plan.launch.constexprs["WPS"] if name == "Q4_K" else q4_mv.step_units(k))
    assert plan.launch.constexprs["EVEN_N"] == (n % plan.launch.constexprs["BN"] == 0)
    if steps > 1:
        assert_merged_in_launch(plan)


@pytest.mark.parametrize("name", ["Q4_K", "Q4_0"])
def test_streamed_gguf_matvec_switch(device, monkeypatch, name, request):
    """``MLX_NATIVE_GGUF_MV=0`` (settings.gguf_mv) sends one-row matmuls back to the word-level kernel."""
    from mlx_native.ops.quant import gemv
    from mlx_native.runtime import env, plans

    q4_mv, q4k_mv = _streamed_modules()
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False, mmv="off"))
    built = spy_plans(monkeypatch, q4_mv.Q4MvLaunch, q4k_mv.Q4kMvLaunch, gemv.GemvLaunch)
    request.addfinalizer(plans.clear_all)
    _check_matmul(device, name, 1, 40, 512, torch.bfloat16, rng_for(request))
    assert [type(p).__name__ for p in built] == ["GemvLaunch"]


def test_q4_streamed_matvec_leaves_small_matrices(device, monkeypatch, request):
    """Q4_0/Q4_1 rows that take no whole step of 8 blocks (K = 576, SmolLM2), or several rows of x against too
    few weight rows for a tile per SM, stay on the word-level kernel; one row of x takes the streamed kernels
    whatever the row count (on the H100 2-2.7x faster than the word-level kernel on 256-1024 rows)."""
    from mlx_native.ops.ggml import q4_idot
    from mlx_native.ops.quant import gemv
    from mlx_native.runtime import env, plans
    from mlx_native.runtime.device import device_info

    q4_mv, _ = _streamed_modules()
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="off"))  # the default's choice
    built = spy_plans(monkeypatch, q4_mv.Q4MvLaunch, q4_idot.Q4IdotLaunch, gemv.GemvLaunch)
    request.addfinalizer(plans.clear_all)
    sms = device_info(torch.device(device)).sm_count
    few = q4_mv.ROWS_BN[2] * (sms - 1)  # one tile short of a tile per SM
    _check_matmul(device, "Q4_1", 1, 40, 576, torch.bfloat16, rng_for(request))
    _check_matmul(device, "Q4_0", 1, 16, 512, torch.bfloat16, rng_for(request))
    assert [type(p).__name__ for p in built] == ["GemvLaunch", "Q4IdotLaunch"]
    q4_0 = formats.BY_NAME["Q4_0"]
    assert not q4_mv.supports(q4_0.id, torch.bfloat16, 2, few, 512, few * formats.row_bytes(q4_0, 512), sms)
    assert q4_mv.supports(q4_0.id, torch.bfloat16, 2, few + 8, 512, (few + 8) * formats.row_bytes(q4_0, 512), sms)


@pytest.fixture
def q4k_plans(monkeypatch):
    """The streamed Q4_K plans (ggml/q4k_mv.py, ggml/q4k_idot.py) built while the test runs."""
    from mlx_native.ops.ggml import q4k_idot, q4k_mv
    from mlx_native.runtime import plans

    yield spy_plans(monkeypatch, q4k_mv.Q4kMvLaunch, q4k_idot.Q4kIdotLaunch)
    plans.clear_all()


def _plan_names(built):
    return [type(p).__name__ for p in built]


IDOT_PLANS = {"Q4_K": "Q4kIdotLaunch", "Q5_K": "Q5kIdotLaunch"}


@pytest.mark.parametrize("name, n, k, dtype", [
    ("Q4_K", 37, 2048, torch.bfloat16),  # N not a multiple of the row tile, one 1-warp step (8 super-blocks)
    ("Q4_K", 19, 4096, torch.float16),  # one 2-warp step (16 super-blocks)
    ("Q4_K", 8, 6144, torch.bfloat16),  # 24 super-blocks: three 1-warp steps
    ("Q4_K", 5, 8192, torch.float16),  # two 2-warp steps
    ("Q4_K", 3, 14336, torch.bfloat16),  # Llama-3-8B's down projection rows: seven 1-warp steps
    ("Q4_K", 6, 2304, torch.float16),  # 9 super-blocks: one 1-warp step and a partial one (one super-block)
    ("Q4_K", 9, 5376, torch.bfloat16),  # 21 super-blocks: one 2-warp step and a partial one (5), ragged
    ("Q5_K", 37, 2048, torch.bfloat16),
    ("Q5_K", 19, 4096, torch.float16),
    ("Q5_K", 3, 14336, torch.bfloat16),
    ("Q5_K", 6, 2304, torch.float16),
    ("Q5_K", 9, 5376, torch.bfloat16),
])
def test_q4k_idot_one_row(device, monkeypatch, q4k_plans, name, n, k, dtype, request):
    """One row of bf16/fp16 x against Q4_K or Q5_K rows of at least one integer-dot step takes
    ops/ggml/q4k_idot.py: x quantized to int16 per 32-value sub-block stays within the error bar (random scale bytes:
    all eight sub-block encodings; Q5_K: random fifth bits), with K split as far as whole steps allow (merged in the
    launch; a second call with new x finds the counters rearmed); a row of no whole number of steps ends in a partial
    one, unsplit."""
    from mlx_native.ops.ggml import q4k_idot
    from test_quant import assert_merged_in_launch

    monkeypatch.setattr(q4k_idot, "PROGRAMS_PER_SM", 64)
    rng = rng_for(request)
    _check_matmul(device, name, 1, n, k, dtype, rng)
    _check_matmul(device, name, 1, n, k, dtype, rng)
    (plan,) = q4k_plans
    assert type(plan).__name__ == IDOT_PLANS[name]
    assert plan.launch.constexprs["EVEN_N"] == (n % plan.launch.constexprs["BN"] == 0)
    assert not plan.launch.constexprs["PREFETCH"]  # one step per program
    steps = k // 256 // (plan.launch.constexprs["CH"] // 4)
    tail = plan.launch.constexprs["TAIL"]
    assert tail == k // 256 % (plan.launch.constexprs["CH"] // 4) * 4 and plan.split == (1 if tail else steps)
    if plan.split > 1:
        assert_merged_in_launch(plan)


@pytest.mark.parametrize("name, bn, warps, prefetch, programs_per_sm", [
    ("Q4_K", 4, 1, True, 1), ("Q4_K", 8, 1, False, 1), ("Q4_K", 16, 1, True, 1), ("Q4_K", 8, 2, True, 1),
    ("Q4_K", 16, 2, False, 1),
    ("Q4_K", 4, 1, True, 64),  # prefetch with one step per split: the step reloads itself
    ("Q5_K", 8, 1, True, 1), ("Q5_K", 4, 2, False, 1), ("Q5_K", 4, 1, True, 64),
])
def test_q4k_idot_launch_configs(device, monkeypatch, name, bn, warps, prefetch, programs_per_sm, request):
    """The configurations the GPU sweeps time (bench/affine_mv_sweep.py --kernel q4k_idot, bench/gguf_mv_sweep.py
    --types Q5_K): row tiles of 4-16, 1-2 warps, register prefetch on and off, K split or not (one SM, so that the
    CPU core count does not split it); 21 rows (a ragged last tile) of 32 super-blocks."""
    import types

    from mlx_native.ops.ggml import q4k_idot

    monkeypatch.setattr(q4k_idot, "device_info", lambda device: types.SimpleNamespace(sm_count=1))
    n, k = 21, 8192
    raw = valid_blocks(name, n, k, rng_for(request))
    w = torch.from_numpy(gguf_values(raw, name, (n, k)))
    launch = q4k_idot.Q5kIdotLaunch if name == "Q5_K" else q4k_idot.Q4kIdotLaunch
    plan = launch(n, k, torch.bfloat16, torch.device(device), bn=bn, warps=warps, programs_per_sm=programs_per_sm,
                  prefetch=prefetch)
    for _ in range(2):
        x = randn(1, k, dtype=torch.bfloat16)
        out = plan(x.to(device), raw_tensor(raw, device))
        assert_error_bar(out.cpu(), x.double() @ w.double().T, x @ w.to(torch.bfloat16).T,
                         what=f"BN{bn} warps{warps} prefetch{prefetch} split{plan.split}")
    steps = k // 256 // (8 * warps)
    assert plan.split == (1 if programs_per_sm == 1 else steps)
    assert plan.launch.constexprs["PREFETCH"] == prefetch and plan.launch.constexprs["CH"] == 32 * warps


@pytest.mark.parametrize("name", ["Q4_K", "Q5_K"])
@pytest.mark.parametrize("case", X_RANGES)
def test_q4k_idot_x_ranges(device, q4k_plans, case, name, request):
    """x's per-sub-block int16 scale follows each 32 values' magnitude: a 1000x outlier in some sub-blocks, values
    around 1e-30, all-zero sub-blocks, and sub-blocks whose magnitudes span 2**-60..2**60."""
    n, k, dtype = 24, 2048, torch.bfloat16
    raw = valid_blocks(name, n, k, rng_for(request))
    w = torch.from_numpy(gguf_values(raw, name, (n, k)))
    x = x_of_range(case, k, 32).to(dtype)
    out = mn.ggml_matmul(x.to(device), raw_tensor(raw, device), name, (n, k))
    assert _plan_names(q4k_plans) == [IDOT_PLANS[name]]
    assert_error_bar(out.cpu(), x.double() @ w.double().T, x @ w.to(dtype).T, what=case)


@pytest.mark.parametrize("name, dtype", [("Q4_K", torch.bfloat16), ("Q4_K", torch.float16), ("Q5_K", torch.float16)])
def test_q4k_idot_keeps_inf_and_nan(device, q4k_plans, name, dtype, request):
    """Inf / NaN in x reach the output through the sub-blocks' float sums (the integers cannot carry them): the
    outputs are non-finite exactly where the fp64 oracle's are."""
    n, k = 16, 2048
    raw = valid_blocks(name, n, k, rng_for(request))
    w = torch.from_numpy(gguf_values(raw, name, (n, k))).double()
    for bad in (float("inf"), float("-inf"), float("nan")):
        x = randn(1, k, dtype=dtype)
        x[0, 100] = bad
        out = mn.ggml_matmul(x.to(device), raw_tensor(raw, device), name, (n, k)).cpu()
        oracle = x.double() @ w.T
        assert not torch.isfinite(oracle).any()
        assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), bad
    assert set(_plan_names(q4k_plans)) == {IDOT_PLANS[name]}


def test_q4k_idot_switch(device, monkeypatch, q4k_plans, request):
    """``MLX_NATIVE_GGML_IDOT=0`` (settings.ggml_idot) keeps one-row Q4_K matmuls on q4k_mv; rows under one
    integer-dot step (K = 1280: 5 super-blocks) stay there with it on."""
    from mlx_native.runtime import env, plans

    assert not env.parse_settings({"MLX_NATIVE_GGML_IDOT": "0"}).ggml_idot
    assert env.parse_settings({}).ggml_idot
    rng = rng_for(request)
    _check_matmul(device, "Q4_K", 1, 40, 2048, torch.bfloat16, rng)
    _check_matmul(device, "Q4_K", 1, 40, 1280, torch.bfloat16, rng)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, ggml_idot=False))
    plans.clear_all()
    _check_matmul(device, "Q4_K", 1, 40, 2048, torch.bfloat16, rng)
    assert _plan_names(q4k_plans) == ["Q4kIdotLaunch", "Q4kMvLaunch", "Q4kMvLaunch"]


def test_q4k_idot_step_rule():
    """Steps are 8 super-blocks of a row per warp, up to 2 warps; rows of no whole number of steps end in a partial
    one, except for gate/up pairs and the multi-row kernel (``pairs``); rows under one step, an fp32 result,
    several rows of x and other types are not taken."""
    from mlx_native.ops.ggml import q4k_idot

    assert q4k_idot.step_warps(4096) == 2 and q4k_idot.step_warps(8192) == 2
    assert q4k_idot.step_warps(14336) == 1 and q4k_idot.step_warps(2048) == 1  # 56 = 7 x 8 super-blocks
    assert q4k_idot.step_warps(1280) == 0 and q4k_idot.step_warps(1536) == 0
    q4k = formats.BY_NAME["Q4_K"].id
    bf16 = torch.bfloat16
    assert q4k_idot.supports(q4k, bf16, bf16, 1, 4096, 10)
    assert q4k_idot.supports(q4k, torch.float16, torch.float16, 1, 4096, 10)
    assert not q4k_idot.supports(q4k, bf16, torch.float32, 1, 4096, 10)
    assert not q4k_idot.supports(q4k, bf16, bf16, 2, 4096, 10)
    assert not q4k_idot.supports(formats.BY_NAME["Q4_0"].id, bf16, bf16, 1, 4096, 10)
    assert not q4k_idot.supports(q4k, bf16, bf16, 1, 1536, 10)
    assert q4k_idot.partial_warps(5376) == 2 and q4k_idot.partial_warps(2304) == 1 and q4k_idot.partial_warps(1536) == 0
    assert q4k_idot.supports(q4k, bf16, bf16, 1, 5376, 10) and q4k_idot.supports(q4k, bf16, bf16, 1, 11008, 10)
    assert not q4k_idot.supports(q4k, bf16, bf16, 1, 5376, 10, pairs=True)
    q5k = formats.BY_NAME["Q5_K"].id  # the same rules; 2-4 rows stay on q4k_mv's MR rows
    assert q4k_idot.supports(q5k, bf16, bf16, 1, 4096, 10) and q4k_idot.supports(q5k, bf16, bf16, 1, 5376, 10)
    assert not q4k_idot.supports(q5k, bf16, bf16, 2, 4096, 10) and not q4k_idot.supports(q5k, bf16, bf16, 1, 1536, 10)
    assert not q4k_idot.supports(q5k, bf16, torch.float32, 1, 4096, 10)


def test_q5k_idot_tiles(monkeypatch):
    """Q5_K rows of one whole integer-dot step take 8-row tiles (plain calls); longer rows, the gate/up pairs, the norm
    handoff roles and Q4_K keep 4 (session 36 run 1)."""
    from mlx_native.ops.ggml import q4k_idot

    bf16, cpu = torch.bfloat16, torch.device("cpu")
    monkeypatch.setattr(q4k_idot, "device_info", lambda device: types.SimpleNamespace(sm_count=132))
    bn = {(cls.__name__, n, k, role): cls(n, k, bf16, cpu, **dict([role] if role else [])).launch.constexprs["BN"]
          for cls in (q4k_idot.Q4kIdotLaunch, q4k_idot.Q5kIdotLaunch) for n, k in ((4096, 4096), (2048, 2048),
                                                                                   (4096, 14336), (4096, 8192))
          for role in (None, ("act", 0), ("hand_off", True))}
    assert {key for key, v in bn.items() if v == 8} == {("Q5kIdotLaunch", 4096, 4096, None),
                                                        ("Q5kIdotLaunch", 2048, 2048, None)}


def test_q4k_idot_two_warps_on_small_grids(device, monkeypatch, request):
    """Rows of whole 1-warp steps only take 2-warp steps and a partial last one where the grid has fewer than
    ``TWO_WARPS_BELOW_TILES_PER_SM`` row tiles per SM (132 SMs: 14336 x 2048 has 512 tiles of 4 rows, 14336 x 4096
    1024); gate/up pairs (no partial step), norm handoff roles and rows of whole 2-warp steps keep theirs. The
    result of a 2-warp plan on one SM matches the fp64 reference."""
    from mlx_native.ops.ggml import q4k_idot

    bf16, cpu = torch.bfloat16, torch.device("cpu")
    monkeypatch.setattr(q4k_idot, "device_info", lambda device: types.SimpleNamespace(sm_count=132))
    for n, k, ch, tail, prefetch in ((2048, 14336, 64, 32, False), (1024, 6144, 64, 32, False),
                                     (4096, 14336, 32, 0, True), (3072, 14336, 32, 0, True), (1024, 8192, 64, 0, False),
                                     (1024, 2048, 32, 0, False)):
        c = q4k_idot.Q4kIdotLaunch(n, k, bf16, cpu).launch.constexprs
        assert (c["CH"], c["TAIL"], c["PREFETCH"]) == (ch, tail, prefetch), (n, k)
    assert q4k_idot.Q4kIdotLaunch(1024, 14336, bf16, cpu, act=0).launch.constexprs["CH"] == 32
    assert q4k_idot.Q4kIdotLaunch(1024, 14336, bf16, cpu, hand_off=True).launch.constexprs["CH"] == 32
    monkeypatch.setattr(q4k_idot, "device_info", lambda device: types.SimpleNamespace(sm_count=1))
    n, k = 3, 6144
    raw = valid_blocks("Q4_K", n, k, rng_for(request))
    w = torch.from_numpy(gguf_values(raw, "Q4_K", (n, k)))
    plan = q4k_idot.Q4kIdotLaunch(n, k, bf16, torch.device(device))
    assert plan.launch.constexprs["CH"] == 64 and plan.launch.constexprs["TAIL"] == 32
    x = randn(1, k, dtype=bf16)
    assert_error_bar(plan(x.to(device), raw_tensor(raw, device)).cpu(), x.double() @ w.double().T,
                     x @ w.to(bf16).T, what="2 warps, partial step")


MMV_TYPES = ("Q4_0", "Q4_1", "Q4_K")


@pytest.mark.parametrize("name", MMV_TYPES)
@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matmul_tensor_core_decode(device, mmv_launches, name, m, dtype, request):
    """1-16 bf16/fp16 rows on Q4_0 / Q4_1 / Q4_K blocks take the tensor-core decode kernel:
    N = 72 (a partial second 64-feature tile), K = 1024 (32 blocks, 4 super-blocks). Outputs are
    NaN-prefilled (conftest), so an unwritten element fails the error bar."""
    _check_matmul(device, name, m, 72, 1024, dtype, rng_for(request))
    assert [p.launch.constexprs["FMT"] for p in mmv_launches] == [formats.BY_NAME[name].id], "mmv kernel not used"
    c = mmv_launches[0].launch.constexprs  # x tiles of 8 rows for packed Q4_K tiles of up to 8 rows (Q4K_MP8)
    assert c["MP"] == (8 if c["PACKED"] and name == "Q4_K" and m <= 8 else 16)


@pytest.mark.parametrize("name, k", [
    ("Q4_0", 576),  # 18 blocks: 9 two-block steps, split 10 + 8
    ("Q4_1", 608),  # 19 blocks: one-block steps, split unevenly
    ("Q4_1", 576),  # 18 blocks: packed two-block steps (prescaled rows), split unevenly
    ("Q4_K", 1280),  # 5 super-blocks: split 3 + 2
])
@pytest.mark.parametrize("m, dtype", [(1, torch.bfloat16), (16, torch.float16)])
def test_matmul_tensor_core_decode_uneven_split(device, mmv_launches, name, k, m, dtype, request):
    """The K split of the decode kernel (fp32 partials, one tile of 40 features) with a short last split."""
    _check_matmul(device, name, m, 40, k, dtype, rng_for(request))
    (plan,) = mmv_launches
    split, per_split = plan.split, plan.ints[-1]
    assert split > 1 and (k // 32) % per_split != 0, (split, per_split)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
@pytest.mark.parametrize("m, dtype", [(3, torch.bfloat16), (16, torch.float16)])
def test_matmul_tensor_core_decode_wide_steps(device, monkeypatch, name, m, dtype, request):
    """Packed Q4_0 / Q4_1 tiles in wide steps (from 2 rows, rows of a multiple of 8 blocks: steps of 8 blocks, 144 /
    160 bytes, dequantized word by word, the words or halves holding scales meeting x = 0), with a K split whose
    last split is short: 40 blocks in steps of 8, split 3 + 2 steps; 40 features, one partial tile."""
    from mlx_native.ops.quant import mmv
    from mlx_native.runtime import env

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))
    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    _check_matmul(device, name, m, 40, 1280, dtype, rng_for(request))
    (plan,) = built
    assert plan.launch.constexprs["PACKED"] and plan.launch.constexprs["GPS"] == 8 and plan.wide_x is not None
    assert (plan.split, plan.ints[-1]) == (2, 24)


@pytest.mark.parametrize("name, m, dtype", [("Q4_K", 100, torch.bfloat16), ("Q4_0", 40, torch.float16),
                                            ("Q4_1", 24, torch.bfloat16), ("Q4_1", 64, torch.float16)])
def test_matmul_tensor_core_mid_rows(device, monkeypatch, name, m, dtype, request):
    """17-128 rows of x (Q4_0 / Q4_1: 17-64) take the tensor-core decode kernel (``mmv.MID_ROWS_MAX``: x tiles of the
    rows padded to a power of two; ``mmv.MID_WIDE``: 128-feature tiles of 8 warps), within the error bar of the fp64
    oracle."""
    from mlx_native.ops.quant import mmv

    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    _check_matmul(device, name, m, 40, 512, dtype, rng_for(request))
    (plan,) = built
    consts = plan.launch.constexprs
    assert consts["MP"] == triton.next_power_of_2(m) and consts["PACKED"]
    lo, hi = mmv.MID_WIDE.get(plan.fmt, (0, 0))
    assert consts["BN"] == (mmv.MID_WIDE_BN if lo <= m <= hi else mmv.MMV_BN_ROWS)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matmul_tensor_core_decode_q40_packed_extreme_scales(device, monkeypatch, dtype, request):
    """Packed Q4_0 tiles with scales from fp16's extremes (65504, subnormals, +-0, +-inf, NaN) in half the weight
    rows (finite ones only in the other half; for an fp16 x only the small ones): outputs are non-finite exactly
    where the oracle rounded to x's dtype is, the finite ones within the error bar. The tiles compute ``(q - 8) d``
    with no ``-8 d`` term, which fp16 overflows from ``|d| > 8188``."""
    from mlx_native.ops.quant import mmv
    from mlx_native.runtime import env

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))
    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    m, n, k = 5, 32, 512
    rng = rng_for(request)
    raw = crafted_blocks("Q4_0", n * k // 32, rng, extreme=True).reshape(n, k // 32, 18)
    finite_vals = EXTREME[np.isfinite(EXTREME) & ((np.abs(EXTREME) < 1) | (dtype == torch.bfloat16))]
    raw[: n // 2, :, 0:2] = rng.choice(finite_vals, (n // 2, k // 32)).astype(np.float16).view(np.uint8).reshape(
        n // 2, k // 32, 2)
    w = oracle_weight(raw.reshape(-1), "Q4_0", (n, k))
    x = randn(m, k, dtype=dtype)
    out = mn.ggml_matmul(x.to(device), raw_tensor(raw.reshape(-1), device), "Q4_0", (n, k)).cpu()
    (plan,) = built
    assert plan.launch.constexprs["PACKED"]
    oracle, baseline = x.double() @ w.double().T, x @ w.to(dtype).T
    finite = torch.isfinite(oracle.to(dtype))
    assert torch.equal(torch.isfinite(out), finite)
    ok = finite & torch.isfinite(baseline)
    assert 4 <= int(ok.sum()) < m * n, int(ok.sum())
    assert_error_bar(out[ok], oracle[ok], baseline[ok], what=f"Q4_0 packed extreme scales {dtype}")


def test_wide_rows_leave_q4_mv(monkeypatch):
    """3-4 rows of x against a Q4_0 / Q4_1 matrix of at least ``mmv.WIDE_FEW_ROWS_MIN_WEIGHTS`` weights leave
    ``q4_mv``'s rows kernel for the packed tensor-core tiles of 8-block steps (session 28, 4096 x 14336 at 4 rows:
    28.8 against 35.5 us (Q4_0), 31.8 against 37.1 (Q4_1)); 2 rows, smaller matrices and ``MLX_NATIVE_MMV=off``
    keep it."""
    from mlx_native.ops.ggml import kernel, q4_mv
    from mlx_native.runtime import env

    bf16, cpu = torch.bfloat16, torch.device("cpu")
    for tid in (Q4_0_ID, Q4_1_ID):
        for m in (3, 4):
            assert kernel.streamed_launch(tid, bf16, m, 14336, 4096, 4096, cpu) is None, (tid, m)
        for m, n in ((2, 14336), (4, 4096), (3, 4096)):
            assert kernel.streamed_launch(tid, bf16, m, n, 4096, 4096, cpu).func is q4_mv.Q4MvLaunch, (tid, m, n)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="off"))
    assert kernel.streamed_launch(Q4_0_ID, bf16, 4, 14336, 4096, 4096, cpu).func is q4_mv.Q4MvLaunch


def test_large_q4k_two_rows_leave_idot_rows(monkeypatch):
    """2 rows of x against a Q4_K matrix of at least ``mmv.Q4K_OVER_IDOT_M2_MIN_WEIGHTS`` weights leave the
    integer-dot rows kernel for the packed tensor-core tiles (session 30 run 2, 14336 x 4096: 27.6 against 23.1 us);
    smaller matrices and ``MLX_NATIVE_MMV=off`` keep it; its prefetch is on from ``PREFETCH_MIN_WEIGHTS`` below
    ``PREFETCH_BELOW_ROWS_PER_SM`` rows per SM."""
    from mlx_native.ops.ggml import kernel, q4k_idot_rows
    from mlx_native.ops.quant import mmv
    from mlx_native.runtime import env

    bf16, cpu, q4k = torch.bfloat16, torch.device("cpu"), formats.BY_NAME["Q4_K"].id
    monkeypatch.setattr(kernel, "device_info", lambda device: types.SimpleNamespace(sm_count=132))
    monkeypatch.setattr(q4k_idot_rows, "device_info", lambda device: types.SimpleNamespace(sm_count=132))
    big = mmv.Q4K_OVER_IDOT_M2_MIN_WEIGHTS // 4096
    assert kernel.streamed_launch(q4k, bf16, 2, big, 4096, 4096, cpu) is None
    for n, prefetch in ((big - 128, True), (2048, True), (1024, False)):
        build = kernel.streamed_launch(q4k, bf16, 2, n, 4096, 4096, cpu)
        assert build.func is q4k_idot_rows.Q4kIdotRowsLaunch, n
        assert build().launch.constexprs["PREFETCH"] is prefetch, n
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="off"))
    build = kernel.streamed_launch(q4k, bf16, 2, 14336, 4096, 4096, cpu)
    assert build.func is q4k_idot_rows.Q4kIdotRowsLaunch and not build().launch.constexprs["PREFETCH"]


@pytest.mark.parametrize("name, k", [("Q4_0", 128), ("Q4_1", 96), ("Q4_1", 128), ("Q4_K", 256)])
def test_matmul_tensor_core_decode_no_split(device, mmv_launches, name, k, request):
    """A K too short to split: one program per tile stores the 16-bit output itself (3 tiles,
    the last one partial; x with a leading batch dim: 2 x 3 rows)."""
    _check_matmul(device, name, 3, 130, k, torch.bfloat16, rng_for(request), lead=(2,))
    assert [p.split for p in mmv_launches] == [1]


def test_matmul_tensor_core_decode_fallbacks(device, mmv_launches, monkeypatch, request):
    """Q4_0 with an odd number of blocks per row (rows not 4-byte aligned), fp32 x, other types and
    ``MLX_NATIVE_MMV=0`` run the other kernels."""
    import dataclasses

    from mlx_native.runtime import env, plans

    rng = rng_for(request)
    _check_matmul(device, "Q4_0", 3, 40, 96, torch.bfloat16, rng)
    _check_matmul(device, "Q4_K", 3, 40, 256, torch.float32, rng)
    _check_matmul(device, "Q8_0", 3, 40, 256, torch.bfloat16, rng)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="off"))
    plans.clear_all()
    _check_matmul(device, "Q4_K", 1, 40, 256, torch.bfloat16, rng)
    assert mmv_launches == []


# --------------------------------------------------------------------------- embedding


@pytest.mark.parametrize("name", ("Q8_0", "Q4_1", "Q6_K", "F16"))
def test_embedding_rows(device, name, request):
    rng = rng_for(request)
    vocab, hidden = 11, 256
    raw = float_raw(name, vocab, hidden) if name == "F16" else valid_blocks(name, vocab, hidden, rng)
    ids = torch.tensor([[3, 0, 10], [7, 7, 1]])
    out = mn.ggml_embedding(ids.to(device), raw_tensor(raw, device), name, (vocab, hidden), dtype=torch.bfloat16)
    table = torch.from_numpy(gguf_values(raw, name, (vocab, hidden)))
    assert out.shape == (2, 3, hidden)
    assert torch.equal(out.cpu(), table[ids].to(torch.bfloat16))


def test_embedding_strided_ids(device, request):
    """A decode step's ids column ``tokens[:, t:t+1]`` (its flattening a strided view) reads the right rows."""
    raw = valid_blocks("Q8_0", 11, 64, rng_for(request))
    tokens = torch.randint(0, 11, (3, 7))
    out = mn.ggml_embedding(tokens.to(device)[:, 4:5], raw_tensor(raw, device), "Q8_0", (11, 64), dtype=torch.float32)
    assert torch.equal(out.cpu(), torch.from_numpy(gguf_values(raw, "Q8_0", (11, 64)))[tokens[:, 4:5]])


# --------------------------------------------------------------------------- bad input


class TestBadInput:
    def test_unsupported_type_is_named(self):
        raw = torch.zeros(66, dtype=torch.uint8)
        with pytest.raises(mn.UnsupportedError, match=r"ggml_dequantize: ggml_type IQ2_XXS \(id 16\) is not supported; "
                                                      r"supported: F32, F16, Q4_0"):
            mn.ggml_dequantize(raw, gguf.GGMLQuantizationType.IQ2_XXS, (256,))
        with pytest.raises(mn.UnsupportedError, match="ggml_matmul: ggml_type 'Q8_K' is not supported"):
            mn.ggml_matmul(torch.randn(1, 256), raw, "Q8_K", (1, 256))
        with pytest.raises(mn.InvalidArgumentError, match="ggml_type must be an int"):
            mn.ggml_dequantize(raw, 2.5j, (32,))

    def test_raw_not_whole_blocks(self):
        with pytest.raises(mn.FormatError, match="ggml_dequantize: raw has 37 bytes, not a whole number of Q4_0 blocks of 18 bytes"):
            mn.ggml_dequantize(torch.zeros(37, dtype=torch.uint8), "Q4_0", (64,))

    def test_raw_size_does_not_match_shape(self):
        raw = torch.zeros(2 * 144, dtype=torch.uint8)
        with pytest.raises(mn.FormatError, match=r"ggml_matmul: raw holds 2 Q4_K blocks \(288 bytes\) but shape \(4, 256\) needs 4"):
            mn.ggml_matmul(torch.randn(1, 256), raw, "Q4_K", (4, 256))

    def test_k_not_multiple_of_block(self):
        with pytest.raises(mn.InvalidArgumentError, match=r"the last dim of shape \(2, 100\) is not a multiple of 32, the block size of Q8_0"):
            mn.ggml_dequantize(torch.zeros(2 * 4 * 34, dtype=torch.uint8), "Q8_0", (2, 100))

    def test_x_features_and_dtypes(self):
        raw = torch.zeros(2 * 34, dtype=torch.uint8)
        with pytest.raises(mn.InvalidArgumentError, match="ggml_matmul: x has 64 features .* K=32"):
            mn.ggml_matmul(torch.randn(1, 64), raw, "Q8_0", (2, 32))
        with pytest.raises(mn.UnsupportedDTypeError, match="ggml_matmul: raw has dtype float32"):
            mn.ggml_matmul(torch.randn(1, 32), torch.zeros(17), "Q8_0", (2, 32))
        with pytest.raises(mn.InvalidArgumentError, match="raw must be contiguous"):
            mn.ggml_dequantize(torch.zeros(2, 68, dtype=torch.uint8)[:, :34], "Q8_0", (2, 32))

    def test_embedding_ids_out_of_range(self):
        raw = torch.zeros(3 * 34, dtype=torch.uint8)
        with pytest.raises(mn.InvalidArgumentError, match="ggml_embedding: ids holds 3, out of range for 3 rows"):
            mn.ggml_embedding(torch.tensor([0, 3]), raw, "Q8_0", (3, 32))


# --------------------------------------------------------------------------- GPU, real sizes


@pytest.mark.gpu
@pytest.mark.parametrize("name", MATMUL_TYPES)
@pytest.mark.parametrize("m", [1, 3, 16, 17, 300, 1024])
def test_gpu_matmul_real_sizes(name, m):
    rng = np.random.default_rng(m)
    n, k = 4000, 4096
    _check_gpu(name, m, n, k, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ("Q4_0", "Q4_K"))
@pytest.mark.parametrize("nk", [(4096, 14336), (14336, 4096)])
def test_gpu_matmul_llama_shapes(name, nk):
    _check_gpu(name, 1, *nk, np.random.default_rng(1))
    _check_gpu(name, 8, *nk, np.random.default_rng(2))


def _check_gpu(name, m, n, k, rng):
    t = formats.BY_NAME[name]
    raw = crafted_blocks(name, n * k // t.block_elems, rng)
    rt = torch.from_numpy(raw).cuda()
    w = mn.ggml_dequantize(rt, name, (n, k))
    x = randn(m, k, dtype=torch.bfloat16, device="cuda")
    out = mn.ggml_matmul(x, rt, name, (n, k))
    assert_error_bar(out, x.double() @ w.double().T, x @ w.to(torch.bfloat16).T, what=f"{name} {m}x{n}x{k}")


@pytest.mark.gpu
@pytest.mark.parametrize("nk", [(14336, 4096), (4096, 14336), (4096, 4096)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("idot", [True, False])
def test_gpu_q4k_idot_real_sizes(monkeypatch, q4k_plans, nk, dtype, idot):
    """Llama-3-8B's Q4_K shapes on the GPU, one row of x, through the integer-dot kernel (``dp2a``) and with it
    off through q4k_mv, against the fp64 oracle; repeated calls (new x) reuse the plan."""
    from mlx_native.runtime import env

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, ggml_idot=idot))
    n, k = nk
    raw = torch.from_numpy(crafted_blocks("Q4_K", n * k // 256, np.random.default_rng(k))).cuda()
    w64 = mn.ggml_dequantize(raw, "Q4_K", (n, k)).double()
    for _ in range(3):
        x = randn(1, k, dtype=dtype, device="cuda")
        out = mn.ggml_matmul(x, raw, "Q4_K", (n, k))
        assert_error_bar(out, x.double() @ w64.T, x @ w64.to(dtype).T, what=f"Q4_K 1x{n}x{k} {dtype}")
    assert _plan_names(q4k_plans) == ["Q4kIdotLaunch" if idot else "Q4kMvLaunch"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", QTYPES)
def test_gpu_dequantize_bit_exact(name):
    rng = np.random.default_rng(0)
    t = formats.BY_NAME[name]
    raw = crafted_blocks(name, 4096, rng, extreme=True)
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = gguf_values(raw, name, (-1,))
    assert_bit_exact(mn.ggml_dequantize(torch.from_numpy(raw).cuda(), name, (4096 * t.block_elems,)), theirs, name)


@pytest.mark.parametrize("name", ("Q4_0", "Q4_K", "Q8_0"))
def test_matmul_decode_swapped_tiles(device, name, request):
    """2-16 rows with N >= 64: the decode kernel runs W @ x.T on tensor cores."""
    _check_matmul(device, name, 6, 72, 512, torch.bfloat16, rng_for(request))


@pytest.mark.parametrize("name", MATMUL_TYPES)
def test_matmul_gemv_whole_steps(device, name, request):
    """One row, N a multiple of the row tile and K of the step: the mask-free mat-vec path."""
    _check_matmul(device, name, 1, 32, 1024, torch.bfloat16, rng_for(request))


@pytest.mark.parametrize("name, m, k, expected", [
    ("Q8_0", 1, 512, "Q8MvLaunch"),
    ("Q8_0", 4, 512, "Q8MvLaunch"),  # 2-4 rows: its MR rows
    ("Q6_K", 1, 512, "Q6kMvLaunch"),
    ("Q6_K", 3, 512, "Q6kMvLaunch"),  # 2-4 rows: its MR rows
    ("Q5_K", 1, 512, "Q5kMvLaunch"),  # under one integer-dot step (8 super-blocks)
    ("Q5_K", 1, 2048, "Q5kIdotLaunch"),
    ("Q5_K", 2, 512, "Q5kMvLaunch"),  # 2-4 rows under one integer-dot step: its MR rows
    ("Q5_K", 2, 2048, "Q5kIdotRowsLaunch"),  # (3-4 rows: block_mmv)
    ("Q4_K", 1, 2048, "Q4kIdotLaunch"),
    ("Q4_K", 2, 2048, "Q4kIdotRowsLaunch"),
    ("Q4_K", 3, 2048, "MmvLaunch"),  # more rows than the streamed variants take: the packed tensor-core kernel
    ("Q4_0", 1, 512, "Q4IdotLaunch"),
    ("Q4_1", 1, 1024, "Q4IdotLaunch"),
    ("Q4_0", 2, 512, "Q4MvLaunch"),
    ("Q4_1", 4, 512, "Q4MvLaunch"),
])
def test_matmul_routes_to_streamed_kernels(device, monkeypatch, name, m, k, expected, request):
    """``ggml_matmul``'s decode routing under the default settings: one row of Q8_0 / Q6_K / Q5_K / Q4_K (Q4_K and
    Q5_K rows of at least one integer-dot step: the integer-dot kernel), 2 rows of
    Q4_K / Q5_K and 2-4 of Q4_0 / Q4_1 / Q6_K / Q8_0 take the streamed kernels (and the result is right), more rows
    of Q4_K the tensor-core decode kernel."""
    from mlx_native.ops.ggml import q4_idot, q4_mv, q4k_idot, q4k_idot_rows, q4k_mv, q6k_mv, q8_mv
    from mlx_native.ops.quant import gemv, mmv
    from mlx_native.runtime import plans

    monkeypatch.setattr(q4_mv, "ROWS_MIN_TILES_PER_SM", 0)  # small matrices too, whatever the SM count
    built = spy_plans(monkeypatch, q4_mv.Q4MvLaunch, q4_idot.Q4IdotLaunch, q4k_idot.Q4kIdotLaunch,
                      q4k_idot_rows.Q4kIdotRowsLaunch,
                      q4k_mv.Q5kMvLaunch, q6k_mv.Q6kMvLaunch, q8_mv.Q8MvLaunch, mmv.MmvLaunch, gemv.GemvLaunch)
    request.addfinalizer(plans.clear_all)
    plans.clear_all()
    _check_matmul(device, name, m, 24, k, torch.bfloat16, rng_for(request))
    assert [type(p).__name__ for p in built] == [expected]
    if expected in ("Q4MvLaunch", "Q5kMvLaunch", "Q6kMvLaunch", "Q8MvLaunch"):
        assert built[0].launch.constexprs["MR"] == m


@pytest.mark.parametrize("name, m, slices", [
    ("Q6_K", 5, (4, 1)), ("Q6_K", 7, (4, 3)), ("Q6_K", 8, (4, 4)), ("Q8_0", 5, (4, 1)), ("Q5_K", 5, (4, 1)),
    ("Q8_0", 6, ()), ("Q5_K", 8, ()), ("Q6_K", 9, ()),  # the tiled decode kernel
])
def test_matmul_rows_as_streamed_slices(device, monkeypatch, name, m, slices, request):
    """5-8 rows of Q6_K and 5 of Q8_0 / Q5_K run as slices of 4 rows on the streamed kernels (a plan each, their
    rows in order; x a row-strided view on the CPU); the result within the error bar; other row counts stay on the
    tiled decode kernel. (Q6_K and Q8_0 with ``MLX_NATIVE_MMV=off``: else ``block_mmv`` has these rows.)"""
    from mlx_native.ops.ggml import kernel
    from mlx_native.runtime import env, plans

    request.addfinalizer(plans.clear_all)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="off"))
    built = spy_plans(monkeypatch, kernel.MatmulPlan)
    n, k = 24, 512
    raw = valid_blocks(name, n, k, rng_for(request))
    w = torch.from_numpy(gguf_values(raw, name, (n, k)))
    x = randn(m, k + 64, dtype=torch.bfloat16)[:, :k]
    out = mn.ggml_matmul(x.to(device), raw_tensor(raw, device), name, (n, k))
    assert kernel.row_slices(formats.BY_NAME[name].id, m) == slices
    plan = built[0]
    assert plan.kind == ("streamed slices" if slices else "decode")
    if slices:
        assert [(i, rows) for i, rows, _ in plan.slices] == [(sum(slices[:j]), r) for j, r in enumerate(slices)]
    assert out.shape == (m, n)
    assert_error_bar(out.cpu(), x.double() @ w.double().T, x @ w.to(torch.bfloat16).T, what=f"{name} {m} rows")


@pytest.mark.parametrize("name, k", [("Q8_0", 512), ("Q6_K", 512), ("Q4_0", 512), ("Q4_1", 1024)])
def test_matmul_streamed_x_at_odd_element(device, monkeypatch, name, k, request):
    """The streamed kernels that read x as int32 words (pairs of values: q8_mv, q6k_mv, q4_idot) take an x view that
    starts at an odd element (copied first: a misaligned word load faults on the GPU)."""
    from mlx_native.runtime import plans

    request.addfinalizer(plans.clear_all)
    raw = valid_blocks(name, 24, k, rng_for(request))
    w = torch.from_numpy(gguf_values(raw, name, (24, k)))
    wide = randn(1, k + 1, dtype=torch.bfloat16)
    x = wide.to(device)[:, 1:]
    assert x.data_ptr() % 4 == 2
    out = mn.ggml_matmul(x, raw_tensor(raw, device), name, (24, k))
    xc = wide[:, 1:]
    assert_error_bar(out.cpu(), xc.double() @ w.double().T, xc @ w.to(torch.bfloat16).T, what=f"{name} odd x")


@pytest.mark.parametrize("name", ["Q4_K", "Q4_0"])
def test_streamed_rows_refuse_x_offsets_past_int32(monkeypatch, name):
    """The multi-row kernels index rows of x with int32 offsets: a row stride that puts the last row past 2**31
    elements leaves the call to the other kernels (the plan is never built)."""
    from mlx_native.ops.ggml import kernel, q4_mv

    monkeypatch.setattr(q4_mv, "ROWS_MIN_TILES_PER_SM", 0)
    tid, cpu = formats.BY_NAME[name].id, torch.device("cpu")
    assert kernel.streamed_launch(tid, torch.bfloat16, 2, 24, 2048, 2048, cpu) is not None
    assert kernel.streamed_launch(tid, torch.bfloat16, 2, 24, 2048, 2**31 - 2049, cpu) is not None  # 2**31 - 1
    assert kernel.streamed_launch(tid, torch.bfloat16, 2, 24, 2048, 2**31 - 2048, cpu) is None
    assert kernel.streamed_launch(tid, torch.bfloat16, 1, 24, 2048, 2**31, cpu) is not None  # one row: no stride
