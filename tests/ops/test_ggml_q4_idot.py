"""The integer-dot one-row mat-vec for GGUF Q4_0 / Q4_1 weights (``ops/ggml/q4_idot.py``), called through its
launch plan ``Q4IdotLaunch`` directly (the routing of ``ggml_matmul`` is the lead's): ``gguf.quants``
dequantizes the oracle weight, the fp64 product of x with it is the oracle, ``x @ w.to(dtype).T`` the error
bar's baseline."""

import dataclasses
import types

import numpy as np
import pytest
import torch

from helpers import X_RANGES, assert_error_bar, randn, x_of_range
from test_ggml import EXTREME, FP16_FIELDS, check_plan, crafted_blocks, oracle_weight, raw_tensor, rng_for, valid_blocks

IDS = {"Q4_0": 2, "Q4_1": 3}
BLOCK_BYTES = {"Q4_0": 18, "Q4_1": 20}


def _q4_idot():
    from mlx_native.ops.ggml import q4_idot

    return q4_idot


def _weight(raw: np.ndarray, name: str, n: int, k: int) -> torch.Tensor:
    return oracle_weight(raw, name, (n, k))


def _plan(device, name: str, n: int, k: int, dtype, **knobs):
    return _q4_idot().Q4IdotLaunch(IDS[name], n, k, dtype, torch.device(device), **knobs)


_check = check_plan


@pytest.fixture
def one_sm(monkeypatch):
    """One SM (whatever the CPU core count): K is split only when asked for (``programs_per_sm``)."""
    monkeypatch.setattr(_q4_idot(), "device_info", lambda device: types.SimpleNamespace(sm_count=1))


@pytest.mark.parametrize("n, k", [
    (8, 512),  # 8 pairs: one 1-warp step
    (19, 1024),  # one 2-warp step (16 pairs), rows not a multiple of the tile
    (37, 2048),  # one 4-warp step (32 pairs), ragged
    (5, 1536),  # 24 pairs: three 1-warp steps, fewer rows than a tile
    (16, 6144),  # three 4-warp steps (96 pairs)
    (13, 4096),  # one 8-warp step (64 pairs), ragged
    (6, 1600),  # 25 pairs: one 2-warp step (16) and a partial one (9)
    (11, 5376),  # 84 pairs: five 2-warp steps and a partial one (4), ragged
])
@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q4_idot_error_bar(device, monkeypatch, name, n, k, dtype, request):
    """Within the error bar of the fp64 oracle on gguf-quantized weights, K split as far as whole steps allow and
    merged in the launch (every counter rearmed: a second call with new x on the same plan is right too); a row of
    no whole number of steps ends in a partial one, unsplit."""
    from test_quant import assert_merged_in_launch

    q4_idot = _q4_idot()
    monkeypatch.setattr(q4_idot, "PROGRAMS_PER_SM", 64)
    raw = valid_blocks(name, n, k, rng_for(request))
    w = _weight(raw, name, n, k)
    plan = _plan(device, name, n, k, dtype)
    c = plan.launch.constexprs
    p_wpl, p_warps, tail = q4_idot.partial_tiling(k)
    wpl, warps = (p_wpl, p_warps) if p_wpl else q4_idot.tiling(k)
    steps = k // 64 // (4 * wpl * warps)
    assert (c["WPL"], c["G"], c["BN"], c["TAIL"]) == (q4_idot.Q4I_WPL, 4 * wpl * warps, q4_idot.Q4I_BN, tail)
    assert c["Q4_1"] == (name == "Q4_1") and c["EVEN_N"] == (n % c["BN"] == 0)
    assert plan.split == (1 if tail else steps)
    for call in range(2):
        _check(device, plan, raw, w, randn(1, k, dtype=dtype), f"{name} {n}x{k} {dtype} call {call}")
        if plan.split > 1:
            assert plan.split == steps and not c["PREFETCH"]  # one step per program
            assert_merged_in_launch(plan)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
