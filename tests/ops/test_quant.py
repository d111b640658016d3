"""MLX affine quantization: MLX itself is the oracle (quantize bit-identical, dequantize,
quantized_matmul and gather_qmm agree), fp64 error bars, odd shapes, bad input."""

import dataclasses
import types

import mlx.core as mx
import numpy as np
import pytest
import torch
import triton

import mlx_native as mn
from helpers import (ALL_FLOAT, X_RANGES, assert_agrees_with, assert_error_bar, from_mlx, mlx_array, randn,
                     row_strided, spy_plans, x_of_range)
from mlx_native.ops.quant import ref
from mlx_native.runtime import env

BITS = (2, 3, 4, 5, 6, 8)
GROUPS = (32, 64, 128)


def mx_u32(t: torch.Tensor):
    return mx.array(t.cpu().view(torch.int32).numpy().view(np.uint32))


def qweight(n, k, group_size=64, bits=4, dtype=torch.bfloat16, device="cpu", lead=()):
    """A random weight, quantized on the CPU (bit-identical to MLX), moved to ``device``."""
    w = randn(*lead, n, k, dtype=dtype, scale=0.05) * (1 + torch.rand(*lead, n, 1)).to(dtype)
    wq, s, b = mn.quantize(w, group_size, bits)
    return wq.to(device), s.to(device), b.to(device)


def dequant64(wq, s, b, gs, bits):
    return ref.dequantize(wq.cpu(), s.cpu(), b.cpu(), gs, bits, dtype=torch.float64, compute=torch.float64)


def lowp_qmm(x, wq, s, b, gs, bits, transpose=True):
    """The same math as a PyTorch user writes it in x's dtype: dequantize, then matmul."""
    w = ref.dequantize(wq, s, b, gs, bits, dtype=x.dtype)
    return x @ (w.T if transpose else w)


# --------------------------------------------------------------------------- quantize


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUPS)
def test_quantize_bit_identical_to_mlx(device, dtype, bits, group_size):
    w = randn(5, 2 * 128, dtype=dtype) * (torch.rand(5, 1) * 4).to(dtype)
    w[0, :group_size] = 0.5  # a constant group (zero range)
    w[1, :group_size] = -torch.arange(group_size, dtype=torch.float32).to(dtype)  # min dominates
    wq, s, b = mn.quantize(w.to(device), group_size, bits)
    assert wq.dtype == torch.uint32 and s.dtype == dtype and b.dtype == dtype
    assert wq.shape == (5, 256 * bits // 32) and s.shape == (5, 256 // group_size)
    mq, ms, mb = mx.quantize(mlx_array(w), group_size=group_size, bits=bits)
    assert np.array_equal(wq.cpu().view(torch.int32).numpy().view(np.uint32), np.array(mq))
    assert torch.equal(s.cpu().double(), from_mlx(ms)) and torch.equal(b.cpu().double(), from_mlx(mb))


def test_quantize_batched_and_extreme_values(device):
    w = randn(2, 3, 128, dtype=torch.float32, scale=1e4)
    w[0, 0, :64] = 1e-30  # tiny range: the scale is clamped at 1e-7
    wq, s, b = mn.quantize(w.to(device), 64, 4)
    mq, ms, mb = mx.quantize(mlx_array(w), group_size=64, bits=4)
    assert np.array_equal(wq.cpu().view(torch.int32).numpy().view(np.uint32), np.array(mq))
    assert torch.equal(s.cpu().double(), from_mlx(ms)) and torch.equal(b.cpu().double(), from_mlx(mb))


def test_pack_unpack_roundtrip():
    for bits in BITS:
        q = torch.randint(0, 1 << bits, (3, 96))
        assert torch.equal(ref.unpack(ref.pack(q, bits), bits), q)


# --------------------------------------------------------------------------- dequantize


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUPS)
def test_dequantize_matches_mlx(device, bits, group_size):
    dtype = torch.bfloat16 if bits % 2 else torch.float16
    wq, s, b = qweight(7, 256, group_size, bits, dtype)
    ours = mn.dequantize(wq.to(device), s.to(device), b.to(device), group_size, bits)
    assert ours.dtype == dtype and ours.shape == (7, 256)
    theirs = from_mlx(mx.dequantize(mx_u32(wq), mlx_array(s), mlx_array(b), group_size=group_size, bits=bits))
    oracle = dequant64(wq, s, b, group_size, bits)
    # ours: fp32 math, one rounding; MLX rounds twice in the low dtype
    assert_agrees_with(ours.cpu(), theirs, oracle, what=f"dequantize {bits}b g{group_size}")


def test_dequantize_fp32_scales(device):
    wq, s, b = qweight(9, 384, 128, 5, torch.float32)
    ours = mn.dequantize(wq.to(device), s.to(device), b.to(device), 128, 5)
    assert_error_bar(ours.cpu(), dequant64(wq, s, b, 128, 5), ref.dequantize(wq, s, b, 128, 5))


# --------------------------------------------------------------------------- quantized_embedding


@pytest.mark.parametrize("bits,group_size", [(4, 64), (3, 32), (8, 128), (2, 64), (6, 32), (5, 128)])
@pytest.mark.parametrize("out", [torch.bfloat16, torch.float32])
def test_quantized_embedding_rows(device, bits, group_size, out):
    wq, s, b = qweight(11, 384, group_size, bits, torch.float16)
    ids = torch.tensor([[3, 0, 10], [7, 7, 1]])
    ours = mn.quantized_embedding(ids.to(device), wq.to(device), s.to(device), b.to(device), group_size, bits,
                                  dtype=out)
    assert ours.dtype == out and ours.shape == (2, 3, 384)
    table = ref.dequantize(wq, s, b, group_size, bits, dtype=torch.float32)  # fp32 math, one rounding, like ours
    assert torch.equal(ours.cpu(), table[ids].to(out))
    if out != torch.float32:
        return  # MLX's rows are fp16 (the scales' dtype): compared at fp32, where ours is the more precise
    theirs = from_mlx(mx.dequantize(mx_u32(wq), mlx_array(s), mlx_array(b), group_size=group_size, bits=bits))
    assert_agrees_with(ours.cpu(), theirs[ids].float(), dequant64(wq, s, b, group_size, bits)[ids],
                       what=f"quantized_embedding {bits}b g{group_size}")


def test_quantized_embedding_strided_ids(device):
    """A decode step's ids column ``tokens[:, t:t+1]`` (its flattening a strided view) reads the right rows."""
    wq, s, b = qweight(11, 64, 32, 4, torch.bfloat16)
    tokens = torch.randint(0, 11, (3, 7))
    ours = mn.quantized_embedding(tokens.to(device)[:, 4:5], wq.to(device), s.to(device), b.to(device), 32, 4)
    assert torch.equal(ours.cpu(), mn.dequantize(wq, s, b, 32, 4)[tokens[:, 4:5]])


def test_quantized_embedding_default_dtype_and_int32_ids(device):
    wq, s, b = qweight(5, 64, 64, 4, torch.bfloat16)
    ids = torch.tensor([4, 0, 4], dtype=torch.int32)
    ours = mn.quantized_embedding(ids.to(device), wq.to(device), s.to(device), b.to(device))
    assert ours.dtype == torch.bfloat16
    assert torch.equal(ours.cpu(), mn.dequantize(wq, s, b)[ids.long()])


def test_quantized_embedding_kernel_gives_nan_rows_for_out_of_range_ids(device):
    """The kernel path cannot check ids without a host sync: their rows come out NaN (the public op's CPU
    path raises first, so the plan is called directly; the interpreter runs the kernel on CPU tensors)."""
    from mlx_native.ops.quant.kernel import EmbeddingPlan

    wq, s, b = (t.to(device) for t in qweight(4, 64, 64, 4, torch.bfloat16))
    ids = torch.tensor([1, 4, -1, 2], device=device)
    out = EmbeddingPlan(ids, wq, s, 64, 4, 64, torch.float16)(ids, wq, s, b).cpu()
    assert out[[1, 2]].isnan().all() and not out[[0, 3]].isnan().any()
    assert torch.equal(out[[0, 3]], ref.dequantize(wq.cpu(), s.cpu(), b.cpu(), 64, 4, dtype=torch.float16)[[1, 2]])


# --------------------------------------------------------------------------- quantized_matmul


def _check_qmm(device, m, n, k, gs, bits, dtype, transpose=True, lead=()):
    shape = (n, k) if transpose else (k, n)
    wq, s, b = qweight(*shape, gs, bits, dtype)
    x = randn(*lead, m, k, dtype=dtype)
    out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), transpose, gs, bits)
    assert out.shape == (*lead, m, n) and out.dtype == dtype
    w64 = dequant64(wq, s, b, gs, bits)
    oracle = x.double() @ (w64.T if transpose else w64)
    theirs = from_mlx(mx.quantized_matmul(mlx_array(x), mx_u32(wq), mlx_array(s), mlx_array(b), transpose=transpose,
                                          group_size=gs, bits=bits))
    assert_error_bar(out.cpu(), oracle, lowp_qmm(x, wq, s, b, gs, bits, transpose), what=f"qmm {m}x{n}x{k} {bits}b")
    assert_agrees_with(out.cpu(), theirs, oracle, what=f"qmm vs MLX {m}x{n}x{k} {bits}b")


@pytest.mark.parametrize("m", [1, 3, 17])
@pytest.mark.parametrize("bits", [4, 8, 3])
def test_quantized_matmul_matches_mlx(device, m, bits):
    _check_qmm(device, m, 40, 256, 64, bits, torch.bfloat16)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUPS)
def test_quantized_matmul_all_formats(device, bits, group_size):
    _check_qmm(device, 2, 24, 384, group_size, bits, torch.float16)


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("m", [1, 5, 33])
def test_quantized_matmul_dtypes_prefill(device, dtype, m):
    _check_qmm(device, m, 72, 192, 32, 4, dtype)


@pytest.mark.parametrize("m", [1, 20])
def test_quantized_matmul_transpose_false(device, m):
    _check_qmm(device, m, 128, 96, 32, 4, torch.bfloat16, transpose=False)
    _check_qmm(device, m, 192, 64, 64, 6, torch.float32, transpose=False)


def test_quantized_matmul_batched_x_and_mixed_dtypes(device):
    _check_qmm(device, 3, 50, 128, 64, 4, torch.bfloat16, lead=(2,))
    wq, s, b = qweight(40, 128, 64, 4, torch.float32)
    x = randn(3, 128, dtype=torch.bfloat16)
    out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device))
    assert out.dtype == torch.float32  # MLX's promotion: bf16 x fp32 scales -> fp32
    oracle = x.double() @ dequant64(wq, s, b, 64, 4).T
    assert_error_bar(out.cpu(), oracle, x.float() @ ref.dequantize(wq, s, b, 64, 4).T)


