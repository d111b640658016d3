"""The tensor-core decode kernel for GGUF Q6_K / Q8_0 / Q5_K and 4-64 rows of x (``ops/ggml/block_mmv.py``), through its
launch plan (``BlockMmvLaunch``) and through ``ggml_matmul``'s routing: ``gguf.quants`` dequantizes the oracle weight,
the fp64 product of x with it is the oracle, ``x @ w.to(dtype).T`` the error bar's baseline."""

import numpy as np
import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar, randn, spy_plans
from mlx_native.ops.ggml import formats
from test_ggml import crafted_blocks, oracle_weight, plan_output, raw_tensor, rng_for, valid_blocks
from test_ggml_q6k_mv import byte_sweep_blocks, quantized_blocks


def _blocks(name: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks of a quantized random weight (Q6_K in llama.cpp's reference quantizer's form: gguf cannot quantize it)."""
    return quantized_blocks(n, k, rng) if name == "Q6_K" else valid_blocks(name, n, k, rng)


def _sweep_blocks(name: str, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks whose code bytes (Q6_K: bytes 0-207, low nibbles, high pairs and scales; Q8_0: bytes 2-33; Q5_K: bytes
    4-175, scales and mins, high bits, nibbles) run through every value at every position over 256 blocks; ``d``
    random with both signs (Q5_K: ``dmin`` positive)."""
    if name == "Q6_K":
        return byte_sweep_blocks(n_blocks, rng)
    t = formats.BY_NAME[name]
    first = 2 if name == "Q8_0" else 4  # Q5_K: scales, mins, qh and qs
    raw = crafted_blocks(name, n_blocks, rng).reshape(n_blocks, t.block_bytes)
    width = t.block_bytes - first
    raw[:, first:] = ((np.arange(width)[None, :] + np.arange(n_blocks)[:, None] + int(rng.integers(0, 256))) % 256)
    return raw.reshape(-1)


def _run(device, raw: np.ndarray, name: str, m: int, n: int, k: int, dtype, pad: int = 0, x=None, plan=None,
         programs_per_sm: int = 2, baseline32: bool = False, prefetch=None):
    """``(out, oracle, baseline, plan)`` of ``m`` rows of x (the first ``k`` columns of a ``[m, k + pad]`` tensor)
    against the rows ``raw`` of type ``name``; ``programs_per_sm``: the plan's K split target (64: as many splits as
    steps allow, 0: none); ``prefetch``: the loop form (None: ``prefetch_rule``'s)."""
    from mlx_native.ops.ggml import block_mmv

    w = oracle_weight(raw, name, (n, k))
    if x is None:
        x = randn(m, k + pad, dtype=dtype)[:, :k]
    if plan is None:
        plan = block_mmv.BlockMmvLaunch(formats.BY_NAME[name].id, m, n, k, dtype, x.stride(0), torch.device(device),
                                        programs_per_sm, prefetch)
    return (*plan_output(device, plan, raw, w, x, baseline32), plan)


@pytest.mark.parametrize("name, m, n, k, dtype, pad, pps, split", [
    ("Q6_K", 5, 19, 512, torch.bfloat16, 0, 0, 1),  # four steps (half super-blocks), a ragged row tile, x tile of 8
    ("Q6_K", 8, 70, 768, torch.float16, 6, 0, 1),  # rows of 3 super-blocks (their alignment alternates), stride K + 6
    ("Q6_K", 7, 21, 256, torch.bfloat16, 0, 0, 1),  # one super-block a row
    ("Q6_K", 9, 64, 2816, torch.bfloat16, 2, 64, 4),  # x tile of 16 rows, 22 steps split 6 + 6 + 6 + 4, merged
    ("Q6_K", 16, 33, 4096, torch.float16, 0, 64, 8),  # sixteen rows, 32 steps split in eight
    ("Q6_K", 12, 40, 1536, torch.bfloat16, 3, 0, 1),  # an odd row stride: x copied to contiguous rows (read as words)
    ("Q6_K", 6, 130, 3072, torch.float16, 0, 64, 4),  # three row tiles, 24 steps split in four
    ("Q8_0", 5, 19, 128, torch.bfloat16, 0, 0, 1),  # one step of 4 blocks, a ragged row tile
    ("Q8_0", 8, 70, 640, torch.float16, 6, 0, 1),  # five steps (rows of 20 blocks), two row tiles, stride K + 6
    ("Q8_0", 11, 64, 2816, torch.bfloat16, 2, 64, 4),  # 22 steps split 6 + 6 + 6 + 4, merged in the launch
    ("Q8_0", 16, 33, 4096, torch.float16, 3, 64, 8),  # an odd row stride, 32 steps split in eight
    ("Q5_K", 5, 19, 512, torch.bfloat16, 0, 0, 1),  # four steps (half super-blocks), a ragged row tile
    ("Q5_K", 12, 70, 768, torch.float16, 6, 0, 1),  # rows of 3 super-blocks, two row tiles, stride K + 6
    ("Q5_K", 9, 64, 2816, torch.bfloat16, 3, 64, 4),  # an odd row stride, 22 steps split 6 + 6 + 6 + 4
    ("Q5_K", 6, 33, 4096, torch.float16, 0, 64, 8),  # 32 steps split in eight
    ("Q6_K", 17, 40, 1024, torch.bfloat16, 0, 0, 1),  # 17 rows: an x tile of 32
    ("Q8_0", 40, 21, 512, torch.float16, 2, 0, 1),  # 40 rows: an x tile of 64
    ("Q5_K", 64, 19, 768, torch.bfloat16, 0, 0, 1),  # 64 rows
])
def test_block_mmv_error_bar(device, name, m, n, k, dtype, pad, pps, split, request):
    """4-16 rows of x against quantized weights: every row within the error bar of the fp64 oracle (Q6_K weights are
    rounded twice, ``d sc`` then the product, as ``mmv``'s Q4_K tiles; Q8_0 columns once each), with one or several
    loop steps, blocks at both alignments, ragged row tiles, x rows inside a wider tensor, and a K split merged in the
    launch whose counters are back at zero for a second call; both forms of the loop (``PREFETCH``)."""
    from test_quant import assert_merged_in_launch

    raw = _blocks(name, n, k, rng_for(request))
    out, oracle, baseline, plan = _run(device, raw, name, m, n, k, dtype, pad, programs_per_sm=pps)
    assert_error_bar(out, oracle, baseline, what=f"{name} {m}x{n}x{k} {dtype}")
    c = plan.launch.constexprs
    assert c["FMT"] == formats.BY_NAME[name].id
    assert c["MP"] == next(rows for rows in (8, 16, 32, 64) if m <= rows)
    assert c["X_F16"] == (dtype == torch.float16)
    assert c["PREFETCH"] == (split == 1 or name != "Q8_0")  # (Q8_0's splits here: under 12 steps)
    row_bytes = formats.row_bytes(formats.BY_NAME[name], k)
    assert c["ROWS4"] == (row_bytes % 4 == 0)  # both Q6_K forms run in these cases (rows of 3 super-blocks: not)
    assert plan.ints == (m, n, k, k if pad % 2 else k + pad, row_bytes, -(-k // 128 // split))
    assert plan.split == split
    if split > 1:
        assert_merged_in_launch(plan)
        out2, oracle2, baseline2, _ = _run(device, raw, name, m, n, k, dtype, pad, plan=plan)
        assert_error_bar(out2, oracle2, baseline2, what=f"{name} {m}x{n}x{k} {dtype} second call")
        assert not plan.splitk.counters.any()


def test_block_mmv_launch_rules():
    """K split targets and loop forms: 4 programs per SM, 2 where the tiles are fewer than the SMs; the next step's
    words prefetched without a split, for Q6_K / Q5_K and for Q8_0 splits of 12 steps or more."""
    from mlx_native.ops.ggml import block_mmv

    q6, q8, q5 = (formats.BY_NAME[name].id for name in ("Q6_K", "Q8_0", "Q5_K"))
    assert block_mmv.programs_rule(224, 132) == 4 and block_mmv.programs_rule(64, 132) == 2
    assert block_mmv.programs_rule(132, 132) == 4
    for t in (q6, q8, q5):
        assert block_mmv.prefetch_rule(t, 1, 32)
    assert block_mmv.prefetch_rule(q5, 4, 8) and block_mmv.prefetch_rule(q5, 8, 14)
    assert block_mmv.prefetch_rule(q6, 4, 8) and block_mmv.prefetch_rule(q6, 16, 7)
    assert not block_mmv.prefetch_rule(q8, 4, 8) and not block_mmv.prefetch_rule(q8, 8, 11)
    assert block_mmv.prefetch_rule(q8, 8, 12) and block_mmv.prefetch_rule(q8, 8, 14)


@pytest.mark.parametrize("name, m, n, k, prefetch", [
    ("Q5_K", 6, 33, 4096, False), ("Q8_0", 9, 40, 3072, True), ("Q6_K", 5, 19, 2048, False),
])
def test_block_mmv_loop_form_knob(device, name, m, n, k, prefetch, request):
    """The loop forms the rules do not pick for a split K (the sweep's knob): within the error bar, merged in the
    launch."""
    from test_quant import assert_merged_in_launch

    raw = _blocks(name, n, k, rng_for(request))
    out, oracle, baseline, plan = _run(device, raw, name, m, n, k, torch.bfloat16, programs_per_sm=64,
                                       prefetch=prefetch)
    assert_error_bar(out, oracle, baseline, what=f"{name} {m}x{n}x{k} prefetch {prefetch}")
    assert plan.launch.constexprs["PREFETCH"] == prefetch and plan.split > 1
    assert_merged_in_launch(plan)


@pytest.mark.parametrize("name, m, dtype", [("Q6_K", 5, torch.bfloat16), ("Q6_K", 16, torch.float16),
                                            ("Q8_0", 6, torch.bfloat16), ("Q8_0", 12, torch.float16),
                                            ("Q5_K", 7, torch.bfloat16), ("Q5_K", 16, torch.float16)])
def test_block_mmv_every_byte_at_every_position(device, name, m, dtype, request):
    """Code bytes through every value at every position (256 blocks, at both alignments): within the error bar."""
    n, k = (32, 256) if name == "Q8_0" else (64, 1024)
    raw = _sweep_blocks(name, n * k // formats.BY_NAME[name].block_elems, rng_for(request))
    out, oracle, baseline, _ = _run(device, raw, name, m, n, k, dtype)
    assert_error_bar(out, oracle, baseline, what=f"{name} byte sweep {m} rows {dtype}")


@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
def test_block_mmv_rows_are_the_rows_of_x(device, name, request):
    """Each output row belongs to its row of x: rows that are power-of-two multiples of one another give outputs in
    the same ratios, bitwise, so a swapped or repeated row of x fails."""
    n, k = 24, 1024
    raw = _blocks(name, n, k, rng_for(request))
    x0 = randn(1, k, dtype=torch.bfloat16)
    f = (1.0, -2.0, 0.5, 4.0, -0.25, 8.0)
    x = torch.cat([s * x0 for s in f])
    out, oracle, baseline, _ = _run(device, raw, name, len(f), n, k, torch.bfloat16, x=x)
    assert_error_bar(out, oracle, baseline, what=f"{name} scaled rows")
    for r, s in enumerate(f):
        assert torch.equal(out[r], (s * out[0].float()).to(torch.bfloat16)), r


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the oracle's numpy
@pytest.mark.parametrize("name", ["Q6_K", "Q8_0"])
def test_block_mmv_extreme_d(device, name, request):
    """bf16 x, fp16 ``d`` of 65504, 3e4, 1e-5, 6e-8 (subnormal), +-0, +-Inf and NaN: the outputs are non-finite
    exactly where the fp64 oracle's are, the finite ones within the error bar of the fp32 product. (With fp16 x a
    scale past 65504 -- Q6_K ``d sc``, Q8_0 ``16 d`` -- is Inf, as most of the dequantized fp16 weights are.)"""
    n, m = 24, 5
    k = 1024 if name == "Q6_K" else 256  # 4 / 8 blocks a row: some rows finite
    t = formats.BY_NAME[name]
    raw = crafted_blocks(name, n * k // t.block_elems, rng_for(request), extreme=True)
    off = 208 if name == "Q6_K" else 0
    d = raw.reshape(-1, t.block_bytes)[:, off:off + 2].copy().view(np.float16)
    assert np.isinf(d).any() and np.isnan(d).any() and (np.abs(d) == 65504).any() and (d == 0).any()
    out, oracle, baseline, _ = _run(device, raw, name, m, n, k, torch.bfloat16, baseline32=True)
    finite = torch.isfinite(oracle)
    assert 0 < int(finite.sum()) < m * n
    assert torch.equal(torch.isfinite(out), finite)
    assert_error_bar(out, oracle, baseline, what=f"{name} extreme d")


@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_block_mmv_keeps_inf_and_nan_of_x(device, name, dtype, request):
    """Inf / NaN in a row of x reach that row's outputs and no other's."""
    n, k, m = 16, 1024, 6
    raw = _blocks(name, n, k, rng_for(request))
    for bad in (float("inf"), float("-inf"), float("nan")):
        x = randn(m, k, dtype=dtype)
        x[3, 700] = bad
        out, oracle, _, _ = _run(device, raw, name, m, n, k, dtype, x=x)
        assert not torch.isfinite(oracle[3]).any() and torch.isfinite(oracle[[0, 1, 2, 4, 5]]).all()
        assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), bad


def test_block_mmv_supports(monkeypatch):
    """The gate: ``ROWS_MIN[type]`` to ``ROWS_MAX`` rows of bf16/fp16 x against Q6_K rows of whole super-blocks or
    Q8_0 rows of whole 128-value steps under 2 GiB, while ``MLX_NATIVE_MMV`` is not off; the plan refuses others."""
    import dataclasses

    from mlx_native.ops.ggml import block_mmv
    from mlx_native.runtime import env

    q6, q8, bf = formats.BY_NAME["Q6_K"].id, formats.BY_NAME["Q8_0"].id, torch.bfloat16
    nbytes = 4096 * 16 * 210
    for t in (q6, q8):
        lo = block_mmv.ROWS_MIN[t]
        for m in range(lo, block_mmv.ROWS_MAX + 1):
            assert block_mmv.supports(t, bf, m, 4096, nbytes) and block_mmv.supports(t, torch.float16, m, 4096, nbytes)
        assert not block_mmv.supports(t, bf, lo - 1, 4096, nbytes)
        assert not block_mmv.supports(t, bf, block_mmv.ROWS_MAX + 1, 4096, nbytes)
        assert not block_mmv.supports(t, torch.float32, 8, 4096, nbytes)
        assert not block_mmv.supports(t, bf, 8, 4096, 2**31)
    assert block_mmv.supports(q6, bf, 8, 768, nbytes) and not block_mmv.supports(q6, bf, 8, 4096 + 128, nbytes)
    assert block_mmv.supports(q8, bf, 8, 4096 + 128, nbytes) and not block_mmv.supports(q8, bf, 8, 576, nbytes)
    assert block_mmv.supports(formats.BY_NAME["Q5_K"].id, bf, 8, 768, nbytes)
    for other in ("Q4_K", "Q4_0", "Q4_1"):
        assert not block_mmv.supports(formats.BY_NAME[other].id, bf, 8, 4096, nbytes)
    for t, k in ((q6, 4096 + 128), (q8, 576), (formats.BY_NAME["Q4_K"].id, 4096)):
        with pytest.raises(ValueError, match="block_mmv"):
            block_mmv.BlockMmvLaunch(t, 8, 64, k, bf, k, torch.device("cpu"))
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="off"))
    assert not block_mmv.supports(q6, bf, 8, 4096, nbytes) and not block_mmv.supports(q8, bf, 8, 4096, nbytes)


@pytest.mark.parametrize("name, m, k, mmv, kind", [
    ("Q6_K", 5, 512, "on", "block mmv"), ("Q6_K", 16, 768, "auto", "block mmv"), ("Q6_K", 4, 2048, "auto", "block mmv"),
    ("Q6_K", 8, 512, "off", "streamed slices"), ("Q6_K", 12, 512, "off", "decode"),
    ("Q8_0", 5, 512, "auto", "block mmv"), ("Q8_0", 16, 640, "on", "block mmv"), ("Q8_0", 8, 576, "auto", "decode"),
    ("Q5_K", 5, 768, "auto", "block mmv"), ("Q5_K", 3, 512, "auto", "block mmv"),
    ("Q5_K", 5, 512, "off", "streamed slices"),
    ("Q6_K", 33, 512, "auto", "block mmv"), ("Q8_0", 64, 512, "auto", "block mmv"),
    ("Q6_K", 65, 512, "auto", "prefill (chunked dequantize + cuBLAS)"),
])
def test_ggml_matmul_routes_rows_to_block_mmv(device, monkeypatch, name, m, k, mmv, kind, request):
    """``ggml_matmul`` sends 4-16 rows of x against Q6_K and 5-16 against Q8_0 rows of whole steps here (x a
    row-strided view that starts at an odd element: copied to aligned rows) unless ``MLX_NATIVE_MMV=off`` (then Q6_K's
    5-8 rows run as 4-row slices, more on the tiled decode kernel); the result within the error bar."""
    import dataclasses

    from mlx_native.ops.ggml import kernel
    from mlx_native.runtime import env, plans

    request.addfinalizer(plans.clear_all)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv=mmv))
    built = spy_plans(monkeypatch, kernel.MatmulPlan)
    n = 24
    raw = _blocks(name, n, k, rng_for(request))
    w = oracle_weight(raw, name, (n, k))
    wide = randn(m, k + 66, dtype=torch.bfloat16)
    x = wide.to(device)[:, 1:k + 1]
    out = mn.ggml_matmul(x, raw_tensor(raw, device), name, (n, k))
    assert built[0].kind == kind
    xc = wide[:, 1:k + 1]
    assert_error_bar(out.cpu(), xc.double() @ w.double().T, xc @ w.to(torch.bfloat16).T, what=f"{name} {m} rows")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
@pytest.mark.parametrize("m", [4, 8, 16])
def test_block_mmv_real_sizes(device, name, m, request):
    """Llama-3-8B shapes (4096 x 14336, 14336 x 4096), in a CUDA graph too."""
    rng = rng_for(request)
    for n, k in ((14336, 4096), (4096, 14336)):
        raw = _blocks(name, n, k, rng)
        out, oracle, baseline, plan = _run(device, raw, name, m, n, k, torch.bfloat16)
        assert_error_bar(out, oracle, baseline, what=f"{name} {m}x{n}x{k}")
        x = randn(m, k, dtype=torch.bfloat16, device=device)
        r = raw_tensor(raw, device)
        eager = plan(x, r).clone()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            replay = plan(x, r)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(replay, eager)
