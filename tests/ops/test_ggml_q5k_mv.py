"""The streamed one-row mat-vec for GGUF Q5_K weights (``ops/ggml/q4k_mv.py`` with ``Q5K``), called through its
launch plan ``Q5kMvLaunch`` directly (the routing of ``ggml_matmul`` is the lead's): ``gguf.quants`` dequantizes
the oracle weight, the fp64 product of x with it is the oracle, ``x @ w.to(dtype).T`` the error bar's baseline."""

import dataclasses

import numpy as np
import pytest
import torch

from helpers import assert_error_bar, randn
from mlx_native.ops.ggml import formats
from mlx_native.runtime.device import device_info
from test_ggml import crafted_blocks, force_split, oracle_weight, plan_output, rng_for, valid_blocks

Q5K = formats.BY_NAME["Q5_K"]
QH = slice(16, 48)  # the fifth bits of a block (byte l: values l + 32 j, bit j)


def _q5k_mv():
    from mlx_native.ops.ggml import q4k_mv

    return q4k_mv


def _run(device, raw: np.ndarray, n: int, k: int, dtype, x=None):
    """``(out, oracle, baseline, x, plan)`` of one row of x against the Q5_K rows ``raw``."""
    x = randn(1, k, dtype=dtype) if x is None else x
    plan = _q5k_mv().Q5kMvLaunch(n, k, dtype, torch.device(device))
    return (*plan_output(device, plan, raw, oracle_weight(raw, "Q5_K", (n, k)), x), x, plan)


@pytest.fixture
def forced_split(monkeypatch, request):
    """Split K over as many programs as there are steps (merged in the launch)."""
    force_split(monkeypatch, request, _q5k_mv(), "Q5K_PROGRAMS_PER_SM")