@pytest.mark.parametrize("m, n, k, gs, dtype", [
    (1, 200, 1024, 64, torch.bfloat16),  # N not a multiple of the tile, K split in two
    (3, 64, 1152, 64, torch.float16),  # 18 groups: an uneven split
    (16, 72, 192, 32, torch.float16),  # 16 rows, 64-feature tile
    (5, 130, 384, 128, torch.bfloat16),  # 3 groups: one group per step
])
@pytest.mark.parametrize("prescale", [False, True], ids=["scale-after-dot", "prescaled"])
def test_quantized_matmul_tensor_core_decode(device, monkeypatch, m, n, k, gs, dtype, prescale):
    """1-16 rows of 4-bit weights take the tensor-core decode kernel (ops/quant/mmv.py); one row only
    with the streamed mat-vec off (MLX_NATIVE_AFFINE_MV=0); group scales applied after the dot of raw codes
    or to the tile before it (``mmv.PRESCALE_MIN_ROWS``)."""
    from mlx_native.ops.quant import mmv

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_mv=False))
    monkeypatch.setattr(mmv, "PRESCALE_MIN_ROWS", 1 if prescale else mmv.MAX_ROWS + 1)
    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    _check_qmm(device, m, n, k, gs, 4, dtype)
    assert len(built) == 1, "the tensor-core decode kernel was not used"
    assert built[0].launch.constexprs["PRESCALE"] is prescale


@pytest.mark.parametrize("m, n, k, gs, dtype", [
    (17, 72, 512, 64, torch.bfloat16),  # x tile of 32 rows, one partial feature tile
    (40, 64, 384, 32, torch.float16),  # 64 rows: 128-feature tiles of 8 warps
    (100, 40, 256, 128, torch.bfloat16),  # 128 rows
])
def test_quantized_matmul_tensor_core_mid_rows(device, monkeypatch, m, n, k, gs, dtype):
    """17-128 rows of 4-bit weights take the tensor-core decode kernel (``mmv.MID_ROWS_MAX``: its x tile the rows
    padded to a power of two; ``mmv.MID_WIDE``: 128-feature tiles at 33-64 rows), with the result of MLX and the fp64
    oracle."""
    from mlx_native.ops.quant import mmv

    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    _check_qmm(device, m, n, k, gs, 4, dtype)
    (plan,) = built
    consts = plan.launch.constexprs
    assert consts["MP"] == triton.next_power_of_2(m) and consts["PACKED"]
    lo, hi = mmv.MID_WIDE[mmv.AFFINE.value]
    assert consts["BN"] == (mmv.MID_WIDE_BN if lo <= m <= hi else mmv.MMV_BN_ROWS)


def _offset_view(t: torch.Tensor, device) -> torch.Tensor:
    """``t`` on ``device`` in memory starting 2 bytes past a 4-byte boundary (a view one element into a buffer)."""
    buf = torch.zeros(t.numel() + 1, dtype=t.dtype, device=device)
    buf[1:] = t.reshape(-1).to(device)
    view = buf[1:].view(t.shape)
    assert view.data_ptr() % 4 == 2
    return view


@pytest.mark.parametrize("layout", ["offset", "odd-stride", "scales-offset"])
def test_quantized_matmul_tensor_core_decode_x_views(device, monkeypatch, layout):
    """Packed tiles load x and the MLX scales / biases as int32 words (``mmv._x_load``, ``_affine_scale_words``); x
    or the scales 2 bytes past an aligned address, or x rows of an odd stride, are copied first (on the GPU the word
    loads would fault), with the right result."""
    from mlx_native.ops.quant import mmv

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="on", affine_idot=False,
                                                            affine_mv=False))
    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    m, n, k, gs, dtype = 5, 72, 512, 64, torch.bfloat16
    wq, s, b = qweight(n, k, gs, 4, dtype)
    x = randn(m, k, dtype=dtype)
    xd, s_d, b_d = x.to(device), s.to(device), b.to(device)
    if layout == "offset":
        xd = _offset_view(x, device)
    elif layout == "odd-stride":
        buf = torch.zeros(m, k + 1, dtype=dtype, device=device)
        buf[:, :k] = x.to(device)
        xd = buf[:, :k]
        assert xd.stride(0) % 2 == 1
    else:
        s_d, b_d = _offset_view(s, device), _offset_view(b, device)
    out = mn.quantized_matmul(xd, wq.to(device), s_d, b_d, group_size=gs)
    oracle = x.double() @ dequant64(wq, s, b, gs, 4).T
    assert_error_bar(out.cpu(), oracle, lowp_qmm(x, wq, s, b, gs, 4), what=f"x {layout}")
    (plan,) = built
    assert plan.x_words and plan.x_copy is (layout == "odd-stride")


@pytest.fixture
def affine_mv_plans(monkeypatch):
    """The streamed affine mat-vec plans (quant/affine_mv.py, quant/affine_idot.py, quant/affine_idot_rows.py)
    built while the test runs."""
    from mlx_native.ops.quant import affine_idot, affine_idot_rows, affine_mv
    from mlx_native.runtime import plans

    yield spy_plans(monkeypatch, affine_mv.AffineMvLaunch, affine_idot.AffineIdotLaunch,
                    affine_idot_rows.AffineIdotRowsLaunch)
    plans.clear_all()


def _plan_names(plans_built):
    return [type(p).__name__ for p in plans_built]


@pytest.mark.parametrize("k, gs, dtype", [(3072, 32, torch.bfloat16), (6144, 64, torch.float16),
                                          (3072, 128, torch.bfloat16)])
@pytest.mark.parametrize("words", [True, False], ids=["scale-words", "scales-16bit"])
def test_affine_idot_prefetch(device, monkeypatch, affine_mv_plans, k, gs, dtype, words):
    """The integer-dot one-row kernel's register prefetch (rows of several whole steps), its 16-bit scales / biases
    loaded as the int32 words that hold them or not (``affine_idot.PREFETCH_S_WORDS``); scales and biases handed in
    2 bytes past a 4-byte boundary (copied first for the word loads)."""
    from mlx_native.ops.quant import affine_idot

    monkeypatch.setattr(affine_idot, "PREFETCH_S_WORDS", words)
    n = 40
    wq, s, b = qweight(n, k, gs, 4, dtype)
    x = randn(1, k, dtype=dtype)
    out = mn.quantized_matmul(x.to(device), wq.to(device), _offset_view(s, device), _offset_view(b, device),
                              group_size=gs)
    oracle = x.double() @ dequant64(wq, s, b, gs, 4).T
    assert_error_bar(out.cpu(), oracle, lowp_qmm(x, wq, s, b, gs, 4), what=f"prefetch K{k} g{gs} words={words}")
    (plan,) = affine_mv_plans
    c = plan.launch.constexprs
    assert type(plan).__name__ == "AffineIdotLaunch" and c["PREFETCH"] and c["S_WORDS"] is words and not c["TAIL"]


@pytest.mark.parametrize("n, k, gs, dtype", [
    (37, 1024, 64, torch.bfloat16),  # N not a multiple of the row tile (clamped rows), 128-word steps
    (16, 768, 64, torch.float16),  # 96 words a row: three 32-word steps
    (40, 256, 32, torch.bfloat16),  # group of 4 words
    (24, 2048, 128, torch.float16),  # group of 16 words
    (8, 8192, 128, torch.bfloat16),  # long rows: 8 steps
])
def test_affine_mv_one_row(device, monkeypatch, affine_mv_plans, n, k, gs, dtype):
    """One row of 4-bit MLX weights takes the streamed mat-vec (ops/quant/affine_mv.py) with the integer-dot
    variant off, and agrees with the fp64 oracle (flash-attention error bar) and with MLX."""
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_idot=False))
    _check_qmm(device, 1, n, k, gs, 4, dtype)
    assert _plan_names(affine_mv_plans) == ["AffineMvLaunch"]


@pytest.mark.parametrize("n, k, gs, dtype, tile", [  # tile: (rows, warps, words of a partial step) on 2 SMs
    (37, 1024, 64, torch.bfloat16, (4, 1, 0)),  # N not a multiple of the row tile, one 1-warp step
    (24, 2048, 128, torch.float16, (8, 2, 0)),  # the whole row in one 2-warp step, a group spans 4 x chunks
    (40, 1024, 32, torch.bfloat16, (4, 1, 0)),  # one x chunk per group
    (8, 8192, 64, torch.bfloat16, (4, 8, 0)),  # a row of 1024 words: one 8-warp step (one 8-row tile: 4 rows)
    (37, 4096, 64, torch.float16, (8, 4, 0)),  # one 4-warp step, 8-row tiles (the last one ragged)
    (40, 14336, 64, torch.bfloat16, (4, 2, 0)),  # long rows: seven 2-warp steps
    (8, 14336, 64, torch.bfloat16, (4, 8, 768)),  # long rows of few tiles: one 8-warp step and a partial one
    (16, 768 * 4, 64, torch.float16, (4, 1, 0)),  # 384 words: three 1-warp steps
    (9, 1536, 32, torch.float16, (4, 1, 64)),  # 192 words: one 1-warp step and a partial one
    (11, 2880, 64, torch.bfloat16, (4, 2, 104)),  # 360 words: one 2-warp step and a partial one
    (6, 11008, 128, torch.bfloat16, (4, 8, 352)),  # few tiles: one 8-warp step and a partial one of whole groups
])
def test_affine_idot_one_row(device, monkeypatch, affine_mv_plans, n, k, gs, dtype, tile):
    """One row of 4-bit MLX weights with a bf16/fp16 result takes the integer-dot mat-vec
    (ops/quant/affine_idot.py), with the tile of ``affine_idot.tile_shape``: x quantized to int16 per 32 values
    stays within the error bar and agrees with MLX."""
    from mlx_native.ops.quant import affine_idot

    monkeypatch.setattr(affine_idot, "device_info", lambda device: types.SimpleNamespace(sm_count=2))
    _check_qmm(device, 1, n, k, gs, 4, dtype)
    assert _plan_names(affine_mv_plans) == ["AffineIdotLaunch"]
    c = affine_mv_plans[0].launch.constexprs
    assert (c["BN"], c["CH"] // 32, c["TAIL"]) == tile


@pytest.mark.parametrize("case", X_RANGES)
def test_affine_idot_x_ranges(device, affine_mv_plans, case):
    """x's per-chunk int16 scale follows each chunk's magnitude: a 1000x outlier in some chunks, values near
    the bottom of the normal range, all-zero chunks, and chunks whose magnitudes span 2**-60..2**60."""
    n, k, gs, dtype = 24, 2048, 64, torch.bfloat16
    wq, s, b = qweight(n, k, gs, 4, dtype)
    x = x_of_range(case, k, 32, tiny=1e-36).to(dtype)
    out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs)
    assert _plan_names(affine_mv_plans) == ["AffineIdotLaunch"]
    assert_error_bar(out.cpu(), x.double() @ dequant64(wq, s, b, gs, 4).T, lowp_qmm(x, wq, s, b, gs, 4), what=case)


