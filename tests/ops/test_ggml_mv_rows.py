"""The streamed GGUF Q6_K, Q8_0 and Q5_K mat-vecs (``ops/ggml/q6k_mv.py``, ``q8_mv.py``, ``q4k_mv.py``) for 2-4 rows
of x (``MR``), called through their launch plans (``Q6kMvLaunch`` / ``Q8MvLaunch`` / ``Q5kMvLaunch(..., m=,
x_row_stride=)``) directly
(``ggml_matmul``'s routing is tested in ``test_ggml.py``): ``gguf.quants`` dequantizes the oracle weight, the fp64
product of x with it is the oracle, ``x @ w.to(dtype).T`` the error bar's baseline. (Q4_0 / Q4_1 rows:
``test_ggml_q4_rows.py``.)"""

import numpy as np
import pytest
import torch

from helpers import assert_error_bar, randn
from mlx_native.ops.ggml import formats
from mlx_native.runtime.device import device_info
from test_ggml import EXTREME, FP16_FIELDS, crafted_blocks, oracle_weight, plan_output, rng_for, valid_blocks
from test_ggml_q6k_mv import Q6K, byte_sweep_blocks, quantized_blocks


def _mod(name: str):
    from mlx_native.ops.ggml import q4k_mv, q6k_mv, q8_mv

    return {"Q6_K": q6k_mv, "Q8_0": q8_mv, "Q5_K": q4k_mv}[name]


def _plan_class(name: str):
    return {"Q6_K": "Q6kMvLaunch", "Q8_0": "Q8MvLaunch", "Q5_K": "Q5kMvLaunch"}[name]