# steps of 1 / 1 / 4 blocks; 4 steps of 4 and a partial one of 1; 2 of 4 and one of 3
@pytest.mark.parametrize("n, k", [(16, 256), (19, 768), (72, 2048), (40, 4352), (23, 2816)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q5k_mv_error_bar(device, forced_split, n, k, dtype, request):
    """Random code bytes (all eight sub-block scale encodings, random fifth bits) with the usual scale range: one
    or several loop steps per row, rows not a multiple of the row tile, and a K split merged in the launch."""
    from test_quant import assert_merged_in_launch

    q4k_mv = _q5k_mv()
    raw = valid_blocks("Q5_K", n, k, rng_for(request))  # gguf cannot quantize Q5_K: crafted blocks
    out, oracle, baseline, _, plan = _run(device, raw, n, k, dtype)
    assert_error_bar(out, oracle, baseline, what=f"Q5_K mat-vec {n}x{k} {dtype}")
    bn = plan.launch.constexprs["BN"]
    assert plan.launch.constexprs["Q5K"] and plan.launch.constexprs["EVEN_N"] == (n % bn == 0)
    sms = device_info(torch.device(device)).sm_count
    wps, tail = q4k_mv.tiling(k, q4k_mv.Q5K_MAX_WPS, -(-n // bn), q4k_mv.Q5K_PROGRAMS_PER_SM * sms)
    assert plan.launch.constexprs["WPS"] == wps
    steps = k // 8 // wps
    assert plan.launch.constexprs["TAIL"] == tail and (steps > 1) == (plan.split > 1)
    if steps > 1:
        assert_merged_in_launch(plan)


def _fifth_bit_blocks(n_blocks: int, rng) -> np.ndarray:
    """Random blocks whose fifth-bit bytes run through every byte value at every position: byte ``l`` of block
    ``b`` is ``(l + 8 b + r) % 256`` (``r``: a random offset), so 32 consecutive blocks hold each value at each
    of the 32 positions; the nibbles stay random."""
    raw = crafted_blocks("Q5_K", n_blocks, rng).reshape(n_blocks, Q5K.block_bytes)
    r = int(rng.integers(0, 256))
    raw[:, QH] = ((np.arange(32)[None, :] + 8 * np.arange(n_blocks)[:, None] + r) % 256).astype(np.uint8)
    return raw.reshape(-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q5k_mv_fifth_bit_patterns(device, dtype, request):
    """Every fifth-bit byte at every position of the 32 (each of the 8 bits of a byte belongs to another
    chunk and nibble), and the same rows with all fifth bits clear and all set: each within the error bar,
    and the fifth bits move the result well beyond it (a kernel ignoring them fails)."""
    n, k = 16, 2048
    rng = rng_for(request)
    raw = _fifth_bit_blocks(n * k // 256, rng)
    x = randn(1, k, dtype=dtype)
    outs = []
    for fill in (None, 0x00, 0xFF):
        r = raw.copy().reshape(-1, Q5K.block_bytes)
        if fill is not None:
            r[:, QH] = fill
        out, oracle, baseline, _, _ = _run(device, r.reshape(-1), n, k, dtype, x)
        assert_error_bar(out, oracle, baseline, what=f"Q5_K fifth bits {fill} {dtype}")
        outs.append(out.double())
    scale = outs[0].abs().max().item()
    assert (outs[2] - outs[1]).abs().max().item() > 0.1 * scale
    assert (outs[0] - outs[1]).abs().max().item() > 0.1 * scale


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q5k_mv_scale_encodings(device, dtype, request):
    """Each of the 8 sub-blocks alone carries a large scale (6-bit 63, or a min) while the others are 0-1: a
    kernel that reads another sub-block's scale / min (the split 4 + 2 bit encodings of sub-blocks 4-7) fails."""
    n, k = 16, 256
    rng = rng_for(request)
    for sub in range(8):
        raw = crafted_blocks("Q5_K", n * k // 256, rng).reshape(n, Q5K.block_bytes)
        sc = np.full((n, 8), 1, np.uint8)
        mn = np.zeros((n, 8), np.uint8)
        sc[:, sub] = 63
        mn[: n // 2, sub] = 63  # half the rows: a large min as well
        packed = np.zeros((n, 12), np.uint8)  # get_scale_min_k4's packing
        packed[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
        packed[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
        packed[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
        raw[:, 4:16] = packed
        out, oracle, baseline, _, _ = _run(device, raw.reshape(-1), n, k, dtype)
        assert_error_bar(out, oracle, baseline, what=f"Q5_K sub-block {sub} {dtype}")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q5k_mv_extreme_scales(device, dtype, request):
    """d / dmin from fp16's extremes (65504, subnormals, +-0, +-inf, NaN): outputs are non-finite exactly where
    the oracle (rounded to the output dtype) is, and the finite rows stay within the error bar."""
    n, k = 64, 256  # one super-block a row: about 1 row in 5 stays finite in fp16, 1 in 2 in bf16
    raw = crafted_blocks("Q5_K", n * k // 256, rng_for(request), extreme=True)
    with np.errstate(invalid="ignore", over="ignore"):
        out, oracle, baseline, _, _ = _run(device, raw, n, k, dtype)
    finite = torch.isfinite(oracle.to(dtype))
    assert torch.equal(torch.isfinite(out), finite)
    ok = finite & torch.isfinite(baseline)
    assert 4 <= int(ok.sum()) < n, int(ok.sum())  # both kinds of rows are there
    assert_error_bar(out[ok], oracle[ok], baseline[ok], what=f"Q5_K extreme scales {dtype}")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q5k_mv_keeps_inf_and_nan_of_x(device, dtype, request):
    """Inf / NaN in x make every output non-finite, as in the oracle."""
    n, k = 16, 512
    raw = valid_blocks("Q5_K", n, k, rng_for(request))
    for bad in (float("inf"), float("-inf"), float("nan")):
        x = randn(1, k, dtype=dtype)
        x[0, 300] = bad
        out, oracle, _, _, _ = _run(device, raw, n, k, dtype, x)
        assert not torch.isfinite(oracle).any()
        assert not torch.isfinite(out).any(), bad


def test_q5k_mv_supports(monkeypatch):
    """One row of bf16/fp16 x against Q4_K or Q5_K rows of whole super-blocks below 2**31 bytes, 2 to ``ROWS_MAX``
    against Q5_K; not other types, more rows, fp32 x, partial super-blocks, or with ``MLX_NATIVE_GGUF_MV=0``."""
    from mlx_native.runtime import env

    q4k_mv = _q5k_mv()
    supports = q4k_mv.supports
    bf16 = torch.bfloat16
    assert q4k_mv.Q5K_ID == Q5K.id and q4k_mv.Q4K_ID == formats.BY_NAME["Q4_K"].id
    assert supports(Q5K.id, bf16, 1, 4096, 10) and supports(Q5K.id, torch.float16, 1, 256, 10)
    assert supports(q4k_mv.Q4K_ID, bf16, 1, 4096, 10)
    for name in ("Q4_0", "Q4_1", "Q8_0", "Q6_K", "Q5_0", "Q3_K"):
        assert not supports(formats.BY_NAME[name].id, bf16, 1, 4096, 10), name
    rows = q4k_mv.ROWS_MAX
    assert supports(Q5K.id, bf16, rows, 4096, 10) and not supports(Q5K.id, bf16, rows + 1, 4096, 10)
    assert not supports(q4k_mv.Q4K_ID, bf16, 2, 4096, 10)  # Q4_K rows: the integer-dot rows and tensor-core kernels
    assert not supports(Q5K.id, torch.float32, 1, 4096, 10)
    assert not supports(Q5K.id, bf16, 1, 4096 + 128, 10)
    assert supports(Q5K.id, bf16, 1, 4096, 2**31 - 1) and not supports(Q5K.id, bf16, 1, 4096, 2**31)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))
    assert not supports(Q5K.id, bf16, 1, 4096, 10)


def test_q5k_mv_step_rule():
    """Rows of at least Q5K_MAX_WPS nibble words (4 super-blocks) take steps of that many and a partial one of the
    super-blocks left (in chunks, 4 a super-block); shorter rows the most whole super-blocks that divide them."""
    q4k_mv = _q5k_mv()
    assert q4k_mv.Q5K_MAX_WPS == 128
    assert [q4k_mv.tiling(k, 128) for k in (4096, 14336, 11008, 5376, 4352, 1536, 1024)] == [
        (128, 0), (128, 0), (128, 12), (128, 4), (128, 4), (64, 0), (128, 0)]
    assert [q4k_mv.tiling(k, 128) for k in (768, 512, 256)] == [(32, 0), (64, 0), (32, 0)]
    # 2-super-block steps that split K into one-step programs (3 steps, 36 tiles for 132 programs) take a partial
    # one; unsplit they stay (session 26 run 2: 3584 x 18944 28.5 us against 32.1 with a partial step)
    assert q4k_mv.tiling(1536, 128, 36, 132) == (128, 8) and q4k_mv.tiling(3584, 128, 1184, 132) == (64, 0)


def test_q5k_mv_plan_constants(device):
    """The plan reads 44-word super-blocks and compiles the Q5_K variant; the Q4_K plan is unchanged."""
    q4k_mv = _q5k_mv()
    plan = q4k_mv.Q5kMvLaunch(32, 1024, torch.bfloat16, torch.device(device))
    c = plan.launch.constexprs
    assert c["Q5K"] and c["STRIDE_W"] == 4 * 44 and c["N_QS"] == 128 and c["WPS"] == 128
    assert c["BN"] == q4k_mv.Q5K_BN
    q4 = q4k_mv.Q4kMvLaunch(32, 1024, torch.bfloat16, torch.device(device)).launch.constexprs
    assert not q4["Q5K"] and q4["STRIDE_W"] == 4 * 36