def test_affine_idot_keeps_inf_and_nan(device, affine_mv_plans):
    """Inf / NaN in x reach the output through the chunk's float sum (the integers cannot carry them): the
    outputs are non-finite exactly where the fp64 oracle's are."""
    n, k, gs = 16, 1024, 64
    wq, s, b = qweight(n, k, gs, 4, torch.bfloat16)
    for bad in (float("inf"), float("nan")):
        x = randn(1, k, dtype=torch.bfloat16)
        x[0, 100] = bad
        out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs).cpu()
        oracle = x.double() @ dequant64(wq, s, b, gs, 4).T
        assert not torch.isfinite(oracle).any()
        assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), bad
    assert set(_plan_names(affine_mv_plans)) == {"AffineIdotLaunch"}


@pytest.mark.parametrize("n, k, gs, dtype, act", [
    (37, 1024, 64, torch.bfloat16, "silu"),  # ragged last row tile
    (24, 2048, 128, torch.float16, "gelu_tanh"),
    (40, 1024, 32, torch.bfloat16, "silu"),
])
def test_affine_idot_gate_up_pair(device, affine_mv_plans, n, k, gs, dtype, act):
    """A dense gate/up pair for one row (moe_qmm with one expert, as GatedMLP calls it) runs the integer-dot
    mat-vec with both projections in one program and the activation in its epilogue:
    ``act(x Wg^T) * (x Wu^T)`` within the error bar of the fp64 oracle."""
    from mlx_native.ops.moe.ref import activate

    wg, sg, bg = qweight(n, k, gs, 4, dtype)
    wu, su, bu = qweight(n, k, gs, 4, dtype)
    x = randn(1, k, dtype=dtype)
    ids = torch.zeros(1, 1, dtype=torch.int32)
    dev = lambda *ts: [t.to(device)[None] for t in ts]  # noqa: E731
    out = mn.moe_qmm(x.to(device), ids.to(device), *dev(wg, sg, bg), group_size=gs,
                     w_up=dev(wu)[0], scales_up=dev(su)[0], biases_up=dev(bu)[0], activation=act)
    assert _plan_names(affine_mv_plans) == ["AffineIdotLaunch"] and out.shape == (1, 1, n)
    x64 = x.double()
    oracle = activate(x64 @ dequant64(wg, sg, bg, gs, 4).T, x64 @ dequant64(wu, su, bu, gs, 4).T, act)
    baseline = activate(lowp_qmm(x, wg, sg, bg, gs, 4).float(), lowp_qmm(x, wu, su, bu, gs, 4).float(), act)
    assert_error_bar(out.cpu().view(1, n), oracle, baseline.to(dtype), what=act)


def test_mmv_balanced_split():
    """2-16 rows: the K split whose busiest SM has the least modelled work (session 42 run 6 / 7 on the H200's 132
    SMs): 4096 x 14336 MLX g64 (224 tiles of 64 rows, 32 steps of 128 codes) splits 4 ways, not 2 (448 programs: 52
    SMs run 4, the others 3); 4096 x 12672 (198 tiles) stays at 2 (396 programs, 3 an SM); 4096 x 16896 (264 tiles)
    splits 2 ways (528); splits that double only the partials' traffic are not taken (the 128256-row head), nor
    splits past min_steps steps."""
    from mlx_native.ops.quant.mmv import balanced_split

    def split(k, n, sms=132, min_steps=4):
        return balanced_split(k // 64, 2, triton.cdiv(n, 64), sms, min_steps)[0]

    assert (split(4096, 14336), split(4096, 12672), split(4096, 16896)) == (4, 2, 2)
    assert (split(14336, 4096), split(4096, 4096)) == (8, 8)
    assert split(4096, 128256) == 1 and split(2048, 128256) == 1
    assert split(1024, 1024) == 2  # 16 tiles, 8 steps: min_steps caps the split below 3 programs an SM
    assert balanced_split(64, 2, 224, 132, 4) == (4, 16)  # (split, groups per split)
    assert balanced_split(70, 2, 224, 132, 4) == (4, 18)  # 35 steps: splits of 9, the last one 8


def test_affine_idot_step_rule():
    """Steps are 128 words of a row per warp, up to 2 warps, or the whole row of 256-1024 words, or 8 warps for long
    rows of few tiles; a row of no whole number of steps ends in a partial one (not for gate/up pairs and the
    multi-row kernel); rows under one 128-word step stay on affine_mv, and so does an fp32 result."""
    from mlx_native.ops.quant import affine_idot

    assert affine_idot.step_warps(4096) == 2 and affine_idot.step_warps(14336) == 2  # 1792 words = 7 x 256
    assert affine_idot.step_warps(3072) == 1 and affine_idot.step_warps(768) == 0
    sms = 132  # whole-row steps: 8-row tiles while they give a tile per SM, up to 32 tiles per SM (H100 sweeps)
    assert affine_idot.tile_shape(4096, 4096, sms) == (8, 4) and affine_idot.tile_shape(2048, 8192, sms) == (8, 8)
    assert affine_idot.tile_shape(1024, 4096, sms) == (4, 4) and affine_idot.tile_shape(8192, 2048, sms) == (8, 2)
    assert affine_idot.tile_shape(128256, 4096, sms) == (4, 2)  # the head: too many tiles
    assert affine_idot.tile_shape(4096, 14336, sms) == (4, 2) and affine_idot.tile_shape(4096, 3072, sms) == (4, 1)
    assert affine_idot.tile_shape(1024, 14336, sms) == (4, 8)  # long rows, few tiles
    assert affine_idot.tile_shape(4096, 11008, sms) == (4, 2) and affine_idot.tile_shape(576, 1536, sms) == (4, 1)
    assert affine_idot.supports(4, 64, True, torch.bfloat16, torch.bfloat16, 1, 1536, 10)  # a partial step
    assert not affine_idot.supports(4, 64, True, torch.bfloat16, torch.bfloat16, 1, 1536, 10, pairs=True)
    assert not affine_idot.supports(4, 64, True, torch.bfloat16, torch.bfloat16, 1, 768, 10)  # under one step
    assert affine_idot.supports(4, 64, True, torch.bfloat16, torch.bfloat16, 1, 4096, 10)
    assert not affine_idot.supports(4, 64, True, torch.bfloat16, torch.float32, 1, 4096, 10)
    assert not affine_idot.supports(4, 64, True, torch.bfloat16, torch.bfloat16, 2, 4096, 10)


@pytest.fixture
def rows_up_to_8(monkeypatch):
    """Route up to 8 rows to the multi-row integer-dot kernel: it takes up to 15 (4 parts), the default route stops
    at IDOT_ROWS_MAX, where it still beats the tensor-core kernel on the H100."""
    from mlx_native.ops.quant import affine_idot_rows, mmv

    monkeypatch.setattr(affine_idot_rows, "IDOT_ROWS_MAX", 8)
    monkeypatch.setattr(mmv, "OVER_IDOT_ROWS_FROM", 9)
    monkeypatch.setattr(mmv, "OVER_IDOT_M2_MIN_WEIGHTS", 1 << 62)


@pytest.mark.usefixtures("rows_up_to_8")
@pytest.mark.parametrize("m, n, k, gs, dtype, prefetch", [
    (2, 37, 1024, 64, torch.bfloat16, False),  # one part of 2 rows, ragged last row tile
    (3, 37, 1024, 32, torch.float16, True),  # parts 2 + 1, one x chunk per group
    (5, 37, 2048, 128, torch.bfloat16, False),  # parts 4 + 1, one 2-warp step, a group spans 4 x chunks
    (7, 16, 3072, 64, torch.float16, True),  # parts 4 + 2 + 1, three 1-warp steps
    (8, 37, 2048, 64, torch.float16, True),  # one part of 8 rows
])
def test_affine_idot_rows(device, monkeypatch, affine_mv_plans, m, n, k, gs, dtype, prefetch):
    """2-8 rows of x against 4-bit MLX weights with a bf16/fp16 result take the multi-row integer-dot mat-vec
    (ops/quant/affine_idot_rows.py), with and without register prefetch: every row within the error bar of the
    fp64 oracle and agreeing with MLX."""
    from mlx_native.ops.quant import affine_idot_rows

    monkeypatch.setattr(affine_idot_rows, "PREFETCH_ROWS_PER_SM", (0, 10**6) if prefetch else (0, 0))
    _check_qmm(device, m, n, k, gs, 4, dtype)
    (plan,) = affine_mv_plans
    assert type(plan).__name__ == "AffineIdotRowsLaunch" and plan.launch.constexprs["PREFETCH"] is prefetch


@pytest.mark.usefixtures("rows_up_to_8")
def test_affine_idot_rows_prefetch_offset_scales(device, monkeypatch, affine_mv_plans):
    """The multi-row kernel's prefetch reads the 16-bit scales / biases as int32 words: scales and biases handed in 2
    bytes past a 4-byte boundary are copied first, with the right result."""
    from mlx_native.ops.quant import affine_idot_rows

    monkeypatch.setattr(affine_idot_rows, "PREFETCH_ROWS_PER_SM", (0, 10**6))
    m, n, k, gs, dtype = 3, 16, 3072, 64, torch.bfloat16
    wq, s, b = qweight(n, k, gs, 4, dtype)
    x = randn(m, k, dtype=dtype)
    out = mn.quantized_matmul(x.to(device), wq.to(device), _offset_view(s, device), _offset_view(b, device),
                              group_size=gs)
    oracle = x.double() @ dequant64(wq, s, b, gs, 4).T
    assert_error_bar(out.cpu(), oracle, lowp_qmm(x, wq, s, b, gs, 4), what="rows prefetch, offset scales")
    (plan,) = affine_mv_plans
    assert type(plan).__name__ == "AffineIdotRowsLaunch" and plan.launch.constexprs["PREFETCH"]


def test_affine_idot_rows_prefetch_rule(monkeypatch):
    """The multi-row kernel prefetches with ``PREFETCH_ROWS_PER_SM`` = [lo, hi) output rows per SM (session 30 run 2:
    fewer rows split K into single steps, more run out of registers): on at 132 SMs for N 1584-3167, off around."""
    from mlx_native.ops.quant import affine_idot_rows

    monkeypatch.setattr(affine_idot_rows, "device_info", lambda device: types.SimpleNamespace(sm_count=132))
    lo, hi = affine_idot_rows.PREFETCH_ROWS_PER_SM
    cpu = torch.device("cpu")
    for n, want in ((lo * 132 - 8, False), (lo * 132, True), (hi * 132 - 8, True), (hi * 132, False)):
        launch = affine_idot_rows.AffineIdotRowsLaunch(2, n, 4096, 64, torch.bfloat16, 4096, cpu)
        assert launch.launch.constexprs["PREFETCH"] is want, n


@pytest.mark.usefixtures("rows_up_to_8")
def test_affine_idot_rows_strided_x(device, affine_mv_plans):
    """Rows of x inside a wider tensor (row stride K + 24, not a multiple of 16: no 16-byte vector assumed)."""
    m, n, k, gs = 3, 24, 1024, 64
    wq, s, b = qweight(n, k, gs, 4, torch.bfloat16)
    base = randn(m, k + 24, dtype=torch.bfloat16, device=device)
    x = base[:, 8:8 + k]
    out = mn.quantized_matmul(x, wq.to(device), s.to(device), b.to(device), group_size=gs).cpu()
    (plan,) = affine_mv_plans
    assert type(plan).__name__ == "AffineIdotRowsLaunch" and plan.ints[2] == k + 24
    xc = x.cpu()
    assert_error_bar(out, xc.double() @ dequant64(wq, s, b, gs, 4).T, lowp_qmm(xc, wq, s, b, gs, 4))


@pytest.mark.usefixtures("rows_up_to_8")
def test_affine_idot_rows_keep_inf_and_nan_in_their_row(device, affine_mv_plans):
    """Inf in one row of x and NaN in another (parts 4 + 1) reach exactly their rows' outputs, through the chunks'
    float sums; the other rows stay finite."""
    m, n, k, gs = 5, 16, 1024, 64
    wq, s, b = qweight(n, k, gs, 4, torch.bfloat16)
    x = randn(m, k, dtype=torch.bfloat16)
    x[1, 100] = float("inf")
    x[4, 700] = float("nan")
    out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs).cpu()
    oracle = x.double() @ dequant64(wq, s, b, gs, 4).T
    finite = torch.isfinite(oracle)
    assert not finite[[1, 4]].any() and finite[[0, 2, 3]].all()
    assert torch.equal(torch.isfinite(out), finite)
    assert _plan_names(affine_mv_plans) == ["AffineIdotRowsLaunch"]


