"""The streamed one-row mat-vec for GGUF Q8_0 weights (``ops/ggml/q8_mv.py``), called through its launch plan
``Q8MvLaunch`` directly (the routing of ``ggml_matmul`` is the lead's): ``gguf.quants`` dequantizes the oracle
weight, the fp64 product of x with it is the oracle, ``x @ w.to(dtype).T`` the error bar's baseline."""

import dataclasses

import numpy as np
import pytest
import torch

from helpers import assert_error_bar, randn
from mlx_native.runtime.device import device_info
from test_ggml import EXTREME, check_plan, crafted_blocks, force_split, oracle_weight, raw_tensor, rng_for, valid_blocks

BLOCK_BYTES = 34


def _q8_mv():
    from mlx_native.ops.ggml import q8_mv

    return q8_mv


def _weight(raw: np.ndarray, n: int, k: int) -> torch.Tensor:
    return oracle_weight(raw, "Q8_0", (n, k))


_check = check_plan


@pytest.fixture
def split_everything(monkeypatch, request):
    """Ask for many programs per SM: K is split as far as the row's steps allow."""
    force_split(monkeypatch, request, _q8_mv())


@pytest.mark.parametrize("n, k", [
    (8, 256),  # one step of 4 pairs
    (19, 1024),  # one step of 16 pairs, rows not a multiple of the tile
    (37, 2048),  # two steps of 16 pairs, ragged
    (16, 1536),  # three steps of 8 pairs
    (5, 3072),  # three steps of 16 pairs, fewer rows than a tile
    (13, 2880),  # two steps of 16 pairs, then a partial one of 13 (in the last split)
    (9, 1088),  # one step of 16 pairs, then one of a single pair
    (11, 576),  # one step of 8 pairs, then one of a single pair (SmolLM2's head)
])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q8_mv_error_bar(device, split_everything, n, k, dtype, request):
    """Within the error bar of the fp64 oracle on gguf-quantized weights, K split as far as the steps allow and
    merged in the launch (every counter rearmed: a second call with new x on the same plan is right too)."""
    from test_quant import assert_merged_in_launch

    q8_mv = _q8_mv()
    raw = valid_blocks("Q8_0", n, k, rng_for(request))
    w = _weight(raw, n, k)
    plan = q8_mv.Q8MvLaunch(n, k, dtype, torch.device(device))
    ups, tail = q8_mv.tiling(k, n, device_info(torch.device(device)).sm_count)
    steps = k // 4 // ups
    assert plan.split == steps
    assert plan.launch.constexprs["EVEN_N"] == (n % q8_mv.Q8_BN == 0)
    assert plan.launch.constexprs["UPS"] == ups and plan.launch.constexprs["TAIL"] == tail
    for call in range(2):
        _check(device, plan, raw, w, randn(1, k, dtype=dtype), f"{n}x{k} {dtype} call {call}")
        if steps > 1:
            assert_merged_in_launch(plan)


@pytest.mark.parametrize("knobs", [
    dict(Q8_WPL=1),  # 16 lanes a pair, one code word each
    dict(Q8_FENCE=False),
    dict(Q8_BN=16, Q8_MAX_UPS=64),  # 16-row tiles, steps of 4 pairs
    dict(Q8_BN=4, Q8_MAX_UPS=128),
])
def test_q8_mv_tile_knobs(device, monkeypatch, knobs, request):
    """The module constants the H100 sweep varies (code words per lane, the fence, rows per tile, step size)
    all give results within the error bar, unsplit and split (ragged rows, several steps)."""
    q8_mv = _q8_mv()
    for name, value in knobs.items():
        monkeypatch.setattr(q8_mv, name, value)
    rng = rng_for(request)
    n, k, dtype = 21, 2048, torch.bfloat16
    raw = valid_blocks("Q8_0", n, k, rng)
    w = _weight(raw, n, k)
    for pps in (0, 64):  # no split / as far as the steps allow
        monkeypatch.setattr(q8_mv, "PROGRAMS_PER_SM", pps)
        plan = q8_mv.Q8MvLaunch(n, k, dtype, torch.device(device))
        c = plan.launch.constexprs
        assert (c["WPL"], c["FENCE"], c["BN"], c["UPS"]) == (q8_mv.Q8_WPL, q8_mv.Q8_FENCE, q8_mv.Q8_BN,
                                                              q8_mv.Q8_MAX_UPS)
        assert (plan.split > 1) == (pps == 64)
        _check(device, plan, raw, w, randn(1, k, dtype=dtype), f"{knobs} pps {pps} split {plan.split}")


