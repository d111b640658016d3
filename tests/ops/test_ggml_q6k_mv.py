"""The streamed one-row mat-vec for GGUF Q6_K weights (``ops/ggml/q6k_mv.py``), called through its launch plan
``Q6kMvLaunch`` directly (the routing of ``ggml_matmul`` is the lead's): ``gguf.quants`` dequantizes the oracle
weight, the fp64 product of x with it is the oracle, ``x @ w.to(dtype).T`` the error bar's baseline.

gguf cannot quantize Q6_K (``valid_blocks`` falls back to random bytes), so :func:`quantized_blocks` packs the
blocks of llama.cpp's reference quantizer (one scale search step less) for the realistic case; random bytes
cover every code and scale bit pattern, crafted blocks every byte value at every position, and the extreme fp16
``d`` values of ``test_ggml.EXTREME``."""

import dataclasses

import numpy as np
import pytest
import torch

from helpers import assert_error_bar, randn
from mlx_native.ops.ggml import formats
from mlx_native.runtime.device import device_info
from test_ggml import crafted_blocks, force_split, gguf_values, oracle_weight, plan_output, rng_for

Q6K = formats.BY_NAME["Q6_K"]


def _mod():
    from mlx_native.ops.ggml import q6k_mv

    return q6k_mv


def quantized_blocks(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Q6_K blocks of a random ``[n, k]`` weight as llama.cpp's ``quantize_row_q6_K_ref`` makes them (the
    scale of each 16 values from its largest magnitude, ``-max / 32``; int8 scales against the super-block's
    largest, ``d = -max_scale / 128``; codes ``round(v / (d sc)) + 32`` in 0-63), packed in ggml's layout."""
    w = (rng.standard_normal((n * k // 256, 16, 16)) * 0.05).astype(np.float32)
    mx = np.take_along_axis(w, np.abs(w).argmax(-1)[..., None], -1)[..., 0]  # signed largest of each group
    scale = mx / -32.0
    ms = np.take_along_axis(scale, np.abs(scale).argmax(-1)[:, None], -1)  # [blocks, 1]
    d = (ms / -128.0).astype(np.float16)
    sc = np.clip(np.rint(scale / d.astype(np.float32)), -128, 127).astype(np.int8)
    step = d.astype(np.float32) * sc.astype(np.float32)  # [blocks, 16]
    safe = np.where(step == 0, 1.0, step)
    q = (np.clip(np.rint(w / safe[..., None]), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # h, r, l
    raw = np.zeros((q.shape[0], Q6K.block_bytes), dtype=np.uint8)
    raw[:, :128] = ((q[:, :, :2] & 15) | ((q[:, :, 2:] & 15) << 4)).reshape(-1, 128)  # value 128 h + i: nibble i // 64
    raw[:, 128:192] = ((q >> 4) << (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]).sum(
        axis=2, dtype=np.uint8).reshape(-1, 64)  # high pairs: byte 32 h + l, bits 2 r
    raw[:, 192:208] = sc.view(np.uint8)
    raw[:, 208:210] = d.view(np.uint8).reshape(-1, 2)
    raw = raw.reshape(-1)
    deq = gguf_values(raw, "Q6_K", (n, k))  # the packing round-trips: the gguf values are the quantized weight
    assert np.abs(deq - w.reshape(n, k)).max() <= np.abs(step).max()
    return raw


def _run(device, raw: np.ndarray, n: int, k: int, dtype, x=None, baseline32=False, launch=None):
    """``(out, oracle, baseline, plan)`` of one row of x against the Q6_K rows ``raw`` through a ``Q6kMvLaunch``
    (or ``launch``); ``baseline32``: the baseline is the fp32 product rounded to ``dtype`` (for weights that do not
    fit ``dtype``)."""
    w = oracle_weight(raw, "Q6_K", (n, k))
    x = randn(1, k, dtype=dtype) if x is None else x
    plan = (launch or _mod().Q6kMvLaunch)(n, k, dtype, torch.device(device))
    return (*plan_output(device, plan, raw, w, x, baseline32), plan)


@pytest.fixture
def forced_split(monkeypatch, request):
    """Split K over as many programs as there are steps (merged in the launch)."""
    force_split(monkeypatch, request, _mod())


# steps of 1 / 1 / 4 blocks; 3 steps of 4 and a partial one of 2; 2 of 4 and one of 3
@pytest.mark.parametrize("n, k", [(8, 256), (19, 768), (72, 2048), (40, 3584), (13, 2816)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q6k_mv_error_bar(device, forced_split, n, k, dtype, request):
    """Quantized weights: one or several loop steps per row (an odd number of them: the second step of the loop's
    last iteration skipped), rows not a multiple of the row tile, and a K split merged in the launch."""
    from test_quant import assert_merged_in_launch

    q6k_mv = _mod()
    raw = quantized_blocks(n, k, rng_for(request))
    out, oracle, baseline, plan = _run(device, raw, n, k, dtype)
    assert_error_bar(out, oracle, baseline, what=f"Q6_K mat-vec {n}x{k} {dtype}")
    c = plan.launch.constexprs
    sbs, tail = q6k_mv.tiling(k, n, device_info(torch.device(device)).sm_count)
    assert c["SBS"] == sbs and c["TAIL"] == tail and c["BN"] == q6k_mv.tile_rows(sbs)
    assert c["EVEN_N"] == (n % c["BN"] == 0)
    steps = k // 256 // sbs
    assert plan.split == steps
    if steps > 1:
        assert_merged_in_launch(plan)


@pytest.mark.parametrize("upt, max_sbs, rt, warps", [(1, 4, 1, 4), (2, 2, 2, 4), (2, 4, 4, 2), (4, 1, 2, 4),
                                                     (4, 4, 8, 2)])
def test_q6k_mv_tile_shapes(device, monkeypatch, upt, max_sbs, rt, warps, request):
    """The shapes the GPU sweep may choose: 1, 2 or 4 units a thread, steps of 1 to 4 super-blocks, 1 to 8 rows
    a thread, 2 or 4 warps; random code and scale bytes (negative scales included), unsplit rows."""
    from mlx_native.runtime import plans

    q6k_mv = _mod()
    for name, value in (("Q6K_UPT", upt), ("Q6K_MAX_SBS", max_sbs), ("Q6K_RT", rt), ("Q6K_WARPS", warps),
                        ("PROGRAMS_PER_SM", 0)):
        monkeypatch.setattr(q6k_mv, name, value)
    request.addfinalizer(plans.clear_all)
    n, k = 21, 2048
    rng = rng_for(request)
    raw = crafted_blocks("Q6_K", n * k // 256, rng)
    out, oracle, baseline, plan = _run(device, raw, n, k, torch.bfloat16)
    assert_error_bar(out, oracle, baseline, what=f"Q6_K mat-vec UPT {upt} SBS {max_sbs} RT {rt} W {warps}")
    c = plan.launch.constexprs
    assert (c["UPT"], c["SBS"], plan.split) == (upt, max_sbs, 1)
    assert c["BN"] == rt * max(1, 32 * warps // (16 // upt * 2 * max_sbs))


def byte_sweep_blocks(n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks whose bytes 0-207 (low nibbles, high pairs, scales) run through every byte value at every position:
    byte ``p`` of block ``b`` is ``(p + b + r) % 256`` (``r`` random), so 256 blocks hold each value at each
    position; ``d`` random with both signs."""
    raw = crafted_blocks("Q6_K", n_blocks, rng).reshape(n_blocks, Q6K.block_bytes)
    r = int(rng.integers(0, 256))
    raw[:, :208] = ((np.arange(208)[None, :] + np.arange(n_blocks)[:, None] + r) % 256).astype(np.uint8)
    return raw.reshape(-1)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the oracle's numpy
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q6k_mv_extreme_d(device, dtype, request):
    """fp16 ``d`` of 65504, 3e4, 1e-5, 6e-8 (subnormal), +-0, +-Inf and NaN in random blocks: the outputs are
    non-finite exactly where the fp64 oracle's are, the finite ones within the error bar of the fp32 product
    (x scaled down in fp16 so that the largest outputs still fit the dtype)."""
    n, k = 24, 1024
    rng = rng_for(request)
    raw = crafted_blocks("Q6_K", n * k // 256, rng, extreme=True)
    d = raw.reshape(-1, Q6K.block_bytes)[:, 208:210].copy().view(np.float16)
    assert np.isinf(d).any() and np.isnan(d).any() and (np.abs(d) == 65504).any() and (d == 0).any()
    x = randn(1, k, dtype=dtype, scale=1.0 if dtype == torch.bfloat16 else 2.0**-18)
    out, oracle, baseline, _ = _run(device, raw, n, k, dtype, x=x, baseline32=True)
    finite = torch.isfinite(oracle)
    assert 0 < int(finite.sum()) < n
    assert torch.equal(torch.isfinite(out), finite)
    assert oracle[finite].abs().max() < torch.finfo(dtype).max / 2
    assert_error_bar(out, oracle, baseline, what=f"Q6_K extreme d {dtype}")


@pytest.mark.parametrize("kernel", ["q6k_mv", "q6k_idot"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q6k_mv_keeps_inf_and_nan_of_x(device, dtype, kernel, request):
    """Inf / NaN in x reach the outputs of both one-row Q6_K kernels (``q6k_idot``: through the groups' float sums,
    the integers cannot carry them): non-finite exactly where the fp64 oracle's are."""
    from mlx_native.ops.ggml import q6k_idot

    n, k = 8, 2048
    raw = quantized_blocks(n, k, rng_for(request))
    launch = q6k_idot.Q6kIdotLaunch if kernel == "q6k_idot" else None
    for bad in (float("inf"), float("-inf"), float("nan")):
        x = randn(1, k, dtype=dtype)
        x[0, 1300] = bad
        out, oracle, _, _ = _run(device, raw, n, k, dtype, x=x, launch=launch)
        assert not torch.isfinite(oracle).any()
        assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), bad


def test_q6k_mv_supports(monkeypatch):
    """The gate: 1 to ``ROWS_MAX`` rows of bf16/fp16 x (several at an even row stride) against Q6_K rows of whole
    super-blocks under 2 GiB, while ``MLX_NATIVE_GGUF_MV`` (settings.gguf_mv) is on."""
    from mlx_native.runtime import env

    q6k_mv = _mod()
    q6, bf, args = Q6K.id, torch.bfloat16, (4096, 4096, 4096 * 16 * 210, 132)
    assert q6k_mv.supports(q6, bf, 1, *args) and q6k_mv.supports(q6, torch.float16, 1, *args)
    assert q6k_mv.supports(q6, bf, 1, 7, 256, 7 * 210, 132)  # small and odd matrices too
    assert q6k_mv.supports(q6, bf, 2, *args, 4096) and q6k_mv.supports(q6, bf, q6k_mv.ROWS_MAX, *args, 4098)
    assert not q6k_mv.supports(q6, bf, q6k_mv.ROWS_MAX + 1, *args, 4096)  # the tiled decode kernel
    assert not q6k_mv.supports(q6, bf, 2, *args, 4097)  # odd x row stride: x is read in words
    assert q6k_mv.supports(q6, bf, 1, *args, 4097)  # (one row has no row stride)
    assert not q6k_mv.supports(q6, torch.float32, 1, *args)
    for other in ("Q4_K", "Q5_K", "Q8_0", "Q4_0"):
        assert not q6k_mv.supports(formats.BY_NAME[other].id, bf, 1, *args)
    assert not q6k_mv.supports(q6, bf, 1, 4096, 4096 + 128, 1, 132)  # not whole super-blocks
    assert not q6k_mv.supports(q6, bf, 1, 4096, 4096, 2**31, 132)  # int32 offsets
    assert q6k_mv.supports(q6, bf, 1, 4096, 4096, 2**31 - 1, 132)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))
    assert not q6k_mv.supports(q6, bf, 1, *args)


def test_q6k_mv_step_rule():
    """Rows of at least Q6K_MAX_SBS super-blocks take steps of that many and a partial one of the super-blocks
    left, shorter rows the most that divide them; tiles take RT rows per thread left after the slots' lanes."""
    q6k_mv = _mod()
    assert [q6k_mv.tiling(k) for k in (256, 512, 768, 1024, 4096, 14336, 11008, 5376, 3584)] == [
        (1, 0), (2, 0), (1, 0), (4, 0), (4, 0), (4, 0), (4, 3), (4, 1), (2, 0)]
    # 2-super-block steps split into one-step programs (37 of them, 224 tiles) take a partial one; unsplit they stay
    assert q6k_mv.tiling(18944, 3584, 132) == (4, 2) and q6k_mv.tiling(3584, 18944, 132) == (2, 0)
    # on rows of few tiles the 4-super-block steps would split one a program: 1-super-block steps stay
    assert q6k_mv.tiling(5376, 2048, 132) == (1, 0) and q6k_mv.tiling(5376, 4096, 132) == (4, 1)
    assert q6k_mv.tile_rows(4, upt=4, warps=4, rt=4) == 16  # 4 lanes x 8 slots: a warp; 4 warps of rows
    assert q6k_mv.tile_rows(1, upt=4, warps=4, rt=4) == 64  # 8 lanes a step: 16 threads a row set
    assert q6k_mv.tile_rows(4, upt=1, warps=4, rt=4) == 4  # 16 lanes x 8 slots: every thread on the slots



# --------------------------------------------------------------------------- GPU, real sizes


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, nk", [
    *(("q6k_mv", nk) for nk in ((14336, 4096), (4096, 14336), (1024, 4096), (4096, 11008), (32000, 4096))),
    *(("q6k_idot", nk) for nk in ((14336, 4096), (4096, 14336), (4096, 4096), (128256, 4096), (1024, 2048))),
])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_q6k_mv_real_sizes(kernel, nk, dtype):
    """Llama shapes whose Q6_K tensors Q4_K_M / Q5_K_M files hold (ffn_down of 14336 and 11008 columns, attn_v,
    the output head), one row of x through either one-row kernel against the fp64 oracle (``ggml_dequantize``:
    bit-exact with gguf); repeated calls with new x reuse the plan, including its K split's counters."""
    import mlx_native as mn
    from mlx_native.ops.ggml import q6k_idot
    from test_quant import assert_merged_in_launch

    n, k = nk
    raw = torch.from_numpy(quantized_blocks(n, k, np.random.default_rng(k))).cuda()
    w64 = mn.ggml_dequantize(raw, "Q6_K", (n, k)).double()
    plan = (q6k_idot.Q6kIdotLaunch if kernel == "q6k_idot" else _mod().Q6kMvLaunch)(n, k, dtype, raw.device)
    for _ in range(3):
        x = randn(1, k, dtype=dtype, device="cuda")
        out = plan(x, raw)
        assert_error_bar(out, x.double() @ w64.T, x @ w64.to(dtype).T, what=f"{kernel} 1x{n}x{k} {dtype}")
    if plan.split > 1:
        assert_merged_in_launch(plan)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["q6k_mv", "q6k_idot"])
def test_gpu_q6k_mv_x_at_odd_offset(kernel):
    """x is read as int32 words (by both one-row Q6_K kernels): a view 2 bytes past an aligned address (copied by
    the plan) gives the result of an aligned copy; without the copy its word loads would fault."""
    from mlx_native.ops.ggml import q6k_idot

    n, k = 64, 4096
    raw = torch.from_numpy(quantized_blocks(n, k, np.random.default_rng(0))).cuda()
    buf = randn(1, k + 1, dtype=torch.bfloat16, device="cuda")
    x = buf[:, 1:]
    assert x.data_ptr() % 4 == 2
    launch = _mod().Q6kMvLaunch if kernel == "q6k_mv" else q6k_idot.Q6kIdotLaunch
    plan = launch(n, k, torch.bfloat16, raw.device)
    assert torch.equal(plan(x, raw), plan(x.clone(), raw))