def test_affine_idot_rows_routing(monkeypatch):
    """The multi-row integer-dot mat-vec takes 2 to IDOT_ROWS_MAX rows that the one-row one would take: not more
    rows, not an fp32 result, not rows of no whole 1024-value step, not with MLX_NATIVE_AFFINE_IDOT=0. Its rows
    run as the powers of two of M's binary digits."""
    from mlx_native.ops.quant import affine_idot_rows as rows, mmv
    from mlx_native.ops.quant.kernel import QmmPlan

    def kind(m, k, out_dtype=torch.bfloat16, n=24):
        gs = 64
        w = torch.zeros(n, k // 8, dtype=torch.int32)
        s = torch.ones(n, k // gs, dtype=torch.bfloat16)
        x = torch.zeros(m, k, dtype=torch.bfloat16)
        return QmmPlan(x, w, s, s, True, gs, 4, n, k, out_dtype).kind

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="auto"))  # the tests' default is on
    top = rows.IDOT_ROWS_MAX
    assert kind(2, 1024) == kind(2, 3072) == kind(top, 1024) == "affine_idot_rows" and kind(1, 1024) == "affine_idot"
    assert kind(3, 3072) == kind(top, 4096) == "mmv"  # from mmv.OVER_IDOT_ROWS_FROM rows where mmv.prefer (K >= 2048)
    big = mmv.OVER_IDOT_M2_MIN_WEIGHTS // 8192  # 2 rows of a large matrix: the tensor-core kernel (flat in M)
    assert kind(2, 8192, n=big) == "mmv" and kind(2, 8192, n=big - 64) == "affine_idot_rows"
    assert kind(top + 1, 1024) != "affine_idot_rows"
    assert kind(4, 1024, torch.float32) != "affine_idot_rows"
    assert kind(4, 768) != "affine_idot_rows"
    assert not rows.supports_rows(4, 64, True, torch.bfloat16, torch.bfloat16, 3, 768, 10)
    assert not rows.supports_rows(4, 64, True, torch.float32, torch.float32, 3, 1024, 10)
    assert not rows.supports_rows(8, 64, True, torch.bfloat16, torch.bfloat16, 3, 1024, 10)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_idot=False))
    assert kind(4, 1024) != "affine_idot_rows"
    assert rows.row_parts(7) == (4, 2, 1) and rows.row_parts(8) == (8,) and rows.row_parts(13) == (8, 4, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("nk", [(4096, 4096), (14336, 4096), (4096, 14336), (32000, 4096), (576, 1536), (4096, 11008),
                                (1024, 14336), (4096, 5376)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("idot", [True, False])
def test_gpu_affine_mv_real_sizes(monkeypatch, affine_mv_plans, nk, dtype, idot):
    """Real sizes on the GPU, through the integer-dot kernel (``dp2a``) where it applies and through
    affine_mv with it off."""
    from mlx_native.ops.quant import affine_idot

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_idot=idot))
    n, k = nk
    wq, s, b = qweight(n, k, 64, 4, dtype, device="cuda")
    for _ in range(3):  # repeated calls: the split counters rearm
        x = randn(1, k, dtype=dtype, device="cuda")
        out = mn.quantized_matmul(x, wq, s, b)
        w64 = ref.dequantize(wq, s, b, 64, 4, dtype=torch.float64, compute=torch.float64)
        assert_error_bar(out, x.double() @ w64.T, lowp_qmm(x, wq, s, b, 64, 4))
    expect = "AffineIdotLaunch" if idot and affine_idot.supports(4, 64, True, dtype, dtype, 1, k, wq.numel()) \
        else "AffineMvLaunch"
    assert _plan_names(affine_mv_plans) == [expect]


@pytest.mark.gpu
@pytest.mark.parametrize("kn", [(4096, 4096), (4096, 14336), (14336, 4096)])
@pytest.mark.parametrize("m", [2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.usefixtures("rows_up_to_8")
def test_gpu_affine_idot_rows_real_sizes(monkeypatch, affine_mv_plans, kn, m, dtype):
    """Real sizes (K x N) on the GPU through the multi-row integer-dot kernel (``dp2a``), whatever the routes."""
    k, n = kn
    wq, s, b = qweight(n, k, 64, 4, dtype, device="cuda")
    w64 = ref.dequantize(wq, s, b, 64, 4, dtype=torch.float64, compute=torch.float64)
    for _ in range(3):  # repeated calls: the split counters rearm
        x = randn(m, k, dtype=dtype, device="cuda")
        out = mn.quantized_matmul(x, wq, s, b)
        assert_error_bar(out, x.double() @ w64.T, lowp_qmm(x, wq, s, b, 64, 4), what=f"M{m} K{k} N{n}")
    assert _plan_names(affine_mv_plans) == ["AffineIdotRowsLaunch"]


@pytest.mark.gpu
@pytest.mark.parametrize("kn", [(4096, 4096), (4096, 14336), (14336, 4096), (2048, 1000)])
@pytest.mark.parametrize("m", [2, 5, 16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("gs", [32, 64, 128])
def test_gpu_tensor_core_decode_real_sizes(monkeypatch, kn, m, dtype, gs):
    """Real sizes (K x N) through the tensor-core decode kernel (``mmv.py``) at 2-16 rows, whatever the routes,
    its tiles dequantized two codes an instruction (``PACKED``: scales and biases in x's dtype, which a 16-bit
    result implies)."""
    from mlx_native.ops.quant import mmv

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="on", affine_idot=False,
                                                            affine_mv=False))
    built = spy_plans(monkeypatch, mmv.MmvLaunch)
    k, n = kn
    wq, s, b = qweight(n, k, gs, 4, dtype, device="cuda")
    w64 = ref.dequantize(wq, s, b, gs, 4, dtype=torch.float64, compute=torch.float64)
    for _ in range(3):  # repeated calls: the split counters rearm
        x = randn(m, k, dtype=dtype, device="cuda")
        out = mn.quantized_matmul(x, wq, s, b, group_size=gs)
        assert_error_bar(out, x.double() @ w64.T, lowp_qmm(x, wq, s, b, gs, 4), what=f"M{m} K{k} N{n} g{gs}")
    assert [p.launch.constexprs["PACKED"] for p in built] == [mmv.PACKED]


def test_quantized_matmul_m300(device):
    _check_qmm(device, 300, 33, 128, 64, 4, torch.bfloat16)


def test_quantized_matmul_strided_x(device):
    wq, s, b = qweight(24, 128, 64, 4, torch.bfloat16)
    base = randn(5, 2, 128, dtype=torch.bfloat16)
    x = base[:, 1]
    out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device))
    assert_error_bar(out.cpu(), x.double() @ dequant64(wq, s, b, 64, 4).T, lowp_qmm(x, wq, s, b, 64, 4))


# --------------------------------------------------------------------------- gather_qmm


def test_gather_qmm_matches_mlx_switchglu_shapes(device):
    """mlx-lm SwitchGLU: x [T, 1, 1, K], rhs_indices [T, top_k] -> [T, top_k, 1, N]."""
    e, n, k, t, topk = 6, 40, 128, 5, 3
    wq, s, b = qweight(n, k, 64, 4, torch.bfloat16, lead=(e,))
    x = randn(t, 1, 1, k, dtype=torch.bfloat16)
    idx = torch.randint(0, e, (t, topk), dtype=torch.int32)
    out = mn.gather_qmm(x.to(device), wq.to(device), s.to(device), b.to(device), rhs_indices=idx.to(device))
    assert out.shape == (t, topk, 1, n)
    theirs = from_mlx(mx.gather_qmm(mlx_array(x), mx_u32(wq), mlx_array(s), mlx_array(b),
                                    rhs_indices=mx.array(idx.numpy()), transpose=True, group_size=64, bits=4))
    w64 = dequant64(wq, s, b, 64, 4)
    oracle = torch.einsum("tk,tjnk->tjn", x[:, 0, 0].double(), w64[idx.long()]).unsqueeze(-2)
    lowp = torch.einsum("tk,tjnk->tjn", x[:, 0, 0].float(),
                        ref.dequantize(wq, s, b, 64, 4)[idx.long()].float()).to(x.dtype).unsqueeze(-2)
    assert_error_bar(out.cpu(), oracle, lowp)
    assert_agrees_with(out.cpu(), theirs, oracle)


@pytest.mark.parametrize("bits", [4, 6])
def test_gather_qmm_lhs_and_rhs_indices(device, bits):
    e, n, k = 4, 24, 64
    wq, s, b = qweight(n, k, 32, bits, torch.float16, lead=(e,))
    x = randn(3, 2, k, dtype=torch.float16)  # 3 batches of M=2 rows
    lhs = torch.tensor([[0, 2], [1, 1], [2, 0]], dtype=torch.int64)
    rhs = torch.tensor([[3, 0], [1, 2], [0, 0]], dtype=torch.int32)
    out = mn.gather_qmm(x.to(device), wq.to(device), s.to(device), b.to(device), lhs.to(device), rhs.to(device),
                        group_size=32, bits=bits)
    theirs = from_mlx(mx.gather_qmm(mlx_array(x), mx_u32(wq), mlx_array(s), mlx_array(b), mx.array(lhs.numpy()),
                                    mx.array(rhs.numpy()), transpose=True, group_size=32, bits=bits))
    w64 = dequant64(wq, s, b, 32, bits)
    oracle = x.double()[lhs] @ w64[rhs.long()].transpose(-1, -2)
    assert out.shape == (3, 2, 2, n)
    assert_agrees_with(out.cpu(), theirs, oracle)


@pytest.mark.parametrize("bits, sdtype, m, kind", [
    (4, torch.bfloat16, 1, "GroupedLaunch"),  # SwitchGLU rows at prefill: the 4-bit kernel, x rows by index
    (4, torch.float16, 4, "GroupedLaunch"),  # batches of 4 rows: x row lhs * 4 + i
    (6, torch.bfloat16, 1, "DequantGroupedLaunch"),  # other bits: dequantized chunks
])
def test_gather_qmm_many_rows_grouped(device, monkeypatch, bits, sdtype, m, kind):
    """gather_qmm past the decode rows (mlx-lm's SwitchGLU at prefill) on the expert-grouped kernels of
    ``moe/grouped.py``, x rows read through the lhs indices (permuted and repeated), against MLX and fp64."""
    from mlx_native.ops.moe import grouped

    monkeypatch.setattr(grouped, "CHUNK_BYTES", 1)  # the dequantized route: one matrix a chunk
    built = spy_plans(monkeypatch, getattr(grouped, kind))
    e, n, k, gs = 5, 40, 256, 64
    wq, s, b = qweight(n, k, gs, bits, sdtype, lead=(e,))
    batches = 24 if m == 1 else 6
    x = randn(batches, m, k, dtype=sdtype)
    g = torch.Generator().manual_seed(bits + m)
    lhs = torch.randint(0, batches, (batches, 3), generator=g)
    rhs = torch.randint(0, e, (batches, 3), generator=g).to(torch.int32)
    rhs[:, 0] = 2  # a hot expert: more rows than a block holds
    out = mn.gather_qmm(x.to(device), wq.to(device), s.to(device), b.to(device), lhs.to(device), rhs.to(device),
                        group_size=gs, bits=bits)
    assert len(built) == 1 and out.shape == (batches, 3, m, n)
    theirs = from_mlx(mx.gather_qmm(mlx_array(x), mx_u32(wq), mlx_array(s), mlx_array(b), mx.array(lhs.numpy()),
                                    mx.array(rhs.numpy()), transpose=True, group_size=gs, bits=bits))
    oracle = x.double()[lhs] @ dequant64(wq, s, b, gs, bits)[rhs.long()].transpose(-1, -2)
    lowp = (x.float()[lhs] @ ref.dequantize(wq, s, b, gs, bits)[rhs.long()].float().transpose(-1, -2)).to(sdtype)
    assert_error_bar(out.cpu(), oracle, lowp)
    assert_agrees_with(out.cpu(), theirs, oracle)


def test_gather_qmm_defaults_to_plain_batched_matmul(device):
    wq, s, b = qweight(16, 64, 64, 8, torch.bfloat16, lead=(3,))
    x = randn(3, 4, 64, dtype=torch.bfloat16)
    out = mn.gather_qmm(x.to(device), wq.to(device), s.to(device), b.to(device), rhs_indices=torch.tensor([2, 0, 1]).to(device),
                        group_size=64, bits=8)
    w64 = dequant64(wq, s, b, 64, 8)
    oracle = x.double() @ w64[[2, 0, 1]].transpose(-1, -2)
    theirs = from_mlx(mx.gather_qmm(mlx_array(x), mx_u32(wq), mlx_array(s), mlx_array(b),
                                    rhs_indices=mx.array(np.array([2, 0, 1], dtype=np.uint32)), group_size=64, bits=8))
    assert_agrees_with(out.cpu(), theirs, oracle)


@pytest.mark.parametrize("which", ["w", "scales", "biases", "all"])
def test_dequantize_and_embedding_row_strided(device, which):
    """dequantize / quantized_embedding with w, scales or biases as row-strided views (biases of another stride
    than the scales were read with the scales' stride before): the contiguous tensors' results, bit for bit."""
    wq, s, b = qweight(40, 128, 64, 4, torch.bfloat16)
    parts = {"w": wq, "scales": s, "biases": b}
    views = {name: (row_strided(t, device) if which in (name, "all") else t.to(device)) for name, t in parts.items()}
    want = mn.dequantize(wq.to(device), s.to(device), b.to(device))
    assert torch.equal(mn.dequantize(views["w"], views["scales"], views["biases"]), want)
    ids = torch.tensor([[0, 39], [7, 7]]).to(device)
    got = mn.quantized_embedding(ids, views["w"], views["scales"], views["biases"])
    assert torch.equal(got, want[ids])


@pytest.mark.parametrize("m", [1, 4, 40])
def test_quantized_matmul_row_strided_weights(device, m):
    """w, scales and biases as views with a row stride past their width: the calls copy them to contiguous
    tensors, and the plans must use the copies' strides (with the views' strides 2-16 rows read garbage)."""
    n, k, gs = 64, 2048, 64
    wq, s, b = qweight(n, k, gs, 4, torch.bfloat16)
    x = randn(m, k, dtype=torch.bfloat16).to(device)
    want = mn.quantized_matmul(x, wq.to(device), s.to(device), b.to(device))
    got = mn.quantized_matmul(x, row_strided(wq, device), row_strided(s, device), row_strided(b, device))
    assert torch.equal(got, want)


def test_gather_qmm_row_strided_stack(device):
    """An expert stack whose rows are strided views (see above) gives the contiguous stack's result."""
    e, n, k = 3, 24, 128
    wq, s, b = qweight(n, k, 64, 4, torch.bfloat16, lead=(e,))
    x = randn(3, 2, k, dtype=torch.bfloat16).to(device)
    rhs = torch.tensor([2, 0, 1]).to(device)
    want = mn.gather_qmm(x, wq.to(device), s.to(device), b.to(device), rhs_indices=rhs)
    got = mn.gather_qmm(x, row_strided(wq, device), row_strided(s, device), row_strided(b, device),
                        rhs_indices=rhs)
    assert torch.equal(got, want)


# --------------------------------------------------------------------------- bad input


class TestBadInput:
    def test_k_not_multiple_of_group_size(self):
        with pytest.raises(mn.InvalidArgumentError, match=r"quantize: the last dim of w \(100\) is not a multiple of group_size=64"):
            mn.quantize(torch.randn(4, 100), 64, 4)

    def test_unsupported_bits_and_group_size_name_supported(self):
        with pytest.raises(mn.UnsupportedError, match=r"quantize: bits=7 is not supported; supported: 2, 3, 4, 5, 6, 8"):
            mn.quantize(torch.randn(4, 64), 64, 7)
        with pytest.raises(NotImplementedError, match=r"group_size=16 is not supported; supported: 32, 64, 128"):
            mn.quantized_matmul(torch.randn(2, 64), torch.zeros(4, 8, dtype=torch.uint32), torch.ones(4, 4),
                                torch.ones(4, 4), group_size=16)
        with pytest.raises(mn.UnsupportedError, match="dequantize: bits=1"):
            mn.dequantize(torch.zeros(4, 8, dtype=torch.uint32), torch.ones(4, 1), torch.ones(4, 1), 64, 1)

    def test_packed_sizes_do_not_match(self):
        wq, s, b = qweight(8, 128, 64, 4, torch.float32)
        with pytest.raises(mn.InvalidArgumentError, match="quantized_matmul: x has 64 features .* K=128"):
            mn.quantized_matmul(torch.randn(2, 64), wq, s, b)
        with pytest.raises(mn.InvalidArgumentError, match="packed w has 16 uint32 words per row .* scales has 3 groups"):
            mn.quantized_matmul(torch.randn(2, 128), wq, torch.ones(8, 3), torch.ones(8, 3))
        with pytest.raises(mn.InvalidArgumentError, match="dequantize: biases has shape"):
            mn.dequantize(wq, s, b[:, :1])
        with pytest.raises(mn.InvalidArgumentError, match="scales has shape .* does not match w's shape"):
            mn.dequantize(wq, s[:4], b[:4])

    def test_wrong_dtypes(self):
        wq, s, b = qweight(8, 128, 64, 4, torch.float32)
        with pytest.raises(mn.UnsupportedDTypeError, match="quantized_matmul: w has dtype float32"):
            mn.quantized_matmul(torch.randn(2, 128), wq.view(torch.float32), s, b)
        with pytest.raises(mn.UnsupportedDTypeError, match="quantized_matmul: x has dtype int64"):
            mn.quantized_matmul(torch.ones(2, 128, dtype=torch.int64), wq, s, b)
        with pytest.raises(mn.UnsupportedDTypeError, match="gather_qmm: rhs_indices has dtype float32"):
            mn.gather_qmm(torch.randn(1, 2, 128), wq[None], s[None], b[None], rhs_indices=torch.zeros(1))

    def test_indices_out_of_range(self):
        wq, s, b = qweight(8, 64, 64, 4, torch.float32, lead=(3,))
        with pytest.raises(mn.InvalidArgumentError, match="gather_qmm: rhs_indices holds 3, out of range for 3 matrices"):
            mn.gather_qmm(torch.randn(2, 1, 64), wq, s, b, rhs_indices=torch.tensor([0, 3]))
        with pytest.raises(mn.InvalidArgumentError, match="gather_qmm: lhs_indices holds -1"):
            mn.gather_qmm(torch.randn(2, 1, 64), wq, s, b, lhs_indices=torch.tensor([-1, 0]), rhs_indices=torch.tensor([0, 1]))

    def test_quantized_embedding_bad_input(self):
        wq, s, b = qweight(3, 64, 64, 4, torch.float32)
        with pytest.raises(mn.InvalidArgumentError, match="quantized_embedding: ids holds 3, out of range for 3 rows"):
            mn.quantized_embedding(torch.tensor([0, 3]), wq, s, b)
        with pytest.raises(mn.InvalidArgumentError, match="quantized_embedding: ids holds -2"):
            mn.quantized_embedding(torch.tensor([-2]), wq, s, b)
        with pytest.raises(mn.UnsupportedDTypeError, match="quantized_embedding: ids has dtype float32"):
            mn.quantized_embedding(torch.zeros(2), wq, s, b)
        with pytest.raises(mn.UnsupportedDTypeError, match="quantized_embedding: dtype int32 is not supported"):
            mn.quantized_embedding(torch.tensor([0]), wq, s, b, dtype=torch.int32)
        with pytest.raises(mn.InvalidArgumentError, match="quantized_embedding: w must be a 2-D"):
            mn.quantized_embedding(torch.tensor([0]), wq[None], s[None], b[None])
        with pytest.raises(mn.InvalidArgumentError, match="quantized_embedding: packed w has 8 uint32 words"):
            mn.quantized_embedding(torch.tensor([0]), wq, s, b, group_size=32)

    def test_w_must_be_2d_for_quantized_matmul(self):
        wq, s, b = qweight(8, 64, 64, 4, torch.float32, lead=(2,))
        with pytest.raises(mn.UnsupportedError, match="quantized_matmul: w must be 2-D"):
            mn.quantized_matmul(torch.randn(2, 64), wq, s, b)


# --------------------------------------------------------------------------- GPU, real sizes


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 3, 16, 17, 300, 1024])
@pytest.mark.parametrize("nk", [(4096, 4096), (14336, 4096), (4000, 14336)])
def test_gpu_qmm_real_sizes(m, nk):
    n, k = nk
    wq, s, b = qweight(n, k, 64, 4, torch.bfloat16, device="cuda")
    x = randn(m, k, dtype=torch.bfloat16, device="cuda")
    out = mn.quantized_matmul(x, wq, s, b)
    w64 = ref.dequantize(wq, s, b, 64, 4, dtype=torch.float64, compute=torch.float64)
    assert_error_bar(out, x.double() @ w64.T, lowp_qmm(x, wq, s, b, 64, 4))