def test_q8_mv_codes_and_lanes(device, request):
    """Every code position and sign reaches its own x: one row per (block, code) with a single code of -128, 127
    or -1 at that position (the others 0) against x = 1, 2, ... (exactly representable): each output is exact
    (the A-block lane whose word holds codes 30-31 takes codes 0-1 from the scale word, B blocks are aligned)."""
    q8_mv = _q8_mv()
    k = 256  # 8 blocks: 4 pairs, one step
    rows = []
    for blk in range(k // 32):
        for pos in range(32):
            raw = np.zeros((k // 32, BLOCK_BYTES), dtype=np.uint8)
            raw[:, :2] = np.array([0.5], dtype=np.float16).view(np.uint8)
            raw[blk, 2 + pos] = np.array([(-128, 127, -1)[(blk + pos) % 3]], dtype=np.int8).view(np.uint8)[0]
            rows.append(raw.reshape(-1))
    raw = np.concatenate(rows)
    n = len(rows)
    w = _weight(raw, n, k)
    x = torch.arange(1, k + 1, dtype=torch.float32).to(torch.bfloat16).view(1, k)  # 1..256: exact in bf16
    plan = q8_mv.Q8MvLaunch(n, k, torch.bfloat16, torch.device(device))
    out = plan(x.to(device), raw_tensor(raw, device)).cpu()
    expected = (x.double() @ w.double().T).to(torch.bfloat16)
    assert torch.equal(out, expected), (out - expected).abs().argmax()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q8_mv_extreme_scales(device, split_everything, dtype, request):
    """Block scales of +-65504, subnormals, +-0, +-inf and NaN (gguf_values' fp32 products): the outputs are
    non-finite exactly where the fp64 oracle's are, and the finite ones are within the error bar of fp32 math
    rounded to the output dtype (x scaled by 2**-16 so that the finite rows fit fp16)."""
    from test_quant import assert_merged_in_launch

    q8_mv = _q8_mv()
    rng = rng_for(request)
    n, k = 24, 2048  # two steps: K split in two
    raw = crafted_blocks("Q8_0", n * k // 32, rng, extreme=True).reshape(n, k // 32, BLOCK_BYTES)
    finite = EXTREME[np.isfinite(EXTREME)]
    raw[: n // 2, :, :2] = rng.choice(finite, (n // 2, k // 32)).astype(np.float16).view(np.uint8).reshape(
        n // 2, k // 32, 2)  # the first half of the rows: finite scales only
    raw = raw.reshape(-1)
    w = _weight(raw, n, k)
    x = (randn(1, k) * 2.0**-16).to(dtype)
    plan = q8_mv.Q8MvLaunch(n, k, dtype, torch.device(device))
    out = plan(x.to(device), raw_tensor(raw, device)).cpu()
    oracle = x.double() @ w.double().T
    ok = torch.isfinite(oracle)
    assert ok[0, : n // 2].all() and not ok[0, n // 2:].all()  # both kinds of rows are there
    assert torch.equal(torch.isfinite(out), ok)
    assert_error_bar(out, oracle, (x.float() @ w.T).to(dtype), what=f"extreme scales {dtype}")
    assert_merged_in_launch(plan)


def test_q8_mv_step_rule():
    """Rows of at least 16 pairs of blocks take 16-pair steps and a partial one of the pairs left where
    ``step_with_tail`` takes it; shorter rows the largest step they hold, at least 4 pairs; rows of odd blocks
    none."""
    q8_mv = _q8_mv()
    assert [q8_mv.tiling(k) for k in (4096, 14336, 3072, 11008, 5376, 2880, 1536, 1088)] == [
        (256, 0), (256, 0), (256, 0), (256, 12), (256, 4), (256, 13), (128, 0), (256, 1)]
    # 8-pair steps that split K into one-step programs take a partial one (session 26 run 2, 1536 x 576: 3.2 ->
    # 1.9 us), unsplit ones stay (3584 x 18944: 31.3 us against 35.2)
    assert q8_mv.tiling(1536, 576, 132) == (256, 8) and q8_mv.tiling(3584, 18944, 132) == (128, 0)
    # rows under 16 pairs: the largest step they hold (down to 4 pairs), then a partial one
    assert [q8_mv.tiling(k) for k in (256, 768, 512, 576, 320)] == [(64, 0), (64, 0), (128, 0), (128, 1), (64, 1)]
    assert [q8_mv.tiling(k) for k in (192, 64, 32, 100, 1056)] == [(0, 0)] * 5  # 6 / 2 / 1 / odd blocks


def test_q8_mv_supports(monkeypatch):
    """1 to ``ROWS_MAX`` rows of bf16/fp16 x (several at an even row stride) against Q8_0 rows of whole steps, raw
    under 2 GiB, ``settings.gguf_mv`` on; the row-tile threshold (``MIN_TILES_PER_SM``, 0: every matrix) when set."""
    from mlx_native.runtime import env

    q8_mv = _q8_mv()
    sms = 132
    bf = torch.bfloat16

    def ok(ggml_type=8, x_dtype=bf, m=1, n=4096, k=4096, raw_bytes=None, stride=4096):
        raw_bytes = n * k // 32 * BLOCK_BYTES if raw_bytes is None else raw_bytes
        return q8_mv.supports(ggml_type, x_dtype, m, n, k, raw_bytes, sms, stride)

    assert ok() and ok(x_dtype=torch.float16) and ok(n=1024) and ok(n=1, k=256) and ok(n=128256, k=4096)
    assert not ok(ggml_type=2) and not ok(ggml_type=12) and not ok(ggml_type=3)  # other types
    assert ok(m=2) and ok(m=q8_mv.ROWS_MAX, stride=4098) and not ok(m=q8_mv.ROWS_MAX + 1)  # more: the tiled kernel
    assert not ok(m=2, stride=4097) and ok(m=1, stride=4097)  # x is read in words (one row has no row stride)
    assert not ok(x_dtype=torch.float32)
    assert not ok(k=192) and not ok(k=1056) and ok(k=2880) and ok(k=576)  # no step; a partial last one
    assert not ok(raw_bytes=2**31) and ok(raw_bytes=2**31 - 1)
    monkeypatch.setattr(q8_mv, "MIN_TILES_PER_SM", 1)
    assert ok(n=q8_mv.Q8_BN * sms) and not ok(n=q8_mv.Q8_BN * (sms - 1))
    monkeypatch.setattr(q8_mv, "MIN_TILES_PER_SM", 0)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))
    assert not ok()