def _blocks(name: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks of a quantized random weight (gguf cannot quantize Q6_K: llama.cpp's reference quantizer's form)."""
    return quantized_blocks(n, k, rng) if name == "Q6_K" else valid_blocks(name, n, k, rng)


def _run(device, raw: np.ndarray, name: str, m: int, n: int, k: int, dtype, pad: int = 0, x=None, plan=None,
         baseline32=False):
    """``(out, oracle, baseline, plan)`` of ``m`` rows of x (the first ``k`` columns of a ``[m, k + pad]`` tensor,
    row stride ``k + pad``) against the rows ``raw`` of type ``name``; ``plan``: reuse a plan (else a new one);
    ``baseline32``: the baseline is the fp32 product rounded to ``dtype`` (for weights that do not fit ``dtype``)."""
    w = oracle_weight(raw, name, (n, k))
    if x is None:
        x = randn(m, k + pad, dtype=dtype)[:, :k]
    if plan is None:
        cls = getattr(_mod(name), _plan_class(name))
        plan = cls(n, k, dtype, torch.device(device), m=m, x_row_stride=x.stride(0))
    return (*plan_output(device, plan, raw, w, x, baseline32), plan)


@pytest.fixture
def forced_split(monkeypatch, request):
    """``forced_split(on)``: K split over as many programs as there are steps (merged in the launch), or not split."""
    from mlx_native.runtime import plans

    request.addfinalizer(plans.clear_all)

    def force(name: str, on: bool):
        knob = "Q5K_PROGRAMS_PER_SM" if name == "Q5_K" else "PROGRAMS_PER_SM"
        monkeypatch.setattr(_mod(name), knob, 64 if on else 0)

    return force


@pytest.mark.parametrize("name, m, n, k, dtype, pad, split", [
    ("Q6_K", 2, 19, 768, torch.bfloat16, 0, False),  # three 1-super-block steps: the loop's last second step skipped
    ("Q6_K", 3, 13, 2816, torch.float16, 6, True),  # two steps of 4 and a partial one of 3, row stride K + 6, split
    ("Q6_K", 4, 40, 2048, torch.bfloat16, 2, True),  # two steps of 4, split in two
    ("Q6_K", 2, 8, 256, torch.float16, 0, False),  # one step, one row tile
    ("Q6_K", 4, 21, 3584, torch.float16, 10, False),  # steps of 2 super-blocks, a ragged row tile
    ("Q8_0", 2, 19, 1024, torch.bfloat16, 0, False),  # one step of 16 pairs, a ragged row tile
    ("Q8_0", 3, 13, 2880, torch.float16, 6, True),  # two steps of 16 pairs and a partial one of 13, split
    ("Q8_0", 4, 37, 2048, torch.bfloat16, 2, True),  # two steps, split in two
    ("Q8_0", 2, 11, 576, torch.float16, 0, False),  # one step of 8 pairs and one of a single pair (SmolLM2's head)
    ("Q8_0", 4, 16, 1536, torch.float16, 10, False),  # three steps of 8 pairs
    ("Q5_K", 2, 19, 1024, torch.bfloat16, 0, False),  # one step of 4 super-blocks, a ragged row tile
    ("Q5_K", 3, 13, 2816, torch.float16, 6, True),  # two steps of 4 and a partial one of 3, split
    ("Q5_K", 4, 24, 2048, torch.bfloat16, 3, True),  # two steps, split in two, an odd row stride (x read as values)
    ("Q5_K", 2, 8, 512, torch.float16, 10, False),  # one step of 2 super-blocks
])
def test_mv_rows_error_bar(device, forced_split, name, m, n, k, dtype, pad, split, request):
    """2-4 rows of x against quantized weights: every row within the error bar of the fp64 oracle, with one or
    several loop steps (a partial last one included), ragged row tiles, x rows inside a wider tensor, and a K split
    (partials ``[split, m, n]``) merged in the launch, whose counters are back at zero for a second call."""
    from test_quant import assert_merged_in_launch

    mod = _mod(name)
    forced_split(name, split)
    raw = _blocks(name, n, k, rng_for(request))
    out, oracle, baseline, plan = _run(device, raw, name, m, n, k, dtype, pad)
    assert_error_bar(out, oracle, baseline, what=f"{name} {m}x{n}x{k} {dtype}")
    c = plan.launch.constexprs
    sms = device_info(torch.device(device)).sm_count
    if name == "Q6_K":
        step, tail = mod.tiling(k, n, sms, m)
        assert (c["SBS"], c["TAIL"], c["BN"]) == (step, tail, mod.tile_rows(step, m=m))
        steps = k // 256 // step
    elif name == "Q8_0":
        step, tail = mod.tiling(k, n, sms, m)
        assert (c["UPS"], c["TAIL"], c["BN"]) == (step, tail, mod.tile_rows(m))
        steps = k // 4 // step
    else:
        step, tail = mod.tiling(k, mod.Q5K_MAX_WPS, -(-n // mod.ROWS_BN), mod.Q5K_PROGRAMS_PER_SM * sms)
        assert (c["WPS"], c["TAIL"], c["BN"]) == (step, tail, mod.ROWS_BN)
        steps = k // 8 // step
    assert c["MR"] == m and c["EVEN_N"] == (n % c["BN"] == 0)
    assert plan.ints[:2] == (n, (k + pad) // (1 if name == "Q5_K" else 2))  # x as words of two values, or not
    assert plan.split == (steps if split else 1)
    if split:
        assert_merged_in_launch(plan)
        assert plan.splitk.shape == (plan.split, m, n)
        out2, oracle2, baseline2, _ = _run(device, raw, name, m, n, k, dtype, pad, plan=plan)
        assert_error_bar(out2, oracle2, baseline2, what=f"{name} {m}x{n}x{k} {dtype} second call")
        assert not plan.splitk.counters.any()


@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
def test_mv_rows_are_the_rows_of_x(device, name, request):
    """Each output row belongs to its row of x: x rows that are multiples of one another (1, -2, 0.5, 4) give
    outputs in the same ratios (bitwise: powers of two), so a swapped or repeated row of x fails."""
    m, n, k = 4, 16, 1024
    raw = _blocks(name, n, k, rng_for(request))
    x0 = randn(1, k, dtype=torch.bfloat16)
    x = torch.cat([x0, -2 * x0, 0.5 * x0, 4 * x0])
    out, oracle, baseline, _ = _run(device, raw, name, m, n, k, torch.bfloat16, x=x)
    assert_error_bar(out, oracle, baseline, what=f"{name} scaled rows")
    for r, f in enumerate((1.0, -2.0, 0.5, 4.0)):
        assert torch.equal(out[r], (f * out[0].float()).to(torch.bfloat16)), r


@pytest.mark.parametrize("m, dtype", [(1, torch.bfloat16), (1, torch.float16), (3, torch.bfloat16),
                                      (2, torch.float16)])
def test_mv_rows_q6k_every_byte_at_every_position(device, m, dtype, request):
    """Each of the 256 values of every ql, qh and scale byte (int8 -128 to 127) in the error bar for every row of
    x, one row and several (each decodes in its own code); the same rows with all high pairs clear, and with the
    scales' signs flipped, move the result well beyond it (a kernel that drops the high bits or reads the scales
    unsigned fails)."""
    n, k = 16, 4096
    rng = rng_for(request)
    raw = byte_sweep_blocks(n * k // 256, rng)
    x = randn(m, k, dtype=dtype)
    out, oracle, baseline, _ = _run(device, raw, "Q6_K", m, n, k, dtype, x=x)
    assert_error_bar(out, oracle, baseline, what=f"Q6_K every byte, {m} rows {dtype}")
    bar = 2 * (baseline.double() - oracle).abs().max().item() + torch.finfo(dtype).eps * oracle.abs().max().item()
    blocks = raw.reshape(-1, Q6K.block_bytes)
    for edit in ("qh", "scales"):
        other = blocks.copy()
        if edit == "qh":
            other[:, 128:192] = 0
        else:
            other[:, 192:208] = (-other[:, 192:208].view(np.int8).astype(np.int16)).clip(-128, 127).astype(
                np.int8).view(np.uint8)
        out2, oracle2, baseline2, _ = _run(device, other.reshape(-1), "Q6_K", m, n, k, dtype, x=x)
        assert_error_bar(out2, oracle2, baseline2, what=f"Q6_K every byte, {edit} edited, {dtype}")
        assert ((out2.double() - oracle).abs().amax(dim=1) > 10 * bar).all(), edit


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the oracle's numpy
@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mv_rows_extreme_d(device, name, dtype, request):
    """fp16 ``d`` of 65504, 3e4, 1e-5, 6e-8 (subnormal), +-0, +-Inf and NaN in random blocks (the first half of the
    weight rows: the finite ones only): each row's outputs are non-finite exactly where the fp64 oracle's are, the
    finite ones within the error bar of the fp32 product (x scaled down in fp16 so that the largest outputs still
    fit the dtype)."""
    m, n, k = 3, 24, 1024
    rng = rng_for(request)
    t = formats.BY_NAME[name]
    raw = crafted_blocks(name, n * k // t.block_elems, rng, extreme=True).reshape(n, k // t.block_elems, -1)
    for off in FP16_FIELDS[name]:
        vals = rng.choice(EXTREME[np.isfinite(EXTREME)], (n // 2, k // t.block_elems)).astype(np.float16)
        raw[: n // 2, :, off:off + 2] = vals.view(np.uint8).reshape(n // 2, -1, 2)
    raw = raw.reshape(-1)
    x = randn(m, k, dtype=dtype, scale=1.0 if dtype == torch.bfloat16 else 2.0**-18)
    out, oracle, baseline, _ = _run(device, raw, name, m, n, k, dtype, x=x, baseline32=True)
    finite = torch.isfinite(oracle)
    assert finite[:, : n // 2].all() and not finite[:, n // 2:].all()  # both kinds of rows are there
    assert torch.equal(torch.isfinite(out), finite)
    assert oracle[finite].abs().max() < torch.finfo(dtype).max / 2
    assert_error_bar(out, oracle, baseline, what=f"{name} extreme d, {m} rows {dtype}")


@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
def test_mv_rows_inf_and_nan_stay_in_their_row(device, name, request):
    """Inf / NaN in one row of x make that row's outputs non-finite and leave the other rows' finite."""
    m, n, k = 3, 8, 512
    raw = _blocks(name, n, k, rng_for(request))
    for bad in (float("inf"), float("nan")):
        x = randn(m, k, dtype=torch.bfloat16)
        x[1, 300] = bad
        out, oracle, _, _ = _run(device, raw, name, m, n, k, torch.bfloat16, x=x)
        assert torch.isfinite(out[[0, 2]]).all() and not torch.isfinite(out[1]).any(), bad
        assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), bad


@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
def test_mv_rows_bad_plans(device, name):
    """Rows of x outside 1-4 are refused, and an odd x row stride where x is read in words of two values (Q6_K,
    Q8_0), naming the kernel and the value."""
    mod = _mod(name)
    cls, what = getattr(mod, _plan_class(name)), mod.__name__.rsplit(".", 1)[1]
    for m in (0, mod.ROWS_MAX + 1):
        with pytest.raises(ValueError, match=rf"{what}: {m} rows of x"):
            cls(16, 512, torch.bfloat16, torch.device(device), m=m)
    if name != "Q5_K":
        with pytest.raises(ValueError, match=f"{what}: x row stride 513 is odd"):
            cls(16, 512, torch.bfloat16, torch.device(device), m=2, x_row_stride=513)


# --------------------------------------------------------------------------- GPU, real sizes


@pytest.mark.gpu
@pytest.mark.parametrize("nk", [(14336, 4096), (4096, 14336), (4096, 11008)])
@pytest.mark.parametrize("m", [2, 3, 4])
@pytest.mark.parametrize("name", ["Q6_K", "Q8_0", "Q5_K"])
def test_gpu_mv_rows_real_sizes(name, nk, m):
    """Llama shapes of Q6_K / Q8_0 / Q5_K tensors (ffn_down of 14336 and 11008 columns: a partial last step,
    attn_v), 2-4 rows of x against the fp64 oracle (``ggml_dequantize``: bit-exact with gguf), through
    ``ggml_matmul``'s route; repeated calls with new x reuse the plan, including its K split's counters."""
    import mlx_native as mn

    n, k = nk
    raw = torch.from_numpy(_blocks(name, n, k, np.random.default_rng(k + m))).cuda()
    w64 = mn.ggml_dequantize(raw, name, (n, k)).double()
    for _ in range(3):
        x = randn(m, k, dtype=torch.bfloat16, device="cuda")
        out = mn.ggml_matmul(x, raw, name, (n, k))
        assert_error_bar(out, x.double() @ w64.T, x @ w64.to(torch.bfloat16).T, what=f"{name} {m}x{n}x{k}")