@pytest.mark.gpu
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("gs", GROUPS)
@pytest.mark.parametrize("m", [1, 7, 200])
def test_gpu_qmm_formats(bits, gs, m):
    wq, s, b = qweight(1000, 2048, gs, bits, torch.float16, device="cuda")
    x = randn(m, 2048, dtype=torch.float16, device="cuda")
    out = mn.quantized_matmul(x, wq, s, b, True, gs, bits)
    w64 = ref.dequantize(wq, s, b, gs, bits, dtype=torch.float64, compute=torch.float64)
    assert_error_bar(out, x.double() @ w64.T, lowp_qmm(x, wq, s, b, gs, bits))
    deq = mn.dequantize(wq, s, b, gs, bits)
    assert_error_bar(deq, w64, ref.dequantize(wq, s, b, gs, bits))


@pytest.mark.gpu
def test_gpu_quantize_bit_identical():
    w = randn(512, 4096, dtype=torch.bfloat16, device="cuda")
    for bits in BITS:
        got = mn.quantize(w, 64, bits)
        want = ref.quantize(w.cpu(), 64, bits)
        for a, b in zip(got, want):
            assert torch.equal(a.cpu().view(torch.int32) if a.dtype == torch.uint32 else a.cpu(),
                               b.view(torch.int32) if b.dtype == torch.uint32 else b)