@pytest.mark.parametrize("bn, warps, wpl, prefetch, fence, programs_per_sm", [
    (8, 2, 2, True, True, 1),  # the defaults, prefetch over 2 steps
    (4, 1, 1, True, False, 1),  # 8 lanes a pair, one code word each; no fence
    (16, 2, 4, True, True, 1),  # 2 lanes a pair (one a block), 16-row tiles
    (8, 1, 4, False, True, 1),  # no prefetch
    (4, 2, 1, False, False, 64),  # K split as far as the steps allow, no prefetch
    (16, 1, 2, True, True, 64),  # prefetch with one step per split: the step reloads itself
])
def test_q4_idot_knobs(device, one_sm, name, bn, warps, wpl, prefetch, fence, programs_per_sm, request):
    """The configurations a GPU sweep times: row tiles of 4-16, 1-2 warps, 1, 2 or 4 code words per lane and block,
    prefetch and fence on and off, K split or not; 21 rows (a ragged last tile) of 32 pairs of blocks."""
    from test_quant import assert_merged_in_launch

    n, k = 21, 2048
    raw = valid_blocks(name, n, k, rng_for(request))
    w = _weight(raw, name, n, k)
    plan = _plan(device, name, n, k, torch.bfloat16, bn=bn, warps=warps, wpl=wpl, prefetch=prefetch, fence=fence,
                 programs_per_sm=programs_per_sm)
    c = plan.launch.constexprs
    steps = k // 64 // (4 * wpl * warps)
    assert (c["BN"], c["WPL"], c["G"], c["PREFETCH"], c["FENCE"]) == (bn, wpl, 4 * wpl * warps, prefetch, fence)
    assert plan.split == (1 if programs_per_sm == 1 else steps)
    for call in range(2):
        _check(device, plan, raw, w, randn(1, k, dtype=torch.bfloat16), f"{name} {bn} {warps} {wpl} call {call}")
    if plan.split > 1:
        assert_merged_in_launch(plan)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