@pytest.mark.parametrize("m", [2, 9])
def test_quantized_matmul_decode_swapped_tiles(device, m):
    """2-16 rows with N >= 64: the decode kernel runs W @ x.T on tensor cores (weight tile as the wide operand)."""
    _check_qmm(device, m, 136, 256, 64, 4, torch.bfloat16)
    _check_qmm(device, m, 64, 128, 32, 8, torch.float16)


@pytest.mark.parametrize("bits", [4, 8, 2])
def test_quantized_matmul_gemv_whole_steps(device, bits):
    """One row, N a multiple of the row tile and K of the step: the mask-free mat-vec path."""
    _check_qmm(device, 1, 64, 1024, 64, bits, torch.bfloat16)


@pytest.fixture(params=[True, False], ids=["word-gemv", "general-kernel"])
def word_gemv(request, monkeypatch):
    """One-row mat-vecs through the word-level kernel (MLX_NATIVE_WORD_GEMV=1, the default) and
    through the general qmm kernel (=0): both paths stay checked (the tensor-core decode kernel and
    the streamed affine mat-vec, which take 4-bit rows first, are off here)."""
    from mlx_native.runtime import env, plans

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, word_gemv=request.param, mmv="off",
                                                             affine_mv=False, gguf_mv=False))
    plans.clear_all()
    yield
    plans.clear_all()


@pytest.mark.parametrize("bits", [4, 8])
def test_one_row_matvec_paths(device, word_gemv, bits):
    _check_qmm(device, 1, 64, 1024, 64, bits, torch.bfloat16)  # whole steps, no masks
    _check_qmm(device, 1, 40, 256, 32, bits, torch.float16)  # masked tail rows and steps


def test_one_row_matvec_paths_ggml_and_moe(device, word_gemv, request):
    import numpy as np

    from test_ggml import _check_matmul
    from test_moe import test_moe_qmm_fused_gate_up

    rng = np.random.default_rng(3)
    for name in ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K"):
        _check_matmul(device, name, 1, 40, 512, torch.bfloat16, rng)
    test_moe_qmm_fused_gate_up(device, "silu", 2)  # routed rows, fused gate/up


def test_word_gemv_row_tiles_by_format(device, monkeypatch, request):
    """Latency-bound mat-vecs: GGUF rows take the smallest row tile (2 rows) when the SMs would otherwise
    go short of programs, and stay exact on the device; MLX affine rows keep 16-row tiles (4-row tiles of
    affine words with < 8 words per group were wrong on the H100 under Triton 3.6)."""
    import numpy as np

    from mlx_native.ops.quant import gemv
    from mlx_native.runtime import env, plans
    from test_ggml import _check_matmul

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, word_gemv=True, mmv="off",
                                                             affine_mv=False, gguf_mv=False))
    monkeypatch.setattr(gemv, "TILES_PER_SM", 10**6)  # never enough tiles: the smallest row tile
    built = spy_plans(monkeypatch, gemv.GemvLaunch)
    request.addfinalizer(plans.clear_all)  # no plan built here outlives the patched constants
    rng = np.random.default_rng(5)
    for name in ("Q4_1", "Q8_0", "Q4_K"):
        _check_matmul(device, name, 1, 72, 768, torch.bfloat16, rng)
    _check_qmm(device, 1, 40, 256, 32, 2, torch.float16)
    assert [p.launch.constexprs["BN"] for p in built] == [2, 2, 2, 16]
    assert [p.split for p in built[:3]] == [1, 1, 1]  # K < SPLIT_MIN_K: GGUF rows are not split


# --------------------------------------------------------------------------- split K merged in the decode launch


@pytest.fixture
def decode_launches(monkeypatch):
    """The mat-vec launch plans (quant/mmv.py, quant/gemv.py, quant/affine_mv.py, quant/affine_idot.py,
    quant/affine_idot_rows.py) built while the test runs, in build order (plans are cleared around it, so cached
    ones do not hide a build). K is split as far as the shapes allow, whatever the SM (CPU core) count."""
    from mlx_native.ops.quant import affine_idot, affine_idot_rows, affine_mv, gemv, mmv
    from mlx_native.runtime import env, plans

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))  # see test_ggml
    built = spy_plans(monkeypatch, mmv.MmvLaunch, gemv.GemvLaunch, affine_mv.AffineMvLaunch,
                      affine_idot.AffineIdotLaunch, affine_idot_rows.AffineIdotRowsLaunch)
    monkeypatch.setattr(mmv, "PROGRAMS_PER_SM", 64)
    monkeypatch.setattr(gemv, "PROGRAMS_PER_SM", 64)
    monkeypatch.setattr(gemv, "SPLIT_MIN_K", 0)
    monkeypatch.setattr(affine_mv, "PROGRAMS_PER_SM", 64)
    monkeypatch.setattr(affine_idot, "PROGRAMS_PER_SM", 64)
    monkeypatch.setattr(affine_idot_rows, "PROGRAMS_PER_SM", 64)
    yield built
    plans.clear_all()


@pytest.fixture
def splits_outer(monkeypatch):
    """Under the interpreter, run a grid's programs with axis 1 (the K split) outermost instead of
    axis 0, so the splits of one output tile are not consecutive (on a GPU they run at once): a
    counter shared by several tiles then lets a tile merge before all its splits stored."""
    from mlx_native.runtime import env

    if env.settings.triton_interpret:
        from triton.runtime import interpreter as itp

        set_idx = itp.InterpreterBuilder.set_grid_idx

        def split_major(self, x, y, z):
            nx, ny, nz = self.grid_dim
            i = (x * ny + y) * nz + z  # the interpreter's order: axis 0 outermost
            set_idx(self, (i // nz) % nx, i // (nx * nz), i % nz)

        monkeypatch.setattr(itp.InterpreterBuilder, "set_grid_idx", split_major)
    yield


def assert_merged_in_launch(plan):
    """``plan`` split K and merged the splits itself: no reduce launch, every counter back at zero."""
    assert plan.split > 1 and plan.splitk.fused and plan.splitk.reduce is None, plan.split
    assert plan.splitk.counters.shape == (plan.launch.grid[0],)
    assert not plan.splitk.counters.any(), plan.splitk.counters


def two_kernel_outputs(monkeypatch, decode_launches, calls):
    """The outputs of ``calls`` (functions of no argument) on plans built with ``qmm.FUSED_SPLITK = False``."""
    from mlx_native.ops.quant import qmm
    from mlx_native.runtime import plans

    monkeypatch.setattr(qmm, "FUSED_SPLITK", False)
    plans.clear_all()
    n_built = len(decode_launches)
    outs = [call().cpu() for call in calls]
    plan = decode_launches[n_built]
    assert not plan.splitk.fused and plan.splitk.counters is None and plan.splitk.reduce is not None
    return outs


SPLITK_CASES = {  # m, n, k, group_size, bits, dtype, plan: a K split in a decode kernel, 2 or 3 output tiles
    "mmv-1row": (1, 72, 1024, 64, 4, torch.bfloat16, "MmvLaunch"),  # 16 groups: 8 + 8
    "mmv-16rows": (16, 72, 1152, 64, 4, torch.float16, "MmvLaunch"),  # 18 groups: 10 + 8
    "gemv-8bit": (1, 40, 2048, 64, 8, torch.bfloat16, "GemvLaunch"),  # 4 splits of a 512-column step
    "affine-mv": (1, 20, 2048, 64, 4, torch.bfloat16, "AffineMvLaunch"),  # 2 splits of one 128-word step, 3 tiles
    "affine-idot": (1, 20, 3072, 64, 4, torch.bfloat16, "AffineIdotLaunch"),  # 3 splits of 128-word steps, 5 tiles
}


@pytest.mark.parametrize("case", list(SPLITK_CASES))
def test_decode_splitk_merged_in_launch(device, decode_launches, splits_outer, monkeypatch, case):
    """The last split of each tile to arrive sums the tile's partials in the same launch: after each
    call (new x every time) the output matches the reference and the counters are back at zero; the
    bits equal those of the 2-kernel path (same summation order)."""
    m, n, k, gs, bits, dtype, kind = SPLITK_CASES[case]
    if kind not in ("AffineMvLaunch", "AffineIdotLaunch"):
        monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_mv=False))
    if kind == "AffineMvLaunch":
        monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_idot=False))
    wq, s, b = qweight(n, k, gs, bits, dtype)
    w64 = dequant64(wq, s, b, gs, bits)
    xs = [randn(m, k, dtype=dtype) for _ in range(3)]
    calls = [lambda x=x: mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), True, gs, bits)
             for x in xs]
    fused = []
    for x, call in zip(xs, calls):
        fused.append(call().cpu())
        assert_error_bar(fused[-1], x.double() @ w64.T, lowp_qmm(x, wq, s, b, gs, bits), what=case)
        (plan,) = decode_launches
        assert type(plan).__name__ == kind
        assert_merged_in_launch(plan)
    for a, b_ in zip(fused, two_kernel_outputs(monkeypatch, decode_launches, calls)):
        assert torch.equal(a, b_)


@pytest.mark.parametrize("name, m, k, dtype, kind", [
    ("Q4_K", 1, 1024, torch.bfloat16, "MmvLaunch"),  # 4 super-blocks: 2 splits
    ("Q4_0", 16, 1024, torch.float16, "MmvLaunch"),  # 16 two-block steps: 4 splits
    ("Q8_0", 1, 1024, torch.bfloat16, "GemvLaunch"),  # 4 steps of 256 columns: 4 splits
    ("Q4_K", 2, 2048, torch.float32, "GemvLaunch"),  # fp32 rows: one mat-vec row per program, 2 splits
])
def test_ggml_decode_splitk_merged_in_launch(device, decode_launches, splits_outer, monkeypatch, name, m, k, dtype,
                                            kind, request):
    """GGUF weights in both decode kernels: as :func:`test_decode_splitk_merged_in_launch`."""
    from test_ggml import gguf_values, raw_tensor, rng_for, valid_blocks

    n = 72
    raw = valid_blocks(name, n, k, rng_for(request))
    w = torch.from_numpy(gguf_values(raw, name, (n, k)))
    xs = [randn(m, k, dtype=dtype) for _ in range(3)]
    calls = [lambda x=x: mn.ggml_matmul(x.to(device), raw_tensor(raw, device), name, (n, k)) for x in xs]
    fused = []
    for x, call in zip(xs, calls):
        fused.append(call().cpu())
        assert_error_bar(fused[-1], x.double() @ w.double().T, x @ w.to(dtype).T, what=f"{name} M{m}")
        (plan,) = decode_launches
        assert type(plan).__name__ == kind
        assert_merged_in_launch(plan)
    for a, b_ in zip(fused, two_kernel_outputs(monkeypatch, decode_launches, calls)):
        assert torch.equal(a, b_)


@pytest.mark.usefixtures("rows_up_to_8")
@pytest.mark.parametrize("m", [3, 7])
def test_affine_idot_rows_splitk_merged_in_launch(device, decode_launches, splits_outer, monkeypatch, m):
    """The multi-row integer-dot kernel split over K (2 splits of 256-word steps, 3 row tiles): each part of the
    rows (3 = 2 + 1, 7 = 4 + 2 + 1) of each row tile has its own counter, and its last split to arrive sums the
    part's partials in the launch; counters back at zero after each call, bits equal to the 2-kernel path."""
    from mlx_native.ops.quant.affine_idot_rows import row_parts

    n, k, gs = 20, 4096, 64
    wq, s, b = qweight(n, k, gs, 4, torch.bfloat16)
    w64 = dequant64(wq, s, b, gs, 4)
    xs = [randn(m, k, dtype=torch.bfloat16) for _ in range(3)]
    calls = [lambda x=x: mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs)
             for x in xs]
    fused = []
    for x, call in zip(xs, calls):
        fused.append(call().cpu())
        assert_error_bar(fused[-1], x.double() @ w64.T, lowp_qmm(x, wq, s, b, gs, 4), what=f"M{m}")
        (plan,) = decode_launches
        assert type(plan).__name__ == "AffineIdotRowsLaunch"
        assert plan.split == 2 and plan.splitk.fused and plan.splitk.reduce is None
        assert plan.splitk.counters.shape == (plan.launch.grid[0] * len(row_parts(m)),)
        assert not plan.splitk.counters.any(), plan.splitk.counters
    for a, b_ in zip(fused, two_kernel_outputs(monkeypatch, decode_launches, calls)):
        assert torch.equal(a, b_)


def test_decode_splitk_empty_split(device, decode_launches, splits_outer, monkeypatch):
    """A split with an empty K range (the split rules never make one: this forces 3 splits of 8 groups
    over 16) stores zeros and still counts in, so each tile is merged and its counter rearmed (mmv: the
    multi-row integer-dot kernel, which would take these 2 rows, off)."""
    from mlx_native.ops.quant import mmv

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, affine_idot=False))
    monkeypatch.setattr(mmv, "balanced_split", lambda *args: (3, 8))  # (the 2-16-row rule)
    m, n, k = 2, 72, 1024
    wq, s, b = qweight(n, k, 64, 4, torch.bfloat16)
    w64 = dequant64(wq, s, b, 64, 4)
    for _ in range(2):
        x = randn(m, k, dtype=torch.bfloat16)
        out = mn.quantized_matmul(x.to(device), wq.to(device), s.to(device), b.to(device))
        assert_error_bar(out.cpu(), x.double() @ w64.T, lowp_qmm(x, wq, s, b, 64, 4))
        (plan,) = decode_launches
        assert plan.split == 3
        assert_merged_in_launch(plan)


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_moe_gate_up_splitk_merged_in_launch(device, decode_launches, splits_outer, monkeypatch, activation):
    """Routed rows with the fused gate/up pair and a K split (8-bit, 2 steps of 512 columns, 4 row
    tiles): the last split sums both projections' partials and applies ``act(gate) * up`` in the launch."""
    import torch.nn.functional as F

    from test_moe import _lowp_rows, _rows, per_expert_loop

    e, n, k, topk, tokens = 5, 24, 1024, 2, 1
    gq, gs_, gb = qweight(n, k, 64, 8, torch.bfloat16, lead=(e,))
    uq, us, ub = qweight(n, k, 64, 8, torch.bfloat16, lead=(e,))
    g64, u64 = dequant64(gq, gs_, gb, 64, 8), dequant64(uq, us, ub, 64, 8)
    gl, ul = ref.dequantize(gq, gs_, gb, 64, 8), ref.dequantize(uq, us, ub, 64, 8)
    act = F.silu if activation == "silu" else (lambda v: F.gelu(v, approximate="tanh"))
    calls, fused = [], []
    for _ in range(3):
        x = randn(tokens, k, dtype=torch.bfloat16)
        ids = torch.randint(0, e, (tokens, topk), dtype=torch.int32)
        calls.append(lambda x=x, ids=ids: mn.moe_qmm(
            x.to(device), ids.to(device), gq.to(device), gs_.to(device), gb.to(device), group_size=64, bits=8,
            w_up=uq.to(device), scales_up=us.to(device), biases_up=ub.to(device), activation=activation))
        fused.append(calls[-1]().cpu())
        xr, flat = _rows(x, tokens, topk), ids.flatten()
        oracle = act(per_expert_loop(xr, flat, g64)) * per_expert_loop(xr, flat, u64)
        lowp = act(_lowp_rows(xr, flat, gl)) * _lowp_rows(xr, flat, ul)
        assert_error_bar(fused[-1], oracle.reshape(tokens, topk, n), lowp.reshape(tokens, topk, n))
        (plan,) = decode_launches
        assert type(plan).__name__ == "GemvLaunch" and plan.splitk.has_up
        assert_merged_in_launch(plan)
    for a, b_ in zip(fused, two_kernel_outputs(monkeypatch, decode_launches, calls)):
        assert torch.equal(a, b_)


def test_splitk_plan_built_in_capture_uses_two_launches(monkeypatch):
    """Counters cannot be zeroed during CUDA-graph capture: a plan built there reduces in a second launch."""
    from mlx_native.ops.quant import qmm

    assert qmm.SplitK(2, 1, 40, False, 0, torch.device("cpu"), tiles=1).fused
    monkeypatch.setattr(qmm, "can_fuse", lambda device: False)
    sk = qmm.SplitK(2, 1, 40, False, 0, torch.device("cpu"), tiles=1)
    assert not sk.fused and sk.counters is None and sk.reduce is not None
    assert not qmm.SplitK(2, 1, 40, False, 0, torch.device("cpu")).fused  # qmm's own split: always two launches


@pytest.mark.parametrize("mode, m, n, k, fmt, expected", [
    ("auto", 1, 4096, 4096, "affine", True),  # measured 1.10x the word-level kernel (H100, g64)
    ("auto", 1, 49152, 576, "affine", True),  # SmolLM2-shaped head: 1.06x
    ("auto", 1, 576, 576, "affine", False),  # 6.3 against 3.3 us: launch and prologue bound
    ("auto", 1, 1024, 4096, "affine", False),  # 0.77x
    ("auto", 16, 1024, 4096, "affine", True),  # 1.53x the general kernel
    ("auto", 16, 576, 1536, "affine", False),  # K <= 1536: 0.82-0.94x
    ("auto", 1, 14336, 4096, "Q4_0", False),  # one row: the integer-dot kernel
    ("auto", 16, 14336, 4096, "Q4_0", True),  # packed Q4_0 tiles from 5 rows: 30.2 against 61.9 us
    ("auto", 5, 4096, 4096, "Q4_0", True),
    ("auto", 4, 14336, 4096, "Q4_0", True),  # 3-4 rows of >= 2^25 weights: 28.8 against q4_mv's 35.5
    ("auto", 3, 14336, 4096, "Q4_0", True),  # 28.7 against 31.5
    ("auto", 4, 4096, 4096, "Q4_0", False),  # ... below: q4_mv (12.0 against 14.0)
    ("auto", 2, 14336, 4096, "Q4_0", False),  # 2 rows: q4_mv (25.8 against 28.9)
    ("auto", 16, 14336, 4128, "Q4_0", False),  # 129 blocks a row: no 8-block steps
    ("auto", 5, 14336, 4096, "Q4_1", True),  # Q4_1 as Q4_0: wide steps, 29.4 against 53.6 us
    ("auto", 4, 14336, 4096, "Q4_1", True),  # 3-4 rows of >= 2^25 weights: 29.3 against q4_mv's 32.5
    ("auto", 4, 4096, 4096, "Q4_1", False),  # ... below: q4_mv
    ("auto", 8, 4096, 4096, "Q4_1", True),
    ("auto", 8, 4096, 2048, "Q4_1", True),  # wide steps at any size from 5 rows
    ("auto", 8, 4096, 2112, "Q4_1", False),  # 66 blocks, no whole wide step; below 2^24 weights: not timed
    ("auto", 8, 14336, 4160, "Q4_1", True),  # 130 blocks: 2-block steps of 4-byte loads, 54 against 59 us
    ("auto", 8, 14336, 4128, "Q4_1", False),  # 129 blocks a row: no packed tiles
    ("auto", 1, 14336, 4096, "Q4_K", False),  # one row: the streamed Q4_K kernels
    ("auto", 2, 14336, 4096, "Q4_K", True),  # prescaled tiles: 65-79 against 72-83 us
    ("on", 1, 576, 576, "Q4_0", True),
    ("off", 16, 14336, 4096, "affine", False),
])
def test_mmv_routing(monkeypatch, mode, m, n, k, fmt, expected):
    """``mmv.prefer``: MLX_NATIVE_MMV=on/off decide; auto follows the H100 decode_route / mmv_sweep measurements."""
    from mlx_native.ops.ggml import formats
    from mlx_native.ops.quant import gemv, mmv

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv=mode))
    assert mmv.prefer(m, n, k, gemv.AFFINE.value if fmt == "affine" else formats.BY_NAME[fmt].id) is expected