@pytest.mark.parametrize("wpl", [1, 2, 4])
def test_q4_idot_codes_and_lanes(device, one_sm, name, wpl, request):
    """Every code position of both blocks of a pair reaches its own x, whichever lane and code word holds it: one
    row per (block, position) with a single code away from the others (Q4_0: the others 8, i.e. 0; Q4_1: the
    others 0, with ``m = -0.25`` adding every x too) against x = 1, 2, ..., 1024 scaled by 1/4 (exact): the
    outputs are exact (Q4_0's A-block lane whose last code word holds bytes 14-15 takes bytes 0-1 from the scale
    word; B blocks and Q4_1 are aligned)."""
    k = 1024  # 16 pairs: one step of 1 / 2 / 4 code words per lane
    nb = k // 32
    rows = []
    off = BLOCK_BYTES[name] - 16  # the code bytes of a block
    neutral = 0x88 if name == "Q4_0" else 0  # codes of value 0 (Q4_1: m alone)
    for blk in (0, 1, 10, 11, nb - 2, nb - 1):  # both blocks of the first, a middle and the last pair
        for pos in range(32):
            raw = np.full((nb, BLOCK_BYTES[name]), neutral, dtype=np.uint8)
            raw[:, :2] = np.array([0.5], dtype=np.float16).view(np.uint8)
            if name == "Q4_1":
                raw[:, 2:4] = np.array([-0.25], dtype=np.float16).view(np.uint8)
            q = (15, 1, 0, 7)[(blk + pos) % 4] if name == "Q4_0" else (15, 1, 9)[(blk + pos) % 3]
            byte, shift = off + pos % 16, 4 * (pos // 16)
            raw[blk, byte] = (int(raw[blk, byte]) & (0xF0 >> shift)) | (q << shift)
            rows.append(raw.reshape(-1))
    raw = np.concatenate(rows)
    n = len(rows)
    w = _weight(raw, name, n, k)
    x = (torch.arange(1, k + 1, dtype=torch.float32) * 0.25).to(torch.bfloat16).view(1, k)  # exact in bf16
    plan = _plan(device, name, n, k, torch.bfloat16, wpl=wpl)
    assert plan.launch.constexprs["WPL"] == wpl
    out = plan(x.to(device), raw_tensor(raw, device)).cpu()
    expected = (x.double() @ w.double().T).to(torch.bfloat16)
    assert torch.equal(out, expected), (out.float() - expected.float()).abs().argmax()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("name, dtype", [("Q4_0", torch.bfloat16), ("Q4_0", torch.float16), ("Q4_1", torch.bfloat16),
                                         ("Q4_1", torch.float16)])
def test_q4_idot_extreme_scales(device, monkeypatch, name, dtype, request):
    """Scales from fp16's extremes (65504, subnormals, +-0, 1e-5, 3e4, +-inf, NaN): outputs are non-finite exactly
    where the oracle (rounded to the output dtype) is, and the finite ones stay within the error bar. Half the
    weight rows keep only finite extremes (with an fp16 result only the small ones: subnormals, 1e-5, +-0), so
    that both kinds of rows are there; K split in two (two 2-warp steps)."""
    from test_quant import assert_merged_in_launch

    q4_idot = _q4_idot()
    monkeypatch.setattr(q4_idot, "PROGRAMS_PER_SM", 64)
    n, k = 32, 2048
    rng = rng_for(request)
    raw = crafted_blocks(name, n * k // 32, rng, extreme=True).reshape(n, k // 32, BLOCK_BYTES[name])
    finite_vals = EXTREME[np.isfinite(EXTREME) & ((np.abs(EXTREME) < 1) | (dtype == torch.bfloat16))]
    for off in FP16_FIELDS[name]:
        vals = rng.choice(finite_vals, (n // 2, k // 32)).astype(np.float16)
        raw[: n // 2, :, off:off + 2] = vals.view(np.uint8).reshape(n // 2, k // 32, 2)
    raw = raw.reshape(-1)
    w = _weight(raw, name, n, k)
    x = randn(1, k, dtype=dtype)
    plan = _plan(device, name, n, k, dtype, warps=2)  # two steps
    out = plan(x.to(device), raw_tensor(raw, device)).cpu()
    oracle = x.double() @ w.double().T
    baseline = x @ w.to(dtype).T
    finite = torch.isfinite(oracle.to(dtype))
    assert torch.equal(torch.isfinite(out), finite)
    ok = finite & torch.isfinite(baseline)
    assert 4 <= int(ok.sum()) < n, int(ok.sum())
    assert not finite[:, n // 2:].all()
    assert_error_bar(out[ok], oracle[ok], baseline[ok], what=f"{name} extreme scales {dtype}")
    assert_merged_in_launch(plan)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in the interpreter's numpy
@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_q4_idot_keeps_inf_and_nan(device, name, dtype, request):
    """Inf / NaN in x reach the output through the lanes' float sums of x (the integers cannot carry them): the
    outputs are non-finite exactly where the fp64 oracle's are (everywhere), at a position of an A and of a B
    block (x values 30, 40, 70)."""
    n, k = 16, 1024
    raw = valid_blocks(name, n, k, rng_for(request))
    w = _weight(raw, name, n, k).double()
    plan = _plan(device, name, n, k, dtype)
    for pos in (30, 40, 70):  # block 0 (A, the spliced code word), 1 (B), 2 (A of the second pair)
        for bad in (float("inf"), float("-inf"), float("nan")):
            x = randn(1, k, dtype=dtype)
            x[0, pos] = bad
            out = plan(x.to(device), raw_tensor(raw, device)).cpu()
            oracle = x.double() @ w.T
            assert not torch.isfinite(oracle).any()
            assert torch.equal(torch.isfinite(out), torch.isfinite(oracle)), (pos, bad)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
@pytest.mark.parametrize("case", [*X_RANGES, "wide_values"])
def test_q4_idot_x_ranges(device, name, case, request):
    """x's int16 scale follows each lane's magnitude: a 1000x outlier now and then, values around 1e-30, all-zero
    blocks, blocks whose magnitudes span 2**-60..2**60, and values within a block spanning 2**-24..2**24 (the
    small ones lose their low bits against the large ones, within the bf16 error bar)."""
    n, k, dtype = 24, 2048, torch.bfloat16
    raw = valid_blocks(name, n, k, rng_for(request))
    w = _weight(raw, name, n, k)
    if case == "wide_values":
        x = randn(1, k, dtype=torch.float32) * torch.exp2(torch.randint(-24, 25, (1, k)).float())
    else:
        x = x_of_range(case, k, 32)
    x = x.to(dtype)
    plan = _plan(device, name, n, k, dtype)
    _check(device, plan, raw, w, x, f"{name} {case}")


def test_q4_idot_x_at_odd_element(device, request):
    """x is read as int32 words (pairs of values): a row of x that starts at an odd element of its buffer (2-byte
    aligned) reaches the kernel as a 4-byte aligned copy (on the GPU a misaligned word load faults; the
    interpreter would read it) and the result is right."""
    n, k, dtype = 16, 1024, torch.bfloat16
    raw = valid_blocks("Q4_0", n, k, rng_for(request))
    w = _weight(raw, "Q4_0", n, k)
    x = randn(1, k, dtype=dtype)
    buf = torch.zeros(1, k + 1, dtype=dtype, device=device)
    buf[:, 1:] = x.to(device)
    xv = buf[:, 1:]
    assert xv.data_ptr() % 4 == 2
    plan = _plan(device, "Q4_0", n, k, dtype)
    seen = []
    launch = plan.launch
    plan.launch = lambda *args: (seen.append(args[0].data_ptr()), launch(*args))[1]
    out = plan(xv, raw_tensor(raw, device)).cpu()
    assert len(seen) == 1 and seen[0] % 4 == 0
    assert_error_bar(out, x.double() @ w.double().T, x @ w.to(dtype).T, what="x at an odd element")


def test_q4_idot_plan_choices(device, one_sm):
    """The launch's defaults on one SM: the most warps, up to Q4I_MAX_WARPS, whose step divides the row; the split
    only below PROGRAMS_PER_SM programs per SM; register prefetch from PREFETCH_MIN_STEPS steps per program."""
    q4_idot = _q4_idot()
    bn = q4_idot.Q4I_BN
    bf = torch.bfloat16

    def choice(n, k, **knobs):
        plan = _plan(device, "Q4_0", n, k, bf, **knobs)
        c = plan.launch.constexprs
        return plan.launch.options["num_warps"], c["G"], plan.split, c["PREFETCH"]

    assert choice(8 * bn, 4096) == (8, 64, 1, False)  # the whole row in one step
    assert choice(6 * bn + 3, 6144) == (4, 32, 1, True)  # 96 pairs: 3 steps
    assert choice(6 * bn + 3, 1536) == (1, 8, 1, True)  # 24 pairs: 3 steps of one warp
    assert choice(6 * bn + 3, 1024) == (2, 16, 1, False)  # one step
    assert choice(8 * bn, 4096, warps=1) == (1, 8, 1, True)
    assert choice(8 * bn, 4096, warps=2) == (2, 16, 1, True)  # 4 steps
    assert choice(8 * bn, 4096, wpl=4, warps=4) == (4, 64, 1, False)
    assert choice(8 * bn, 4096, warps=2, programs_per_sm=32) == (2, 16, 4, False)  # 4 splits of one step
    assert choice(8 * bn, 4096, warps=2, programs_per_sm=16) == (2, 16, 2, True)  # 2 splits of 2 steps


def test_q4_idot_tiling():
    """Steps are ``4 wpl`` pairs of blocks of a row per warp, up to Q4I_MAX_WARPS warps; rows that take no step of
    the default code words per lane take fewer, and rows of no whole step of 4 pairs none."""
    q4_idot = _q4_idot()
    assert q4_idot.Q4I_WPL == 2 and q4_idot.Q4I_MAX_WARPS == 8
    assert q4_idot.tiling(4096) == (2, 8) and q4_idot.tiling(14336) == (2, 4)  # 64 / 224 pairs
    assert q4_idot.tiling(1536) == (2, 1)  # 24 pairs: 3 x 8
    assert q4_idot.tiling(11008) == (1, 1)  # 172 pairs = 43 x 4
    assert q4_idot.tiling(256) == (1, 1)
    assert q4_idot.tiling(4096, wpl=4) == (4, 4) and q4_idot.tiling(4096, wpl=4, warps=1) == (4, 1)
    assert q4_idot.tiling(1536, wpl=4) == (0, 0)  # no fallback for an explicit wpl
    assert q4_idot.partial_tiling(11008) == (2, 2, 12) and q4_idot.partial_tiling(1600) == (2, 2, 9)
    assert q4_idot.partial_tiling(4096) == (0, 0, 0) and q4_idot.partial_tiling(448) == (0, 0, 0)  # whole / < a step
    q40 = 2
    assert q4_idot.supports(q40, torch.bfloat16, torch.bfloat16, 1, 8, 2880, 10, 1)  # 45 pairs: a partial step
    assert not q4_idot.supports(q40, torch.bfloat16, torch.bfloat16, 1, 8, 2880, 10, 1, pairs=True)
    for k in (64, 128, 192, 320, 576, 2880, 4000, 100):  # 1 / 2 / 3 / 5 / 9 / 45 pairs, K % 64
        assert q4_idot.tiling(k) == (0, 0), k


def test_q4_idot_supports(monkeypatch):
    """One row of bf16/fp16 x with a bf16/fp16 result against Q4_0 / Q4_1 rows of at least one step, raw under
    2 GiB, ``settings.ggml_idot`` and ``settings.gguf_mv`` on."""
    from mlx_native.runtime import env

    q4_idot = _q4_idot()
    bf, fp = torch.bfloat16, torch.float16

    def ok(ggml_type=2, x_dtype=bf, out_dtype=bf, m=1, n=4096, k=4096, raw_bytes=None):
        raw_bytes = n * k // 32 * 18 if raw_bytes is None else raw_bytes
        return q4_idot.supports(ggml_type, x_dtype, out_dtype, m, n, k, raw_bytes, 132)

    assert ok() and ok(ggml_type=3) and ok(x_dtype=fp, out_dtype=fp) and ok(k=14336) and ok(k=11008) and ok(k=256)
    assert ok(n=1) and ok(n=128256)
    assert not ok(ggml_type=8) and not ok(ggml_type=12) and not ok(ggml_type=6)  # Q8_0, Q4_K, Q5_0
    assert not ok(m=2) and not ok(m=0)
    assert not ok(x_dtype=torch.float32) and not ok(out_dtype=torch.float32)
    assert ok(k=576)  # 9 pairs: one step and a partial one (the route still needs q4_mv's steps: word-level)
    assert not ok(k=320) and not ok(k=4000)  # 5 pairs: under one 2-word step, none of one word; K % 64
    assert not ok(raw_bytes=2**31) and ok(raw_bytes=2**31 - 1)
    for switch in ("ggml_idot", "gguf_mv"):
        monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, **{switch: False}))
        assert not ok() and not ok(ggml_type=3)
        monkeypatch.undo()
    assert ok()
    with pytest.raises(ValueError):  # 5 pairs: no step at all
        q4_idot.Q4IdotLaunch(2, 8, 320, bf, torch.device("cpu"))