def test_mmv_auto_routes_plans(device, monkeypatch):
    """Under ``auto`` the routing reaches the plans: a small matrix runs elsewhere (and is still right).
    The streamed one-row kernel is off, else it would take this call before mmv's routing is asked."""
    from mlx_native.ops.quant import gemv, mmv

    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, mmv="auto", affine_mv=False))
    built = spy_plans(monkeypatch, mmv.MmvLaunch, gemv.GemvLaunch)
    _check_qmm(device, 1, 72, 256, 64, 4, torch.bfloat16)
    assert [type(p).__name__ for p in built] == ["GemvLaunch"]


# --------------------------------------------------------------------------- the norm handed to the next launch

def _matmul_norm_case(n, k, dtype, device, rows=1, scale_dtype=None):
    wq, s, b = mn.quantize(torch.randn(n, k) * 0.05, 64, 4)
    sd = scale_dtype or dtype
    x = randn(rows, k, dtype=dtype, device=device)
    r = randn(rows, n, dtype=torch.promote_types(dtype, sd), device=device)
    return x, wq.to(device), s.to(device=device, dtype=sd), b.to(device=device, dtype=sd), r, \
        (torch.rand(n) + 0.5).to(device)


def test_norm_handoff_bad_input(device):
    from mlx_native.ops.quant import matmul_norm

    x, wq, s, b, r, nw = _matmul_norm_case(64, 1024, torch.bfloat16, device)
    op = "matmul_add_rms_norm_handoff"
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: residual has shape"):
        matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r[:, :10], nw)
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: weight"):
        matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r, nw[:10])
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: eps"):
        matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r, nw, 0.0)
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: x has 512 features"):
        matmul_norm.matmul_add_rms_norm_handoff(x[:, :512], wq, s, b, r, nw)
    hand = matmul_norm.NormHandoff(x, x, torch.ones(4, device=device), 1e-6)  # a "row" of 1024 values
    with pytest.raises(mn.InvalidArgumentError, match="handoff_matmul: x has 1024 features"):
        matmul_norm.handoff_matmul(hand, wq[:, :64], s[:, :8], b[:, :8])
    with pytest.raises(mn.InvalidArgumentError, match="handoff_matmul: the up projection has 32 rows"):
        matmul_norm.handoff_matmul(hand, wq, s, b, up=(wq[:32], s[:32], b[:32]), activation="silu")


def _handoff_case(n, k, n2, dtype, device, glu=False):
    """A producer ``[n, k]`` (o projection), residual, norm weight and a consumer ``[n2, n]`` (with ``glu`` a
    gate and an up projection)."""
    x, wq, s, b, r, nw = _matmul_norm_case(n, k, dtype, device)
    consumers = []
    for _ in range(2 if glu else 1):
        w2, s2, b2 = mn.quantize(torch.randn(n2, n) * 0.05, 64, 4)
        consumers.append((w2.to(device), s2.to(device=device, dtype=dtype), b2.to(device=device, dtype=dtype)))
    return x, wq, s, b, r, nw, consumers


def _handoff_oracle(x, wq, s, b, r, nw, consumers, eps, offset, act=None):
    """fp64: h as the two ops round it, then the norm and the consumer(s) in fp64 (dequantized weights)."""
    y = mn.quantized_matmul(x, wq, s, b)
    h = mn.add_rms_norm(y, r, nw, eps, weight_offset=offset)[1].double()
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * (nw.double() + offset)
    outs = [normed @ ref.dequantize(*c, 64, 4).double().T for c in consumers]
    if act is None:
        return outs[0]
    return torch.nn.functional.silu(outs[0]) * outs[1]


@pytest.mark.parametrize("n2,dtype,offset,glu", [(40, torch.bfloat16, 0.0, False), (36, torch.float16, 1.0, False),
                                                 (24, torch.bfloat16, 0.0, True)])
def test_norm_handoff_equals_norm_then_matmul(device, monkeypatch, n2, dtype, offset, glu):
    """Producer (o projection + residual add, parts of sum h^2) and consumer (qkv or gate/up projection of the
    normed row, 1 / rms applied last): h as the two ops give it, the consumer's result within the error bar
    of norm -> quantized_matmul in the same dtype against fp64."""
    from mlx_native.ops.quant import affine_idot, affine_mv, matmul_norm

    monkeypatch.setattr(affine_idot, "IDOT_BN", 32)  # fewer programs for the interpreter
    # no K split: the two ops' matmul sums K in the producer's order (a split one may round differently)
    monkeypatch.setattr(affine_mv, "split_count", lambda steps, tiles, target: 1)
    n, k, eps = 1024, 1024, 1e-5
    x, wq, s, b, r, nw, consumers = _handoff_case(n, k, n2, dtype, device, glu)
    built = spy_plans(monkeypatch, affine_idot.AffineIdotLaunch)
    hand = matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r, nw, eps, weight_offset=offset)
    assert isinstance(hand, matmul_norm.NormHandoff) and hand.parts.shape == (n // 32,)
    normed2, h2 = mn.add_rms_norm(mn.quantized_matmul(x, wq, s, b), r, nw, eps, weight_offset=offset)
    assert torch.equal(hand.h, h2), "h = round(round(x W^T) + residual), as the two ops"
    torch.testing.assert_close(hand.parts.sum(), h2.float().pow(2).sum(), rtol=1e-5, atol=0)
    act = "silu" if glu else None
    up = consumers[1] if glu else None
    out = matmul_norm.handoff_matmul(hand, *consumers[0], up=up, activation=act)
    assert [(p.launch.constexprs["NORM_OUT"], p.launch.constexprs["NORM_IN"]) for p in built] == [
        (True, False), (False, False), (False, True)], "producer, the check's matmul, the consumer"
    base = mn.quantized_matmul(normed2, *consumers[0])
    if glu:
        base = mn.silu_mul(base, mn.quantized_matmul(normed2, *consumers[1]))
    oracle = _handoff_oracle(x, wq, s, b, r, nw, consumers, eps, offset, act)
    assert out.shape == (1, n2) and out.dtype == dtype
    assert_error_bar(out, oracle, base, what="handoff consumer")


def test_norm_handoff_consumer_that_cannot_take_it_gets_the_normed_row(device, monkeypatch):
    """A consumer the integer-dot kernel does not take (K = 1024 rows of fp32 scales) runs on hand.normed()."""
    from mlx_native.ops.quant import affine_idot, matmul_norm

    monkeypatch.setattr(affine_idot, "IDOT_BN", 32)
    x, wq, s, b, r, nw, consumers = _handoff_case(1024, 1024, 16, torch.bfloat16, device)
    hand = matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r, nw, 1e-6)
    w2, s2, b2 = consumers[0]
    out = matmul_norm.handoff_matmul(hand, w2, s2.float(), b2.float())
    normed = mn.add_rms_norm(mn.quantized_matmul(x, wq, s, b), r, nw, 1e-6)[0]
    want = mn.quantized_matmul(hand.normed(), w2, s2.float(), b2.float())
    assert torch.equal(out, want)
    torch.testing.assert_close(hand.normed().float(), normed.float(), rtol=2 ** -7, atol=2 ** -7)


def test_norm_handoff_not_for_several_rows(device):
    from mlx_native.ops.quant import matmul_norm

    x, wq, s, b, r, nw = _matmul_norm_case(64, 1024, torch.bfloat16, device, rows=2)
    assert matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r, nw) is None


@pytest.mark.gpu
@pytest.mark.parametrize("n,k,n2,glu", [(4096, 4096, 6144, False), (4096, 14336, 6144, False),
                                        (4096, 4096, 14336, True), (2048, 5120, 8192, True)])
def test_gpu_norm_handoff_real_sizes(n, k, n2, glu):
    """Llama-3-8B's o -> gate/up and down -> qkv handoffs (and a 2048-wide model) against the fp64 oracle, with
    norm -> quantized_matmul in bf16 as the error bar."""
    from mlx_native.ops.quant import matmul_norm

    x, wq, s, b, r, nw, consumers = _handoff_case(n, k, n2, torch.bfloat16, "cuda", glu)
    hand = matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r, nw, 1e-5)
    normed2, h2 = mn.add_rms_norm(mn.quantized_matmul(x, wq, s, b), r, nw, 1e-5)
    assert torch.equal(hand.h, h2)
    act = "silu" if glu else None
    out = matmul_norm.handoff_matmul(hand, *consumers[0], up=consumers[1] if glu else None, activation=act)
    base = mn.quantized_matmul(normed2, *consumers[0])
    if glu:
        base = mn.silu_mul(base, mn.quantized_matmul(normed2, *consumers[1]))
    oracle = _handoff_oracle(x, wq, s, b, r, nw, consumers, 1e-5, 0.0, act)
    assert_error_bar(out, oracle.to(out.device), base, what="handoff consumer")
    for _ in range(2):  # no state between calls
        again = matmul_norm.handoff_matmul(matmul_norm.matmul_add_rms_norm_handoff(x, wq, s, b, r, nw, 1e-5),
                                           *consumers[0], up=consumers[1] if glu else None, activation=act)
        assert torch.equal(again, out)


@pytest.mark.gpu
def test_gpu_reference_backend_on_cuda_uint32_weights():
    """MLX_NATIVE_BACKEND=reference with CUDA tensors: the embedding lookup and matmul on uint32 words (torch has
    no uint32 index kernel on CUDA) agree with the kernels (fp32 dequantization, fused or not)."""
    wq, s, b = (t.cuda() for t in mn.quantize(torch.randn(100, 256), 64, 4))
    ids = torch.tensor([[3, 99, 0]], device="cuda")
    x = randn(2, 256, device="cuda")
    with mn.use_backend("reference"):
        e_ref = mn.quantized_embedding(ids, wq, s, b)
        y_ref = mn.quantized_matmul(x, wq, s, b)
    torch.testing.assert_close(e_ref, mn.quantized_embedding(ids, wq, s, b), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y_ref, mn.quantized_matmul(x, wq, s, b), rtol=1e-3, atol=1e-3)
