"""MoE: routing, expert-grouped quantized matmuls (MLX affine and GGUF), fused gate/up,
weighted reduce; oracles are per-expert loops in fp64."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mlx_native as mn
from helpers import assert_error_bar, randn, row_strided, spy_plans
from mlx_native.ops.ggml import formats
from mlx_native.ops.quant import ref as qref
from test_ggml import crafted_blocks, gguf_values


# --------------------------------------------------------------------------- routing


def route_loop(logits, k, scoring, renormalize, bias=None):
    """One token at a time, in fp64: the oracle of moe_route."""
    ids, ws = [], []
    for row in logits.double().reshape(-1, logits.shape[-1]):
        p = torch.softmax(row, -1) if scoring == "softmax" else torch.sigmoid(row)
        sel = p + (bias.double() if bias is not None else 0)
        order = sorted(range(row.numel()), key=lambda e: (-sel[e].item(), e))[:k]
        w = p[order]
        if renormalize:
            w = w / w.sum()
        ids.append(order)
        ws.append(w)
    shape = (*logits.shape[:-1], k)
    return torch.tensor(ids).reshape(shape), torch.stack(ws).reshape(shape)


@pytest.mark.parametrize("e,k", [(128, 8), (256, 8), (60, 4), (8, 2), (5, 5)])
@pytest.mark.parametrize("scoring", ["softmax", "sigmoid"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_route(device, e, k, scoring, dtype):
    logits = randn(7, e, dtype=dtype, scale=3.0)
    ids, w = mn.moe_route(logits.to(device), k, scoring=scoring)
    assert ids.dtype == torch.int32 and w.dtype == torch.float32 and ids.shape == (7, k)
    want_ids, want_w = route_loop(logits, k, scoring, True)
    assert torch.equal(ids.cpu().long(), want_ids)
    assert_error_bar(w.cpu(), want_w, want_w.float())


@pytest.mark.parametrize("tokens", [3, 70])
def test_route_ties_rank_and_rounds(device, tokens):
    """Tied scores go to the lower expert id, for one program of a few rows and for several programs."""
    logits = torch.randint(-2, 3, (tokens, 32)).float()  # 5 distinct values over 32 experts: many ties
    ids, w = mn.moe_route(logits.to(device), 6)
    want_ids, want_w = route_loop(logits, 6, "softmax", True)
    assert torch.equal(ids.cpu().long(), want_ids)
    assert_error_bar(w.cpu(), want_w, want_w.float())


def test_route_no_renormalize_bias_and_batch_dims(device):
    logits = randn(2, 3, 64, scale=2.0)
    bias = randn(64, scale=0.5)
    ids, w = mn.moe_route(logits.to(device), 6, scoring="sigmoid", renormalize=False, selection_bias=bias.to(device))
    want_ids, want_w = route_loop(logits, 6, "sigmoid", False, bias)
    assert ids.shape == (2, 3, 6) and torch.equal(ids.cpu().long(), want_ids)
    assert_error_bar(w.cpu(), want_w, want_w.float())


@pytest.fixture
def router_plans(monkeypatch):
    """The moe_router plans built while the test runs (``fused``: one launch)."""
    from mlx_native.ops.moe import routing

    return spy_plans(monkeypatch, routing.RouterPlan)


@pytest.mark.parametrize("tokens, e, k, hidden, dtype, rdtype, scoring, biased, fused", [
    (1, 128, 8, 2048, torch.bfloat16, torch.bfloat16, "softmax", False, True),  # Qwen3-30B-A3B decode
    (3, 60, 4, 200, torch.float16, torch.float32, "sigmoid", True, True),  # odd E and hidden, fp32 router
    (1, 20, 4, 2100, torch.bfloat16, torch.bfloat16, "softmax", False, True),  # two feature steps, the last short
    (8, 256, 8, 96, torch.float32, torch.bfloat16, "softmax", False, True),  # the most rows of one group
    (21, 40, 6, 136, torch.bfloat16, torch.bfloat16, "softmax", True, True),  # three groups, the last of 5 rows
    (65, 24, 2, 64, torch.bfloat16, torch.float32, "softmax", False, False),  # more: fp32 matmul + route
])
def test_router(device, router_plans, tokens, e, k, hidden, dtype, rdtype, scoring, biased, fused):
    """moe_router routes x @ router.T: the experts route_loop chooses from fp64 logits, the weights within the
    error bar of routing the fp32 logits; x rows strided."""
    x, r = randn(tokens, hidden, dtype=dtype), randn(e, hidden, dtype=rdtype, scale=0.1)
    bias = randn(e, scale=0.2) if biased else None
    ids, w = mn.moe_router(row_strided(x, device), r.to(device), k, scoring=scoring,
                           selection_bias=bias.to(device) if biased else None)
    z64 = x.double() @ r.double().T
    want_ids, want_w = route_loop(z64, k, scoring, True, bias)
    assert [p.fused for p in router_plans] == [fused] and ids.shape == (tokens, k) and w.dtype == torch.float32
    assert torch.equal(ids.cpu().long(), want_ids)
    lowp = route_loop((x.float() @ r.float().T), k, scoring, True, bias)[1]
    assert_error_bar(w.cpu(), want_w, lowp.float())


def test_router_again_and_batch_dims(device, router_plans):
    """A second call of the fused launch (its counters, one per group of rows, set back to zero by the first) routes
    its own rows; leading dims ``[B, S]`` are tokens."""
    r = randn(32, 64, scale=0.3).to(device)
    for seed in (1, 2):
        torch.manual_seed(seed)
        x = randn(3, 7, 64)
        ids, w = mn.moe_router(x.to(device), r, 4)
        want_ids, want_w = route_loop(x.double() @ r.cpu().double().T, 4, "softmax", True)
        assert ids.shape == (3, 7, 4) and torch.equal(ids.cpu().long(), want_ids)
        assert_error_bar(w.cpu(), want_w, route_loop(x @ r.cpu().T, 4, "softmax", True)[1].float())
    assert [p.fused for p in router_plans] == [True]


def test_router_ties_and_empty(device):
    """Tied logits go to the lower expert id; no rows give empty results."""
    x = torch.zeros(2, 64)
    x[:, 0] = 1.0
    r = torch.randint(-1, 2, (24, 64)).float()  # logits in {-1, 0, 1}: many ties
    ids, _ = mn.moe_router(x.to(device), r.to(device), 5)
    assert torch.equal(ids.cpu().long(), route_loop(x @ r.T, 5, "softmax", True)[0])
    ids, w = mn.moe_router(torch.zeros(0, 64, device=device), r.to(device), 5)
    assert ids.shape == w.shape == (0, 5)


def test_router_reference_backend():
    x, r = randn(3, 48, dtype=torch.bfloat16), randn(10, 48, dtype=torch.bfloat16)
    with mn.use_backend("reference"):
        ids, w = mn.moe_router(x, r, 3)
    want_ids, want_w = route_loop(x.double() @ r.double().T, 3, "softmax", True)
    assert torch.equal(ids.long(), want_ids)
    assert_error_bar(w, want_w, want_w.float())


# --------------------------------------------------------------------------- expert matmuls


def experts_affine(e, n, k, gs=64, bits=4, dtype=torch.bfloat16):
    w = randn(e, n, k, dtype=dtype, scale=0.05)
    return mn.quantize(w, gs, bits)


def per_expert_loop(x_rows, ids, weights64):
    """fp64 oracle: group the rows by expert, one matmul per expert."""
    out = torch.zeros(x_rows.shape[0], weights64.shape[1], dtype=torch.float64)
    for e in range(weights64.shape[0]):
        sel = (ids == e).nonzero().flatten()
        if sel.numel():
            out[sel] = x_rows[sel].double() @ weights64[e].T
    return out


def _rows(x, t, k):
    return x.unsqueeze(1).expand(t, k, x.shape[-1]).reshape(t * k, -1) if x.dim() == 2 else x.reshape(t * k, -1)


def _lowp_rows(x_rows, ids, wdeq):
    return torch.einsum("rk,rnk->rn", x_rows.float(), wdeq[ids.long()].float()).to(x_rows.dtype)


def _routed_oracles(x, ids, g64, g_lowp, u64=None, u_lowp=None, act=F.silu):
    """``(fp64 oracle, same-dtype result)`` of routed rows ``x [T, K]`` (shared by a token's slots) or ``[T, k, K]``
    against experts ``g64`` / ``g_lowp`` (``[E, N, K]`` fp64 / x's dtype), with ``u64`` / ``u_lowp`` the up projection
    of an ``act(gate) * up`` pair; ``[T, top_k, N]`` each."""
    tokens, topk = ids.shape
    xr = _rows(x, tokens, topk)
    oracle = per_expert_loop(xr, ids.flatten(), g64)
    lowp = _lowp_rows(xr, ids.flatten(), g_lowp)
    if u64 is not None:
        oracle = act(oracle) * per_expert_loop(xr, ids.flatten(), u64)
        lowp = act(lowp) * _lowp_rows(xr, ids.flatten(), u_lowp)
    return oracle.reshape(tokens, topk, -1), lowp.reshape(tokens, topk, -1)


@pytest.mark.parametrize("tokens", [1, 3, 37])
@pytest.mark.parametrize("per_slot", [False, True])
def test_moe_qmm(device, tokens, per_slot):
    e, n, k, topk = 16, 48, 128, 4
    wq, s, b = experts_affine(e, n, k)
    x = randn(tokens, topk, k, dtype=torch.bfloat16) if per_slot else randn(tokens, k, dtype=torch.bfloat16)
    ids = torch.stack([torch.randperm(e)[:topk] for _ in range(tokens)]).to(torch.int32)
    out = mn.moe_qmm(x.to(device), ids.to(device), wq.to(device), s.to(device), b.to(device))
    assert out.shape == (tokens, topk, n) and out.dtype == x.dtype
    w64 = qref.dequantize(wq, s, b, 64, 4, dtype=torch.float64, compute=torch.float64)
    xr = _rows(x, tokens, topk)
    oracle = per_expert_loop(xr, ids.flatten(), w64).reshape(tokens, topk, n)
    lowp = _lowp_rows(xr, ids.flatten(), qref.dequantize(wq, s, b, 64, 4)).reshape(tokens, topk, n)
    assert_error_bar(out.cpu(), oracle, lowp)


def _strided_views(tokens, e, topk, device):
    """Expert ids and routing weights on ``device`` whose flattening is a strided view, not a copy: a column of a
    wider tensor (``top_k`` 1) or every other column of one token's row."""
    if tokens > 1:
        assert topk == 1
        ids, w = torch.randint(0, e, (tokens, 5), dtype=torch.int32), torch.rand(tokens, 5)
        return ids.to(device)[:, 2:3], w.to(device)[:, 1:2]
    ids, w = torch.randint(0, e, (1, 2 * topk), dtype=torch.int32), torch.rand(1, 2 * topk)
    return ids.to(device)[:, ::2], w.to(device)[:, 1::2]


@pytest.mark.parametrize("tokens,topk", [(3, 1), (1, 3)])
def test_strided_ids_and_weights(device, tokens, topk):
    """``moe_qmm`` / ``moe_ggml_matmul`` (routed rows, and the down projection mixing the slots) read strided ids and
    weights as their contiguous copies (a flattened view kept its stride and was read as contiguous)."""
    e, n, k = 6, 16, 256
    wq, s, b = (t.to(device) for t in experts_affine(e, n, k))
    raw = torch.from_numpy(crafted_blocks("Q8_0", e * n * k // 32, np.random.default_rng(0))).to(device)
    x, h = randn(tokens, k, dtype=torch.bfloat16).to(device), randn(tokens, topk, k, dtype=torch.bfloat16).to(device)
    ids, w = _strided_views(tokens, e, topk, device)
    assert not ids.reshape(-1).is_contiguous() and not w.reshape(-1).is_contiguous()
    for call in (lambda i, m: mn.moe_qmm(x, i, wq, s, b),
                 lambda i, m: mn.moe_qmm(h, i, wq, s, b, topk_weights=m),
                 lambda i, m: mn.moe_ggml_matmul(x, i, raw, "Q8_0", (e, n, k)),
                 lambda i, m: mn.moe_ggml_matmul(h, i, raw, "Q8_0", (e, n, k), topk_weights=m)):
        assert torch.equal(call(ids, w).cpu(), call(ids.contiguous(), w.contiguous()).cpu())


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("tokens", [2, 40])
def test_moe_qmm_fused_gate_up(device, activation, tokens):
    e, n, k, topk = 8, 40, 64, 2
    gq, gs_, gb = experts_affine(e, n, k, 32, 4)
    uq, us, ub = experts_affine(e, n, k, 32, 4)
    x = randn(tokens, k, dtype=torch.bfloat16)
    ids = torch.randint(0, e, (tokens, topk), dtype=torch.int64)
    out = mn.moe_qmm(x.to(device), ids.to(device), gq.to(device), gs_.to(device), gb.to(device), group_size=32,
                     w_up=uq.to(device), scales_up=us.to(device), biases_up=ub.to(device), activation=activation)
    xr = _rows(x, tokens, topk)
    g64 = per_expert_loop(xr, ids.flatten(), qref.dequantize(gq, gs_, gb, 32, 4, torch.float64, torch.float64))
    u64 = per_expert_loop(xr, ids.flatten(), qref.dequantize(uq, us, ub, 32, 4, torch.float64, torch.float64))
    act = F.silu if activation == "silu" else (lambda v: F.gelu(v, approximate="tanh"))
    oracle = (act(g64) * u64).reshape(tokens, topk, n)
    gl = _lowp_rows(xr, ids.flatten(), qref.dequantize(gq, gs_, gb, 32, 4))
    ul = _lowp_rows(xr, ids.flatten(), qref.dequantize(uq, us, ub, 32, 4))
    assert_error_bar(out.cpu(), oracle, (act(gl) * ul).reshape(tokens, topk, n))


@pytest.mark.parametrize("strided", ["gate", "up"])
def test_moe_qmm_gate_up_of_other_strides(device, strided):
    """The gate / up pair with one stack a row-strided view and the other contiguous: the routed kernel reads both
    with one set of strides, so the call passes contiguous copies (before: the view's rows were read with the other
    stack's strides, garbage out)."""
    e, n, k, topk, tokens = 4, 32, 128, 2, 3
    gq, gs_, gb = experts_affine(e, n, k)
    uq, us, ub = experts_affine(e, n, k)
    x = randn(tokens, k, dtype=torch.bfloat16)
    ids = torch.randint(0, e, (tokens, topk), dtype=torch.int32)
    gate, up = [gq, gs_, gb], [uq, us, ub]
    views = [row_strided(u, device) for u in (gate if strided == "gate" else up)]
    args = [u.to(device) for u in gate + up]
    if strided == "gate":
        args[0:3] = views
    else:
        args[3:6] = views
    out = mn.moe_qmm(x.to(device), ids.to(device), *args[:3], w_up=args[3], scales_up=args[4], biases_up=args[5])
    xr = _rows(x, tokens, topk)
    g64 = per_expert_loop(xr, ids.flatten(), qref.dequantize(gq, gs_, gb, 64, 4, torch.float64, torch.float64))
    u64 = per_expert_loop(xr, ids.flatten(), qref.dequantize(uq, us, ub, 64, 4, torch.float64, torch.float64))
    gl = _lowp_rows(xr, ids.flatten(), qref.dequantize(gq, gs_, gb, 64, 4))
    ul = _lowp_rows(xr, ids.flatten(), qref.dequantize(uq, us, ub, 64, 4))
    assert_error_bar(out.cpu(), (F.silu(g64) * u64).reshape(tokens, topk, n),
                     (F.silu(gl) * ul).reshape(tokens, topk, n))


@pytest.fixture
def moe_idot_plans(monkeypatch):
    """The routed integer-dot launches (ops/moe/idot.py) built while the test runs."""
    from mlx_native.ops.moe import idot

    return spy_plans(monkeypatch, idot.MoeIdotLaunch)


def _slot_oracles(x, ids, wq, s, b, gs, topk_weights=None):
    """(fp64 oracle, same-dtype PyTorch result) of moe_qmm, ``[T, top_k, N]`` or mixed ``[T, N]``."""
    t, k = ids.shape
    xr = _rows(x, t, k)
    oracle = per_expert_loop(xr, ids.flatten(), qref.dequantize(wq, s, b, gs, 4, torch.float64, torch.float64))
    lowp = _lowp_rows(xr, ids.flatten(), qref.dequantize(wq, s, b, gs, 4))
    oracle, lowp = oracle.reshape(t, k, -1), lowp.reshape(t, k, -1)
    if topk_weights is None:
        return oracle, lowp
    mix = topk_weights.double()[..., None]
    return (oracle * mix).sum(1), (lowp.float() * topk_weights[..., None]).sum(1).to(x.dtype)


@pytest.mark.parametrize("tokens, topk, n, k, gs, dtype, per_slot", [
    (1, 8, 24, 768, 64, torch.bfloat16, True),  # Qwen3-MoE's down K: a masked 1-warp step
    (3, 2, 37, 1024, 32, torch.float16, False),  # ragged row tile, x shared by a token's slots
    (2, 3, 16, 2048, 128, torch.bfloat16, True),  # one whole 2-warp step
    (1, 4, 8, 4096 + 512, 64, torch.float16, False),  # two 2-warp steps plus a masked one
])
def test_moe_qmm_routed_idot(device, moe_idot_plans, tokens, topk, n, k, gs, dtype, per_slot):
    """A few routed rows of 4-bit experts take the routed integer-dot mat-vec (ops/moe/idot.py): each slot's
    rows agree with the fp64 per-expert oracle within the error bar."""
    e = 10
    wq, s, b = experts_affine(e, n, k, gs, 4, dtype)
    x = randn(tokens, topk, k, dtype=dtype) if per_slot else randn(tokens, k, dtype=dtype)
    ids = torch.stack([torch.randperm(e)[:topk] for _ in range(tokens)]).to(torch.int32)
    out = mn.moe_qmm(x.to(device), ids.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs)
    assert len(moe_idot_plans) == 1 and out.shape == (tokens, topk, n) and out.dtype == dtype
    assert_error_bar(out.cpu(), *_slot_oracles(x, ids, wq, s, b, gs))


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_moe_qmm_routed_idot_gate_up(device, moe_idot_plans, activation):
    """The gate/up pair of routed experts in one integer-dot launch, the activation in its epilogue."""
    e, n, k, topk, tokens, gs = 5, 21, 1024, 3, 2, 64
    gq, gs_, gb = experts_affine(e, n, k, gs, 4)
    uq, us, ub = experts_affine(e, n, k, gs, 4)
    x = randn(tokens, k, dtype=torch.bfloat16)
    ids = torch.randint(0, e, (tokens, topk), dtype=torch.int64)
    out = mn.moe_qmm(x.to(device), ids.to(device), gq.to(device), gs_.to(device), gb.to(device), group_size=gs,
                     w_up=uq.to(device), scales_up=us.to(device), biases_up=ub.to(device), activation=activation)
    assert len(moe_idot_plans) == 1
    act = F.silu if activation == "silu" else (lambda v: F.gelu(v, approximate="tanh"))
    g64, gl = _slot_oracles(x, ids, gq, gs_, gb, gs)
    u64, ul = _slot_oracles(x, ids, uq, us, ub, gs)
    assert_error_bar(out.cpu(), act(g64) * u64, act(gl.float()) * ul.float())


@pytest.mark.parametrize("tokens, topk, n, k", [(1, 8, 20, 768), (3, 4, 16, 512)])
def test_moe_qmm_mixes_slots(device, moe_idot_plans, tokens, topk, n, k):
    """``topk_weights`` mixes the down projection's slots in the launch (one program sums a token's slots, x
    scaled by the routing weights): ``[T, N]`` within the error bar of the fp64 mix, deterministic."""
    e, gs = 9, 64
    wq, s, b = experts_affine(e, n, k, gs, 4)
    h = randn(tokens, topk, k, dtype=torch.bfloat16)
    ids, w = mn.moe_route(randn(tokens, e), topk)
    args = (h.to(device), ids.to(device), wq.to(device), s.to(device), b.to(device))
    out = mn.moe_qmm(*args, topk_weights=w.to(device))
    assert [p.mixes for p in moe_idot_plans] == [True] and out.shape == (tokens, n)
    assert_error_bar(out.cpu(), *_slot_oracles(h, ids, wq, s, b, gs, w))
    assert torch.equal(mn.moe_qmm(*args, topk_weights=w.to(device)).cpu(), out.cpu())


def test_moe_qmm_topk_weights_other_paths(device):
    """Paths that do not mix in the launch (8-bit experts, the reference backend) mix afterwards: the same
    result as moe_weighted_reduce of the unmixed slots."""
    e, n, k, topk, tokens = 4, 16, 128, 2, 3
    wq, s, b = [t.to(device) for t in experts_affine(e, n, k, 64, 8)]
    h = randn(tokens, topk, k, dtype=torch.bfloat16, device=device)
    ids, w = mn.moe_route(randn(tokens, e, device=device), topk)
    want = mn.moe_weighted_reduce(mn.moe_qmm(h, ids, wq, s, b, bits=8), w)
    assert torch.equal(mn.moe_qmm(h, ids, wq, s, b, bits=8, topk_weights=w), want)
    with mn.use_backend("reference"):
        ref_mix = mn.moe_qmm(h, ids, wq, s, b, bits=8, topk_weights=w)
        assert torch.equal(ref_mix, mn.moe_weighted_reduce(mn.moe_qmm(h, ids, wq, s, b, bits=8), w))


@pytest.mark.parametrize("n_rows, n_experts, bm", [(300, 7, 16), (2500, 128, 32), (40, 256, 64)])
def test_row_grouping(device, n_rows, n_experts, bm):
    """Routed rows sorted by expert into blocks (three launches, atomic slots): every row once, in a block of its
    expert (invalid ids in the last bucket's blocks), padding -1, blocks past the last in use marked
    ``n_experts + 1``; the counters re-armed, so a second call lays out the same blocks."""
    from mlx_native.ops.quant.grouping import RowGrouping

    g = torch.Generator().manual_seed(n_rows)
    erow = torch.randint(0, n_experts, (n_rows,), generator=g)
    erow[::13] = 3  # a hot expert
    erow[5::97] = n_experts + 4  # out of range
    erow[7::101] = -1
    grouping = RowGrouping(n_rows, n_experts, bm, device)
    for _ in range(2):
        rows, bexp, nblk = (u.cpu() for u in grouping(erow.to(device)))
        bucket = torch.where((erow >= 0) & (erow < n_experts), erow, n_experts)
        counts = torch.bincount(bucket, minlength=n_experts + 1)
        blocks = (counts + bm - 1) // bm
        assert nblk.item() == blocks.sum().item() and rows.numel() == grouping.max_blocks * bm
        assert torch.equal(bexp[: nblk.item()], torch.repeat_interleave(torch.arange(n_experts + 1), blocks).int())
        assert (bexp[nblk.item():] == n_experts + 1).all()
        table = rows.reshape(-1, bm)[: nblk.item()]
        real = table[table >= 0].long()
        assert torch.equal(real.sort().values, torch.arange(n_rows))
        assert torch.equal(bucket[table.clamp(min=0).long()][table >= 0],
                           bexp[: nblk.item()].long()[:, None].expand(-1, bm)[table >= 0])
        assert (rows.reshape(-1, bm)[nblk.item():] == -1).all()


@pytest.fixture
def grouped_plans(monkeypatch):
    """The expert-grouped tensor-core launches (ops/moe/grouped.py) built while the test runs."""
    from mlx_native.ops.moe import grouped

    return spy_plans(monkeypatch, grouped.GroupedLaunch)


def _skewed_ids(tokens, topk, e, hot, seed):
    """``[tokens, topk]`` distinct experts per token, expert ``hot`` in every token (more rows than a block holds)
    and experts ``e - 2``, ``e - 1`` in none."""
    g = torch.Generator().manual_seed(seed)
    rest = [torch.randperm(e - 3, generator=g)[: topk - 1] for _ in range(tokens)]
    rows = [torch.cat([torch.tensor([hot]), torch.where(r >= hot, r + 1, r)]) for r in rest]
    return torch.stack(rows).to(torch.int32)


@pytest.mark.parametrize("tokens, topk, e, n, k, gs, dtype, per_slot", [
    (70, 2, 6, 72, 256, 64, torch.bfloat16, False),  # 140 rows: blocks of 64 rows, a hot expert in every token
    (41, 2, 12, 40, 384, 32, torch.float16, True),  # 82 rows, blocks of 16, x one row per slot, a ragged tile
    (33, 3, 9, 64, 256, 128, torch.bfloat16, True),  # group size 128 (one group a 128-code step)
])
def test_moe_qmm_grouped(device, grouped_plans, tokens, topk, e, n, k, gs, dtype, per_slot):
    """Routed rows past the decode kernels (MoE prefill) run the expert-grouped tensor-core kernel: rows sorted by
    expert into blocks, one pass over an expert's weights per block; every slot within the error bar of the fp64
    per-expert oracle, experts with more rows than a block and experts with none included."""
    wq, s, b = experts_affine(e, n, k, gs, 4, dtype)
    x = randn(tokens, topk, k, dtype=dtype) if per_slot else randn(tokens, k, dtype=dtype)
    ids = _skewed_ids(tokens, topk, e, 1, tokens)
    out = mn.moe_qmm(x.to(device), ids.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs)
    assert len(grouped_plans) == 1 and out.shape == (tokens, topk, n) and out.dtype == dtype
    assert (ids == 1).sum() > grouped_plans[0].mp
    assert_error_bar(out.cpu(), *_slot_oracles(x, ids, wq, s, b, gs))
    mix = torch.rand(tokens, topk)
    mixed = mn.moe_qmm(x.to(device), ids.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs,
                       topk_weights=mix.to(device))
    assert_error_bar(mixed.cpu(), *_slot_oracles(x, ids, wq, s, b, gs, mix))


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_moe_qmm_grouped_gate_up(device, grouped_plans, activation):
    """The fused gate/up pair on the grouped kernel: both matrices over the same x steps, the activation in the
    epilogue (one rounding)."""
    e, n, k, topk, tokens, gs = 7, 48, 256, 2, 45, 64
    gq, gs_, gb = experts_affine(e, n, k, gs, 4)
    uq, us, ub = experts_affine(e, n, k, gs, 4)
    x = randn(tokens, k, dtype=torch.bfloat16)
    ids = _skewed_ids(tokens, topk, e, 4, 3)
    out = mn.moe_qmm(x.to(device), ids.to(device), gq.to(device), gs_.to(device), gb.to(device),
                     w_up=uq.to(device), scales_up=us.to(device), biases_up=ub.to(device), activation=activation)
    assert len(grouped_plans) == 1 and grouped_plans[0].launch.constexprs["HAS_UP"]
    act = F.silu if activation == "silu" else (lambda v: F.gelu(v, approximate="tanh"))
    f64 = dict(dtype=torch.float64, compute=torch.float64)
    assert_error_bar(out.cpu(), *_routed_oracles(
        x, ids, qref.dequantize(gq, gs_, gb, gs, 4, **f64), qref.dequantize(gq, gs_, gb, gs, 4),
        qref.dequantize(uq, us, ub, gs, 4, **f64), qref.dequantize(uq, us, ub, gs, 4), act=act))


@pytest.mark.parametrize("dtype, up", [(torch.bfloat16, False), (torch.float16, True)])
def test_moe_ggml_grouped_q4k(device, grouped_plans, dtype, up):
    """GGUF Q4_K experts (Qwen3-MoE Q4_K_M files) past the decode kernels take the grouped kernel too, with and
    without the fused gate/up pair."""
    rng = np.random.default_rng(11)
    e, n, k, topk, tokens = 5, 40, 512, 2, 30
    graw = crafted_blocks("Q4_K", e * n * k // 256, rng)
    uraw = crafted_blocks("Q4_K", e * n * k // 256, rng)
    x = randn(tokens, k, dtype=dtype)
    ids = _skewed_ids(tokens, topk, e, 0, 5)
    out = mn.moe_ggml_matmul(x.to(device), ids.to(device), torch.from_numpy(graw).to(device), "Q4_K", (e, n, k),
                             raw_up=torch.from_numpy(uraw).to(device) if up else None)
    assert len(grouped_plans) == 1
    g = torch.from_numpy(gguf_values(graw, "Q4_K", (e, n, k)))
    u = torch.from_numpy(gguf_values(uraw, "Q4_K", (e, n, k)))
    pair = (u.double(), u.to(dtype)) if up else ()
    assert_error_bar(out.cpu(), *_routed_oracles(x, ids, g.double(), g.to(dtype), *pair))


@pytest.fixture
def dequant_grouped_plans(monkeypatch):
    """The dequantized-chunk grouped launches (ops/moe/grouped.py) built while the test runs; one expert a chunk."""
    from mlx_native.ops.moe import grouped

    monkeypatch.setattr(grouped, "CHUNK_BYTES", 1)
    return spy_plans(monkeypatch, grouped.DequantGroupedLaunch)


@pytest.mark.parametrize("bits, gs, sdtype, up", [(8, 64, torch.bfloat16, False), (3, 32, torch.float16, True),
                                                  (4, 64, torch.float32, False)])
def test_moe_qmm_dequant_grouped(device, dequant_grouped_plans, bits, gs, sdtype, up):
    """MLX experts without the 4-bit grouped kernel (other bits, fp32 scales) past the decode kernels: dequantized a
    chunk of experts at a time (here one expert a chunk), the chunk's blocks on tensor cores."""
    e, n, k, topk, tokens = 5, 36, 192, 2, 40
    dt = torch.float16 if sdtype == torch.float16 else torch.bfloat16
    wq, s, b = mn.quantize(randn(e, n, k, dtype=sdtype, scale=0.05), gs, bits)
    uq, us, ub = mn.quantize(randn(e, n, k, dtype=sdtype, scale=0.05), gs, bits)
    x = randn(tokens, k, dtype=dt)
    ids = _skewed_ids(tokens, topk, e, 2, 9)
    kw = dict(w_up=uq.to(device), scales_up=us.to(device), biases_up=ub.to(device)) if up else {}
    out = mn.moe_qmm(x.to(device), ids.to(device), wq.to(device), s.to(device), b.to(device), group_size=gs,
                     bits=bits, **kw)
    assert len(dequant_grouped_plans) == 1 and dequant_grouped_plans[0].chunk == 1
    f64 = dict(dtype=torch.float64, compute=torch.float64)
    pair = (qref.dequantize(uq, us, ub, gs, bits, **f64), qref.dequantize(uq, us, ub, gs, bits, dt)) if up else ()
    assert_error_bar(out.cpu(), *_routed_oracles(x, ids, qref.dequantize(wq, s, b, gs, bits, **f64),
                                                 qref.dequantize(wq, s, b, gs, bits, dt), *pair))


@pytest.mark.parametrize("name, up", [("Q6_K", False), ("Q8_0", True), ("Q5_K", False)])
def test_moe_ggml_dequant_grouped(device, dequant_grouped_plans, name, up):
    """GGUF experts of the other types (the Q6_K down projection of Q4_K_M files) past the decode kernels:
    dequantized chunks of experts, their blocks on tensor cores, with and without the gate/up pair."""
    rng = np.random.default_rng(3)
    t = formats.BY_NAME[name]
    e, n, k, topk, tokens = 4, 24, 256, 2, 20
    graw = crafted_blocks(name, e * n * k // t.block_elems, rng)
    uraw = crafted_blocks(name, e * n * k // t.block_elems, rng)
    x = randn(tokens, topk, k, dtype=torch.bfloat16) if not up else randn(tokens, k, dtype=torch.bfloat16)
    ids = _skewed_ids(tokens, topk, e, 0, 4)
    out = mn.moe_ggml_matmul(x.to(device), ids.to(device), torch.from_numpy(graw).to(device), name, (e, n, k),
                             raw_up=torch.from_numpy(uraw).to(device) if up else None)
    assert len(dequant_grouped_plans) == 1
    g = torch.from_numpy(gguf_values(graw, name, (e, n, k)))
    u = torch.from_numpy(gguf_values(uraw, name, (e, n, k)))
    pair = (u.double(), u.to(torch.bfloat16)) if up else ()
    assert_error_bar(out.cpu(), *_routed_oracles(x, ids, g.double(), g.to(torch.bfloat16), *pair))


@pytest.mark.parametrize("name", ["Q4_0", "Q4_K", "Q8_0", "Q6_K", "Q5_0"])
@pytest.mark.parametrize("tokens", [1, 21])
def test_moe_ggml_matmul(device, name, tokens):
    rng = np.random.default_rng(tokens)
    t = formats.BY_NAME[name]
    e, n, k, topk = 10, 24, 256, 3
    raw = crafted_blocks(name, e * n * k // t.block_elems, rng)
    w = torch.from_numpy(gguf_values(raw, name, (e, n, k)))
    x = randn(tokens, k, dtype=torch.bfloat16)
    ids = torch.randint(0, e, (tokens, topk), dtype=torch.int32)
    out = mn.moe_ggml_matmul(x.to(device), ids.to(device), torch.from_numpy(raw).to(device), name, (e, n, k))
    xr = _rows(x, tokens, topk)
    oracle = per_expert_loop(xr, ids.flatten(), w.double()).reshape(tokens, topk, n)
    assert_error_bar(out.cpu(), oracle, _lowp_rows(xr, ids.flatten(), w.to(torch.bfloat16)).reshape(tokens, topk, n))


def test_moe_ggml_fused_gate_up(device):
    rng = np.random.default_rng(5)
    e, n, k, topk, tokens = 6, 32, 256, 2, 5
    graw = crafted_blocks("Q4_K", e * n, rng)
    uraw = crafted_blocks("Q4_K", e * n, rng)
    x = randn(tokens, k, dtype=torch.float16)
    ids = torch.randint(0, e, (tokens, topk), dtype=torch.int32)
    out = mn.moe_ggml_matmul(x.to(device), ids.to(device), torch.from_numpy(graw).to(device), "Q4_K", (e, n, k),
                             raw_up=torch.from_numpy(uraw).to(device))
    xr = _rows(x, tokens, topk)
    g = torch.from_numpy(gguf_values(graw, "Q4_K", (e, n, k)))
    u = torch.from_numpy(gguf_values(uraw, "Q4_K", (e, n, k)))
    oracle = F.silu(per_expert_loop(xr, ids.flatten(), g.double())) * per_expert_loop(xr, ids.flatten(), u.double())
    lowp = F.silu(_lowp_rows(xr, ids.flatten(), g.half())) * _lowp_rows(xr, ids.flatten(), u.half())
    assert_error_bar(out.cpu(), oracle.reshape(tokens, topk, n), lowp.reshape(tokens, topk, n))


@pytest.mark.parametrize("name, k, dtype, up, per_slot", [
    ("Q4_K", 768, torch.bfloat16, False, True),  # Qwen3-MoE's down projection: 3 super-blocks, a partial step only
    ("Q4_K", 2304, torch.float16, True, False),  # one whole step and a partial one (1 super-block), gate/up pair
    ("Q5_K", 2048, torch.bfloat16, True, False),  # one whole step
    ("Q5_K", 768, torch.float16, False, True),
    ("Q6_K", 768, torch.bfloat16, False, True),  # Q4_K_M files' Q6_K down projection: 1-super-block steps
    ("Q6_K", 2048, torch.float16, True, False),  # steps of 4 super-blocks, the gate/up pair
    ("Q6_K", 1280, torch.bfloat16, True, True),  # a step of 4 and a partial one of 1
    ("Q8_0", 768, torch.float16, False, True),  # steps of 4 block pairs
    ("Q8_0", 2048, torch.bfloat16, True, False),  # steps of 16 pairs, the gate/up pair
    ("Q8_0", 576, torch.bfloat16, True, True),  # a step of 8 pairs and a partial one of 1
])
def test_moe_ggml_decode_kernels(device, monkeypatch, name, k, dtype, up, per_slot):
    """A few routed rows (decode) on GGUF Q4_K / Q5_K experts take the routed integer-dot mat-vec
    (``ops/moe/gguf_idot.py``), on Q6_K / Q8_0 the routed streamed one (``ops/moe/gguf_mv.py``): every slot within the
    error bar of the fp64 per-expert oracle, rows of whole and partial steps, ragged row tiles, the gate/up pair with
    its activation, x shared by a token's slots or one row per slot; an expert id out of range gives that slot NaN,
    the others unchanged (the launch itself: ``moe_ggml_matmul`` refuses it on CPU tensors)."""
    from mlx_native.ops.moe import gguf_idot, gguf_mv

    streamed = name in ("Q6_K", "Q8_0")
    built = spy_plans(monkeypatch, gguf_mv.MoeGgufMvLaunch if streamed else gguf_idot.MoeGgmlIdotLaunch)
    rng = np.random.default_rng(k)
    t = formats.BY_NAME[name]
    e, n, topk, tokens = 7, 70 if name == "Q6_K" and k == 768 else 21, 3, 2
    graw = crafted_blocks(name, e * n * k // t.block_elems, rng)
    uraw = crafted_blocks(name, e * n * k // t.block_elems, rng)
    lead = (tokens, topk) if per_slot else (tokens,)
    x = randn(*lead, k, dtype=dtype, scale=0.01)  # crafted blocks' gate x up products would overflow fp16 at scale 1
    ids = torch.tensor([[4, 0, 6], [6, 2, 4]], dtype=torch.int32)
    gd, ud = torch.from_numpy(graw).to(device), torch.from_numpy(uraw).to(device) if up else None
    out = mn.moe_ggml_matmul(x.to(device), ids.to(device), gd, name, (e, n, k), raw_up=ud)
    c = built[0].launch.constexprs
    assert len(built) == 1 and c["HAS_UP"] == up and c.get("FMT", t.id) == t.id
    assert streamed or c["Q5K"] == (name == "Q5_K")
    assert out.shape == (tokens, topk, n) and out.dtype == dtype
    g = torch.from_numpy(gguf_values(graw, name, (e, n, k)))
    u = torch.from_numpy(gguf_values(uraw, name, (e, n, k)))
    pair = (u.double(), u.to(dtype)) if up else ()
    assert_error_bar(out.cpu(), *_routed_oracles(x, ids, g.double(), g.to(dtype), *pair))
    bad = ids.clone()
    bad[1, 2] = e
    out_bad = built[0](x.to(device).reshape(-1, k), bad.to(device).reshape(-1), gd, ud).cpu().view(tokens, topk, n)
    assert torch.isnan(out_bad[1, 2]).all()
    keep = torch.ones(tokens, topk, dtype=torch.bool)
    keep[1, 2] = False
    assert torch.equal(out_bad[keep], out.cpu()[keep])


@pytest.mark.parametrize("name, dtype, tokens, k", [
    ("Q4_K", torch.bfloat16, 2, 768), ("Q5_K", torch.float16, 1, 768), ("Q4_K", torch.float16, 1, 2304),
    ("Q6_K", torch.bfloat16, 2, 768), ("Q8_0", torch.float16, 3, 768),
])
def test_moe_ggml_decode_topk_weights(device, monkeypatch, name, dtype, tokens, k):
    """``topk_weights`` mixes the down projection's slots in the routed decode launch: Q4_K / Q5_K rows of one loop
    step in one program set per token (``gguf_idot.moe_q4k_mix_kernel``), other rows by arrival (``ops/moe/slots.py``:
    each slot stores its weighted fp32 partial, the last of a token's slots to arrive sums them). Within the error bar
    of the fp64 per-expert oracle mixed, the same bits on a second call (the counters rearm), an expert id out of range
    NaN in its own token's row only; the plain call unchanged."""
    from mlx_native.ops.moe import gguf_idot, gguf_mv

    streamed = name in ("Q6_K", "Q8_0")
    built = spy_plans(monkeypatch, gguf_mv.MoeGgufMvLaunch if streamed else gguf_idot.MoeGgmlIdotLaunch)
    rng = np.random.default_rng(tokens)
    t = formats.BY_NAME[name]
    e, n, topk = 7, 70, 3
    raw = crafted_blocks(name, e * n * k // t.block_elems, rng)
    x = randn(tokens, topk, k, dtype=dtype, scale=0.01)
    ids = torch.randint(0, e, (tokens, topk), dtype=torch.int32)
    w = torch.rand(tokens, topk)
    rd = torch.from_numpy(raw).to(device)
    args = (x.to(device), ids.to(device), rd, name, (e, n, k))
    mixed = mn.moe_ggml_matmul(*args, topk_weights=w.to(device))
    c = built[0].launch.constexprs
    by_token = not streamed and k <= 2048
    assert len(built) == 1 and c["TOPK"] == topk and (c["CHUNKS"] == k // 64 if by_token else c["MIX"])
    assert mixed.shape == (tokens, n) and mixed.dtype == dtype
    v = torch.from_numpy(gguf_values(raw, name, (e, n, k)))
    oracle, lowp = _routed_oracles(x, ids, v.double(), v.to(dtype))
    assert_error_bar(mixed.cpu(), (oracle * w.double()[..., None]).sum(1),
                     (lowp.float() * w[..., None]).sum(1).to(dtype))
    assert torch.equal(mn.moe_ggml_matmul(*args, topk_weights=w.to(device)).cpu(), mixed.cpu())
    plain = mn.moe_ggml_matmul(*args)
    assert plain.shape == (tokens, topk, n) and not built[-1].launch.constexprs["MIX"]
    bad = ids.clone()
    bad[0, 1] = e
    out_bad = built[0](x.to(device).reshape(-1, k), bad.to(device).reshape(-1), rd, None,
                       w.to(device).reshape(-1)).cpu()
    assert torch.isnan(out_bad[0]).all() and torch.equal(out_bad[1:], mixed.cpu()[1:])


def test_moe_ggml_streamed_mv_rules(monkeypatch):
    """The routed streamed mat-vec takes Q6_K experts of whole super-blocks and Q8_0 experts of rows ``q8_mv`` steps
    through, bf16 / fp16 x, 1-16 routed rows (from 17 the grouped kernels), under 2**31 bytes, in the one-row
    kernels' steps unsplit, in the swept tiles; ``MLX_NATIVE_GGUF_MV=0`` turns it off."""
    import dataclasses

    from mlx_native.ops.moe import gguf_mv
    from mlx_native.runtime import env

    q6k, q8, bf16 = formats.BY_NAME["Q6_K"].id, formats.BY_NAME["Q8_0"].id, torch.bfloat16
    for t in (q6k, q8):
        assert gguf_mv.supports(t, bf16, 768, 8, 10) and gguf_mv.supports(t, torch.float16, 2048, 16, 10)
        assert not gguf_mv.supports(t, bf16, 768, 17, 10) and not gguf_mv.supports(t, torch.float32, 768, 8, 10)
        assert not gguf_mv.supports(t, bf16, 768, 8, 2**31)
    assert not gguf_mv.supports(q6k, bf16, 640, 8, 10) and gguf_mv.supports(q8, bf16, 640, 8, 10)
    assert not gguf_mv.supports(q8, bf16, 608, 8, 10) and not gguf_mv.supports(q8, bf16, 128, 8, 10)
    for name in ("Q4_0", "Q4_K", "Q5_K"):
        assert not gguf_mv.supports(formats.BY_NAME[name].id, bf16, 768, 8, 10)
    for t, k, n, step, bn, warps, tail in (
            (q6k, 768, 2048, 1, 8, 2, 0), (q6k, 2048, 768, 4, 16, 4, 0), (q6k, 1536, 768, 2, 4, 2, 0),
            (q6k, 1280, 768, 4, 16, 4, 1), (q8, 768, 2048, 64, 16, 4, 0), (q8, 2048, 768, 256, 8, 4, 0),
            (q8, 576, 768, 128, 16, 4, 1)):
        launch = gguf_mv.MoeGgufMvLaunch(t, 8, n, k, 128, 8, bf16, torch.device("cpu")).launch
        c = launch.constexprs
        assert (c["FMT"], c["K"], c["STEP"], c["BN"], c["TAIL"], launch.options["num_warps"]) == (
            t, k, step, bn, tail, warps)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, gguf_mv=False))
    assert not gguf_mv.supports(q6k, bf16, 768, 8, 10) and not gguf_mv.supports(q8, bf16, 768, 8, 10)


@pytest.mark.parametrize("name, k, warps, bn", [("Q6_K", 2048, 2, 4), ("Q6_K", 768, 1, 16), ("Q8_0", 768, 1, 4),
                                               ("Q8_0", 2048, 2, 16)])
def test_moe_gguf_mv_knobs(device, name, k, warps, bn):
    """The routed streamed mat-vec's sweep knobs (warps, rows a program) change the tiling, not the rows' sums: the
    same result as the default tiles, ragged last tiles included."""
    from mlx_native.ops.moe import gguf_mv

    t, e, n, slots = formats.BY_NAME[name], 5, 40, 6
    raw = torch.from_numpy(crafted_blocks(name, e * n * k // t.block_elems, np.random.default_rng(k))).to(device)
    x = randn(slots, k, dtype=torch.bfloat16, scale=0.01).to(device)
    ids = torch.tensor([4, 0, 2, 2, 1, 3], dtype=torch.int32, device=device)
    dev = torch.device(device)
    ref = gguf_mv.MoeGgufMvLaunch(t.id, slots, n, k, e, 1, torch.bfloat16, dev)(x, ids, raw.reshape(-1))
    plan = gguf_mv.MoeGgufMvLaunch(t.id, slots, n, k, e, 1, torch.bfloat16, dev, warps=warps, bn=bn)
    assert plan.launch.constexprs["BN"] == bn and plan.launch.constexprs["EVEN_N"] == (n % bn == 0)
    out = plan(x, ids, raw.reshape(-1))
    torch.testing.assert_close(out.float().cpu(), ref.float().cpu(), rtol=1e-2, atol=1e-3 * ref.abs().max().item())


def test_moe_ggml_idot_rules(monkeypatch):
    """The routed integer-dot mat-vec takes Q4_K / Q5_K experts of whole super-blocks, bf16 / fp16 x, 1-16 routed rows
    (from 17 the grouped kernels), under 2**31 bytes; ``MLX_NATIVE_GGML_IDOT=0`` turns it off."""
    import dataclasses

    from mlx_native.ops.moe import gguf_idot
    from mlx_native.runtime import env

    q4k, q5k, bf16 = formats.BY_NAME["Q4_K"].id, formats.BY_NAME["Q5_K"].id, torch.bfloat16
    assert gguf_idot.supports(q4k, bf16, 768, 8, 10) and gguf_idot.supports(q5k, torch.float16, 2048, 16, 10)
    assert not gguf_idot.supports(q4k, bf16, 768, 17, 10) and not gguf_idot.supports(q4k, torch.float32, 768, 8, 10)
    assert not gguf_idot.supports(q4k, bf16, 640, 8, 10) and not gguf_idot.supports(q4k, bf16, 768, 8, 2**31)
    for name in ("Q4_0", "Q6_K", "Q8_0"):
        assert not gguf_idot.supports(formats.BY_NAME[name].id, bf16, 768, 8, 10)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, ggml_idot=False))
    assert not gguf_idot.supports(q4k, bf16, 768, 8, 10)


@pytest.mark.parametrize("k,top_k,warps", [(256, 2, 1), (256, 8, 1), (768, 8, 4), (2048, 8, 8)])
def test_moe_ggml_mix_launch_warps(k, top_k, warps):
    """The token-mixing down projection runs a warp per 32 chunk rows, and at least one (a small model's top-2 of
    rows of one super-block has 8 chunk rows: it launched with 0 warps, which Triton refuses)."""
    from mlx_native.ops.moe import gguf_idot

    launch = gguf_idot.MoeGgmlIdotLaunch(formats.BY_NAME["Q4_K"].id, top_k, 64, k, 4, 1, torch.bfloat16, "cpu",
                                         mix=True, top_k=top_k)
    assert launch.by_token and launch.launch.options["num_warps"] == warps


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_weighted_reduce(device, dtype):
    y = randn(5, 8, 100, dtype=dtype)
    w = torch.rand(5, 8)
    out = mn.moe_weighted_reduce(y.to(device), w.to(device))
    oracle = (y.double() * w.double()[..., None]).sum(1)
    assert_error_bar(out.cpu(), oracle, (y * w.to(dtype)[..., None]).sum(1))


def test_full_moe_layer_matches_gather_qmm(device):
    """route -> fused gate/up -> down (x per slot) -> reduce, against mn.gather_qmm (MLX semantics)."""
    e, hidden, inter, topk, tokens = 8, 64, 96, 2, 3
    gq, gs_, gb = experts_affine(e, inter, hidden)
    uq, us, ub = experts_affine(e, inter, hidden)
    dq, ds, db = experts_affine(e, hidden, inter, 32)
    x = randn(tokens, hidden, dtype=torch.float32)
    ids, w = mn.moe_route(randn(tokens, e).to(device), topk)
    dev = lambda *ts: [t.to(device) for t in ts]  # noqa: E731
    h = mn.moe_qmm(x.to(device), ids, *dev(gq, gs_, gb), w_up=uq.to(device), scales_up=us.to(device),
                   biases_up=ub.to(device))
    y = mn.moe_qmm(h, ids, *dev(dq, ds, db), group_size=32)
    out = mn.moe_weighted_reduce(y, w)
    with mn.use_backend("reference"):
        xi = x[:, None, None, :]
        g = mn.gather_qmm(xi, gq, gs_, gb, rhs_indices=ids.cpu())
        u = mn.gather_qmm(xi, uq, us, ub, rhs_indices=ids.cpu())
        hh = F.silu(g) * u
        yy = mn.gather_qmm(hh, dq, ds, db, rhs_indices=ids.cpu(), group_size=32)[:, :, 0]
        want = (yy * w.cpu()[..., None]).sum(1)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- moe_ffn (the whole step)


@pytest.fixture
def ffn_plans(monkeypatch):
    """The moe_ffn plans built while the test runs (``fused``: the chained launches)."""
    from mlx_native.ops.moe import kernel

    return spy_plans(monkeypatch, kernel.MoeFfnPlan)


def _act(name):
    return F.silu if name == "silu" else (lambda v: F.gelu(v, approximate="tanh"))


def ffn_oracles(x, logits, topk, gate, up, down, gs, activation="silu", scoring="softmax", renormalize=True,
                bias=None):
    """(fp64 oracle, same-dtype PyTorch result) of moe_ffn, ``[T, hidden]``: the routing of ``route_loop``,
    then per slot the gate/up pair, the activation, h in x's dtype (lowp) or fp64, down, and the mix."""
    ids, w = route_loop(logits, topk, scoring, renormalize, bias)
    act = _act(activation)
    g64, gl = _slot_oracles(x, ids, *gate, gs)
    u64, ul = _slot_oracles(x, ids, *up, gs)
    h64, hl = act(g64) * u64, (act(gl.float()) * ul.float()).to(x.dtype)
    oracle = _slot_oracles(h64, ids, *down, gs, w)[0]
    lowp = _slot_oracles(hl, ids, *down, gs, w.float())[1]
    return oracle, lowp


@pytest.mark.parametrize("tokens, e, topk, hidden, inter, gs, dtype, activation, scoring, renormalize, biased", [
    (1, 16, 8, 256, 64, 64, torch.bfloat16, "silu", "softmax", True, False),  # top-8, one token
    (2, 10, 4, 128, 64, 32, torch.float16, "gelu_tanh", "sigmoid", False, True),  # biased sigmoid choice
    (2, 60, 6, 64, 32, 32, torch.bfloat16, "silu", "sigmoid", True, False),  # E and top_k not powers of two
])
def test_moe_ffn_fused(device, ffn_plans, tokens, e, topk, hidden, inter, gs, dtype, activation, scoring,
                       renormalize, biased):
    """The fused step (route, gate/up, down with the mix) against the fp64 oracle of route -> gate/up -> down
    -> mix, within the error bar of the same math in x's dtype."""
    gate, up = experts_affine(e, inter, hidden, gs, 4, dtype), experts_affine(e, inter, hidden, gs, 4, dtype)
    down = experts_affine(e, hidden, inter, gs, 4, dtype)
    x = randn(tokens, hidden, dtype=dtype)
    logits = randn(tokens, e, scale=2.0)
    bias = randn(e, scale=0.3) if biased else None
    dev = lambda ts: tuple(t.to(device) for t in ts)  # noqa: E731
    out = mn.moe_ffn(x.to(device), logits.to(device), topk, dev(gate), dev(up), dev(down), group_size=gs,
                     activation=activation, scoring=scoring, renormalize=renormalize,
                     selection_bias=bias.to(device) if biased else None)
    assert [p.fused for p in ffn_plans] == [True] and out.shape == (tokens, hidden) and out.dtype == dtype
    assert_error_bar(out.cpu(), *ffn_oracles(x, logits, topk, gate, up, down, gs, activation, scoring, renormalize,
                                             bias))


def test_moe_ffn_fused_routes_ties_and_batch_dims(device, ffn_plans):
    """Tied logits go to the lower expert id; leading dims ``[B, S]`` are tokens."""
    e, topk, hidden, inter, gs = 12, 3, 64, 32, 32
    gate, up, down = (experts_affine(e, inter, hidden, gs), experts_affine(e, inter, hidden, gs),
                      experts_affine(e, hidden, inter, gs))
    x = randn(2, 2, hidden, dtype=torch.bfloat16)
    logits = torch.randint(-1, 2, (2, 2, e)).float()  # 3 values over 12 experts: many ties
    dev = lambda ts: tuple(t.to(device) for t in ts)  # noqa: E731
    out = mn.moe_ffn(x.to(device), logits.to(device), topk, dev(gate), dev(up), dev(down), group_size=gs)
    assert [p.fused for p in ffn_plans] == [True] and out.shape == (2, 2, hidden)
    oracle, lowp = ffn_oracles(x.reshape(4, hidden), logits.reshape(4, e), topk, gate, up, down, gs)
    assert_error_bar(out.cpu().reshape(4, hidden), oracle, lowp)


@pytest.mark.parametrize("bits, dtype", [(4, torch.float32), (8, torch.bfloat16)])
def test_moe_ffn_other_paths_run_the_three_ops(device, ffn_plans, bits, dtype):
    """Calls the fused launches do not take (fp32 x, 8-bit experts) run moe_route and the two moe_qmm calls:
    their result, bit for bit."""
    e, topk, hidden, inter = 6, 2, 64, 128
    gate, up, down = [tuple(t.to(device) for t in experts_affine(e, n, k, 64, bits))
                      for n, k in ((inter, hidden), (inter, hidden), (hidden, inter))]
    x, logits = randn(3, hidden, dtype=dtype).to(device), randn(3, e).to(device)
    ids, w = mn.moe_route(logits, topk)
    h = mn.moe_qmm(x, ids, *gate, bits=bits, w_up=up[0], scales_up=up[1], biases_up=up[2])
    want = mn.moe_qmm(h, ids, *down, bits=bits, topk_weights=w)
    out = mn.moe_ffn(x, logits, topk, gate, up, down, bits=bits)
    assert [p.fused for p in ffn_plans] == [False] and torch.equal(out.cpu(), want.cpu())


@pytest.mark.parametrize("dtype, fused", [(torch.bfloat16, True), (torch.float32, False)])
def test_moe_ffn_router_weight(device, ffn_plans, dtype, fused):
    """``router_weight`` instead of logits: the step routes ``x @ router.T`` (fp32) in its routing launch (the fused
    chain) or through moe_router (other calls): the oracle of the fp64 logits; the same bits as moe_router and the
    two moe_qmm calls."""
    from mlx_native.ops.moe.routing import RouterPlan

    e, topk, hidden, inter, gs = 24, 4, 128, 64, 32
    gate, up, down = (experts_affine(e, inter, hidden, gs, 4, dtype), experts_affine(e, inter, hidden, gs, 4, dtype),
                      experts_affine(e, hidden, inter, gs, 4, dtype))
    x, r = randn(3, hidden, dtype=dtype), randn(e, hidden, dtype=torch.bfloat16, scale=0.2)
    dev = lambda ts: tuple(t.to(device) for t in ts)  # noqa: E731
    xd, r_d = x.to(device), r.to(device)
    out = mn.moe_ffn(xd, None, topk, dev(gate), dev(up), dev(down), group_size=gs, router_weight=r_d)
    assert [p.fused for p in ffn_plans] == [fused]
    if fused:
        assert isinstance(ffn_plans[0].route, RouterPlan) and ffn_plans[0].route.fused
    assert_error_bar(out.cpu(), *ffn_oracles(x, x.double() @ r.double().T, topk, gate, up, down, gs))
    ids, w = mn.moe_router(xd, r_d, topk)
    h = mn.moe_qmm(xd, ids, *dev(gate), group_size=gs, w_up=up[0].to(device), scales_up=up[1].to(device),
                   biases_up=up[2].to(device))
    want = mn.moe_qmm(h, ids, *dev(down), group_size=gs, topk_weights=w)
    assert torch.equal(out.cpu(), want.cpu())


def test_moe_ffn_reference_backend():
    e, topk, hidden, inter = 5, 2, 64, 64
    gate, up, down = experts_affine(e, inter, hidden), experts_affine(e, inter, hidden), experts_affine(e, hidden, inter)
    x, logits = randn(2, hidden, dtype=torch.bfloat16), randn(2, e)
    with mn.use_backend("reference"):
        out = mn.moe_ffn(x, logits, topk, gate, up, down)
    assert_error_bar(out, *ffn_oracles(x, logits, topk, gate, up, down, 64))


# --------------------------------------------------------------------------- moe_ggml_ffn (the whole step, GGUF)


@pytest.fixture
def ggml_ffn_plans(monkeypatch):
    """The moe_ggml_ffn plans built while the test runs (``fused``: the chained launches)."""
    from mlx_native.ops.moe import kernel

    return spy_plans(monkeypatch, kernel.MoeGgmlFfnPlan)


def _ggml_experts(names, e, inter, hidden, rng):
    """Gate / up / down raw experts of the types ``names`` -> ``(raws, values)``: uint8 bytes and gguf.quants'
    float32 values ``[E, N, K]`` each."""
    raws, values = [], []
    for name, (n, k) in zip(names, ((inter, hidden), (inter, hidden), (hidden, inter))):
        raw = crafted_blocks(name, e * n * k // formats.BY_NAME[name].block_elems, rng)
        raws.append(torch.from_numpy(raw))
        values.append(torch.from_numpy(gguf_values(raw, name, (e, n, k))))
    return raws, values


def ggml_ffn_oracles(x, logits, topk, values, activation="silu", scoring="softmax", renormalize=True):
    """(fp64 oracle, same-dtype PyTorch result) of moe_ggml_ffn, ``[T, hidden]``: the routing of ``route_loop``, then
    per slot the gate/up pair, the activation, h in x's dtype (lowp) or fp64, down, and the mix."""
    ids, w = route_loop(logits, topk, scoring, renormalize)
    g, u, d = values
    act = _act(activation)
    g64, gl = _routed_oracles(x, ids, g.double(), g.to(x.dtype))
    u64, ul = _routed_oracles(x, ids, u.double(), u.to(x.dtype))
    h64, hl = act(g64) * u64, (act(gl.float()) * ul.float()).to(x.dtype)
    oracle = _routed_oracles(h64, ids, d.double(), d.double())[0]
    lowp = _routed_oracles(hl, ids, d.double(), d.to(x.dtype))[1]
    return (oracle * w.double()[..., None]).sum(1), (lowp.float() * w[..., None]).sum(1).to(x.dtype)


@pytest.mark.parametrize("types, tokens, e, topk, dtype, activation, same_bits", [
    (("Q8_0", "Q8_0", "Q8_0"), 2, 12, 3, torch.bfloat16, "silu", True),  # E and top_k not powers of two
    (("Q4_K", "Q4_K", "Q6_K"), 1, 6, 2, torch.float16, "gelu_tanh", False),  # Q4_K_M: a Q6_K down projection
])
def test_moe_ggml_ffn_fused(device, ggml_ffn_plans, types, tokens, e, topk, dtype, activation, same_bits):
    """The fused step (route, gate/up, down with the mix) on GGUF experts: within the error bar of the fp64 oracle of
    route -> gate/up -> down -> mix; ``same_bits``: bit for bit the three ops it chains (the same kernels), and again
    on a second call (the mixing counters rearm). (Interpreter-sized: the integer-dot kernels take ~0.2 s a program
    there; test_gpu_moe_ggml_ffn_qwen3_30b runs every routed format at Qwen3-30B-A3B's size.)"""
    rng = np.random.default_rng(e)
    hidden = inter = 256
    raws, values = _ggml_experts(types, e, inter, hidden, rng)
    x = randn(tokens, hidden, dtype=dtype, scale=0.05)
    logits = randn(tokens, e, scale=2.0)
    rg, ru, rd = (r.to(device) for r in raws)
    xd, zd = x.to(device), logits.to(device)
    out = mn.moe_ggml_ffn(xd, zd, topk, (rg, types[0]), (ru, types[1]), (rd, types[2]), activation=activation)
    assert [p.fused for p in ggml_ffn_plans] == [True] and out.shape == (tokens, hidden) and out.dtype == dtype
    assert_error_bar(out.cpu(), *ggml_ffn_oracles(x, logits, topk, values, activation))
    if not same_bits:
        return
    ids, w = mn.moe_route(zd, topk)
    h = mn.moe_ggml_matmul(xd, ids, rg, types[0], (e, inter, hidden), raw_up=ru, activation=activation)
    want = mn.moe_ggml_matmul(h, ids, rd, types[2], (e, hidden, inter), topk_weights=w)
    assert torch.equal(out.cpu(), want.cpu())
    again = mn.moe_ggml_ffn(xd, zd, topk, (rg, types[0]), (ru, types[1]), (rd, types[2]), activation=activation)
    assert torch.equal(again.cpu(), out.cpu())


def test_moe_ggml_ffn_router_weight(device, ggml_ffn_plans):
    """``router_weight``: the chained step routes ``x @ router.T`` in its first launch; bit for bit moe_router and
    the two ops it chains."""
    from mlx_native.ops.moe.routing import RouterPlan

    types, e, topk, hidden = ("Q8_0", "Q8_0", "Q8_0"), 12, 3, 256
    raws, values = _ggml_experts(types, e, hidden, hidden, np.random.default_rng(5))
    x, r = randn(2, hidden, dtype=torch.bfloat16, scale=0.05), randn(e, hidden, dtype=torch.bfloat16)
    rg, ru, rd = (t.to(device) for t in raws)
    xd, r_d = x.to(device), r.to(device)
    out = mn.moe_ggml_ffn(xd, None, topk, (rg, "Q8_0"), (ru, "Q8_0"), (rd, "Q8_0"), router_weight=r_d)
    plan, = ggml_ffn_plans
    assert plan.fused and isinstance(plan.route, RouterPlan) and plan.route.fused
    assert_error_bar(out.cpu(), *ggml_ffn_oracles(x, x.double() @ r.double().T, topk, values))
    ids, w = mn.moe_router(xd, r_d, topk)
    h = mn.moe_ggml_matmul(xd, ids, rg, "Q8_0", (e, hidden, hidden), raw_up=ru)
    assert torch.equal(out.cpu(), mn.moe_ggml_matmul(h, ids, rd, "Q8_0", (e, hidden, hidden), topk_weights=w).cpu())


@pytest.mark.parametrize("types, dtype", [
    (("Q8_0", "Q6_K", "Q8_0"), torch.bfloat16),  # gate and up of different types: two projections and the act
    (("Q4_0", "Q4_0", "Q8_0"), torch.bfloat16),  # no routed decode kernel for the gate/up pair
    (("Q8_0", "Q8_0", "Q8_0"), torch.float32),  # fp32 x
])
def test_moe_ggml_ffn_other_paths(device, ggml_ffn_plans, types, dtype):
    """Calls the fused launches do not take run moe_route and moe_ggml_matmul: within the error bar of the oracle."""
    rng = np.random.default_rng(3)
    e, topk, hidden, inter, tokens = 6, 2, 256, 256, 2
    raws, values = _ggml_experts(types, e, inter, hidden, rng)
    x, logits = randn(tokens, hidden, dtype=dtype, scale=0.05), randn(tokens, e)
    out = mn.moe_ggml_ffn(x.to(device), logits.to(device), topk, *((r.to(device), t) for r, t in zip(raws, types)))
    assert [p.fused for p in ggml_ffn_plans] == [False] and out.shape == (tokens, hidden) and out.dtype == dtype
    assert_error_bar(out.cpu(), *ggml_ffn_oracles(x, logits, topk, values))


def test_moe_ggml_ffn_batch_dims_and_reference_backend(device):
    """Leading dims ``[B, S]`` are tokens; the reference backend gives the same step within the error bar."""
    rng = np.random.default_rng(4)
    types, e, topk, hidden, inter = ("Q8_0", "Q8_0", "Q8_0"), 5, 2, 256, 256
    raws, values = _ggml_experts(types, e, inter, hidden, rng)
    x, logits = randn(2, 2, hidden, dtype=torch.bfloat16, scale=0.05), randn(2, 2, e)
    parts = [(r.to(device), t) for r, t in zip(raws, types)]
    out = mn.moe_ggml_ffn(x.to(device), logits.to(device), topk, *parts)
    with mn.use_backend("reference"):
        ref_out = mn.moe_ggml_ffn(x, logits, topk, *zip(raws, types))
    oracle, lowp = ggml_ffn_oracles(x.reshape(4, hidden), logits.reshape(4, e), topk, values)
    assert out.shape == ref_out.shape == (2, 2, hidden)
    assert_error_bar(out.cpu().reshape(4, hidden), oracle, lowp)
    assert_error_bar(ref_out.reshape(4, hidden), oracle, lowp)


# --------------------------------------------------------------------------- bad input


class TestBadInput:
    def test_expert_ids_out_of_range(self):
        wq, s, b = experts_affine(4, 8, 64)
        with pytest.raises(mn.InvalidArgumentError, match="moe_qmm: expert_ids holds 4, out of range for 4 experts"):
            mn.moe_qmm(torch.randn(2, 64), torch.tensor([[0, 4], [1, 2]]), wq, s, b)
        raw = torch.zeros(3 * 8 * 2 * 34, dtype=torch.uint8)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ggml_matmul: expert_ids holds -1"):
            mn.moe_ggml_matmul(torch.randn(1, 64), torch.tensor([[-1]]), raw, "Q8_0", (3, 8, 64))

    def test_shapes(self):
        wq, s, b = experts_affine(4, 8, 64)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_qmm: x has shape \(3, 64\); expected \[2, K\]"):
            mn.moe_qmm(torch.randn(3, 64), torch.zeros(2, 2, dtype=torch.int32), wq, s, b)
        with pytest.raises(mn.InvalidArgumentError, match="w_up, scales_up and biases_up must be given together"):
            mn.moe_qmm(torch.randn(2, 64), torch.zeros(2, 2, dtype=torch.int32), wq, s, b, w_up=wq)
        with pytest.raises(mn.InvalidArgumentError, match="activation must be one of silu, gelu_tanh"):
            mn.moe_qmm(torch.randn(2, 64), torch.zeros(2, 2, dtype=torch.int32), wq, s, b, w_up=wq, scales_up=s,
                       biases_up=b, activation="relu")
        with pytest.raises(mn.InvalidArgumentError, match="moe_qmm: topk_weights mixes the down projection's"):
            mn.moe_qmm(torch.randn(2, 64), torch.zeros(2, 2, dtype=torch.int32), wq, s, b, w_up=wq, scales_up=s,
                       biases_up=b, topk_weights=torch.rand(2, 2))
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_qmm: topk_weights has shape \(2, 3\), expected"):
            mn.moe_qmm(torch.randn(2, 64), torch.zeros(2, 2, dtype=torch.int32), wq, s, b,
                       topk_weights=torch.rand(2, 3))
        with pytest.raises(mn.UnsupportedDTypeError, match="moe_qmm: expert_ids has dtype float32"):
            mn.moe_qmm(torch.randn(2, 64), torch.zeros(2, 2), wq, s, b)
        raw = torch.zeros(3 * 8 * 2 * 34, dtype=torch.uint8)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ggml_matmul: topk_weights mixes the down projection's"
                                                          r" slots; it cannot be given with raw_up"):
            mn.moe_ggml_matmul(torch.randn(2, 64), torch.zeros(2, 2, dtype=torch.int32), raw, "Q8_0", (3, 8, 64),
                               raw_up=raw, topk_weights=torch.rand(2, 2))
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ggml_matmul: topk_weights has shape \(2, 3\)"):
            mn.moe_ggml_matmul(torch.randn(2, 64), torch.zeros(2, 2, dtype=torch.int32), raw, "Q8_0", (3, 8, 64),
                               topk_weights=torch.rand(2, 3))
        with pytest.raises(mn.FormatError, match="moe_ggml_matmul: raw holds 1 Q8_0 blocks"):
            mn.moe_ggml_matmul(torch.randn(1, 64), torch.zeros(1, 1, dtype=torch.int32),
                               torch.zeros(34, dtype=torch.uint8), "Q8_0", (3, 8, 64))

    def test_moe_ffn_args(self):
        e, hidden, inter = 4, 64, 32
        gate, up, down = experts_affine(e, inter, hidden, 32), experts_affine(e, inter, hidden, 32), \
            experts_affine(e, hidden, inter, 32)
        x, z = torch.randn(2, hidden), torch.randn(2, e)
        kw = dict(group_size=32)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: down must be a \(w, scales, biases\) triple"):
            mn.moe_ffn(x, z, 2, gate, up, down[:2], **kw)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: router_logits has shape \(3, 4\); expected"):
            mn.moe_ffn(x, torch.randn(3, e), 2, gate, up, down, **kw)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: top_k must be an int"):
            mn.moe_ffn(x, z, 5, gate, up, down, **kw)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ffn: give router_logits or router_weight, not both"):
            mn.moe_ffn(x, z, 2, gate, up, down, router_weight=torch.randn(e, hidden), **kw)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ffn: give router_logits or router_weight, not neither"):
            mn.moe_ffn(x, None, 2, gate, up, down, **kw)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: top_k must be an int in \[1, min\(n_experts, 64\)\]"
                                                          r" = \[1, 3\], got 4"):
            mn.moe_ffn(x, None, 4, gate, up, down, router_weight=torch.randn(3, hidden), **kw)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: gate must be \[experts=3, N"):
            mn.moe_ffn(x, None, 2, gate, up, down, router_weight=torch.randn(3, hidden), **kw)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: gate must be \[experts=5, N"):
            mn.moe_ffn(x, torch.randn(2, 5), 2, gate, up, down, **kw)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: down holds 64 x 64 matrices; expected 64 x 32"):
            mn.moe_ffn(x, z, 2, gate, up, experts_affine(e, hidden, 64, 32), **kw)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ffn: up: biases has shape"):
            mn.moe_ffn(x, z, 2, gate, (up[0], up[1], up[2][..., :1]), down, **kw)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ffn: activation must be one of"):
            mn.moe_ffn(x, z, 2, gate, up, down, activation="relu", **kw)

    def test_moe_ggml_ffn_args(self):
        e, hidden, inter = 4, 256, 256
        q4k = lambda n, k: torch.zeros(e * n * k // 256 * 144, dtype=torch.uint8)  # noqa: E731
        gate, up, down = (q4k(inter, hidden), "Q4_K"), (q4k(inter, hidden), "Q4_K"), (q4k(hidden, inter), "Q4_K")
        x, z = torch.randn(2, hidden), torch.randn(2, e)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ggml_ffn: down must be a \(raw, ggml_type\) pair"):
            mn.moe_ggml_ffn(x, z, 2, gate, up, down[:1])
        with pytest.raises(mn.UnsupportedError, match="moe_ggml_ffn: up: ggml_type 'Q9_K' is not supported"):
            mn.moe_ggml_ffn(x, z, 2, gate, (up[0], "Q9_K"), down)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ggml_ffn: router_logits has shape \(3, 4\)"):
            mn.moe_ggml_ffn(x, torch.randn(3, e), 2, gate, up, down)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ggml_ffn: gate rows of 200 values are not whole Q4_K"):
            mn.moe_ggml_ffn(torch.randn(2, 200), z, 2, gate, up, down)
        with pytest.raises(mn.FormatError, match="moe_ggml_ffn: gate has 147312 bytes, not 4 experts of whole Q4_K"):
            mn.moe_ggml_ffn(x, z, 2, (torch.zeros(147312, dtype=torch.uint8), "Q4_K"), up, down)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ggml_ffn: up holds 128 rows per expert, the gate 256"):
            mn.moe_ggml_ffn(x, z, 2, gate, (q4k(128, hidden), "Q4_K"), down)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ggml_ffn: down holds 512 rows of 256 values per "
                                                          r"expert; expected hidden = 256 \(from x\)"):
            mn.moe_ggml_ffn(x, z, 2, gate, up, (q4k(512, inter), "Q4_K"))
        with pytest.raises(mn.UnsupportedDTypeError, match="moe_ggml_ffn: gate has dtype float32"):
            mn.moe_ggml_ffn(x, z, 2, (gate[0].float(), "Q4_K"), up, down)
        with pytest.raises(mn.InvalidArgumentError, match="moe_ggml_ffn: activation must be one of"):
            mn.moe_ggml_ffn(x, z, 2, gate, up, down, activation="relu")
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_ggml_ffn: router_weight must be \[n_experts, "
                                                          r"hidden=256\] \(hidden from x\), got shape \(4, 128\)"):
            mn.moe_ggml_ffn(x, None, 2, gate, up, down, router_weight=torch.randn(e, 128))

    def test_router_args(self):
        x, r = torch.randn(2, 64, dtype=torch.bfloat16), torch.randn(8, 64)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_router: router_weight must be \[n_experts, hidden=64\]"
                                                          r" \(hidden from x\), got shape \(8, 32\)"):
            mn.moe_router(x, r[:, :32], 2)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_router: router_weight must be \[n_experts, hidden=64\]"):
            mn.moe_router(x, r[None], 2)
        with pytest.raises(mn.UnsupportedDTypeError, match="moe_router: router_weight has dtype int32"):
            mn.moe_router(x, r.int(), 2)
        with pytest.raises(mn.InvalidArgumentError, match="moe_router: router_weight must have a contiguous last dim"):
            mn.moe_router(x, torch.randn(64, 8).T, 2)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_router: top_k must be an int in \[1, min\(n_experts, "
                                                          r"64\)\] = \[1, 8\], got 9"):
            mn.moe_router(x, r, 9)
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_router: top_k must be an int"):
            mn.moe_router(x[:0], r, 0)  # checked for empty x too
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_router: selection_bias has shape \(7,\)"):
            mn.moe_router(x, r, 2, selection_bias=torch.randn(7))
        with pytest.raises(mn.InvalidArgumentError, match="moe_router: scoring must be one of softmax, sigmoid"):
            mn.moe_router(x, r, 2, scoring="relu")
        with pytest.raises(mn.UnsupportedDTypeError, match="moe_router: x has dtype int64"):
            mn.moe_router(torch.ones(2, 64, dtype=torch.int64), r, 2)
        if torch.cuda.is_available():
            with pytest.raises(mn.DeviceMismatchError, match="moe_router: router_weight is on cpu but x is on cuda"):
                mn.moe_router(x.cuda(), r, 2)

    def test_route_args(self):
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_route: top_k must be an int in \[1, min\(n_experts, 64\)\] = \[1, 8\], got 9"):
            mn.moe_route(torch.randn(2, 8), 9)
        with pytest.raises(mn.InvalidArgumentError, match="scoring must be one of softmax, sigmoid"):
            mn.moe_route(torch.randn(2, 8), 2, scoring="relu")
        with pytest.raises(mn.InvalidArgumentError, match=r"moe_weighted_reduce: weights has shape \(2, 3\)"):
            mn.moe_weighted_reduce(torch.randn(2, 4, 8), torch.rand(2, 3))


# --------------------------------------------------------------------------- GPU, real sizes


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 4, 300])
@pytest.mark.parametrize("e,hidden,inter", [(128, 2048, 768), (256, 2048, 512)])
def test_gpu_qwen_moe_shapes(tokens, e, hidden, inter):
    topk = 8
    gq, gs_, gb = [t.cuda() for t in experts_affine(e, inter, hidden)]
    uq, us, ub = [t.cuda() for t in experts_affine(e, inter, hidden)]
    dq, ds, db = [t.cuda() for t in experts_affine(e, hidden, inter)]
    x = randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
    ids, w = mn.moe_route(randn(tokens, e, device="cuda"), topk)
    h = mn.moe_qmm(x, ids, gq, gs_, gb, w_up=uq, scales_up=us, biases_up=ub)
    y = mn.moe_qmm(h, ids, dq, ds, db)
    out = mn.moe_weighted_reduce(y, w)
    with mn.use_backend("reference"):
        h_ref = mn.moe_qmm(x.double().float(), ids, gq, gs_, gb, w_up=uq, scales_up=us, biases_up=ub)
        y_ref = mn.moe_qmm(h.float(), ids, dq, ds, db)
    assert_error_bar(h, h_ref.double(), h_ref.to(torch.bfloat16), factor=2.0, atol=2e-2 * h_ref.abs().max().item())
    assert_error_bar(y, y_ref.double(), y_ref.to(torch.bfloat16), factor=2.0, atol=2e-2 * y_ref.abs().max().item())
    assert torch.isfinite(out).all()
    mixed = mn.moe_qmm(h, ids, dq, ds, db, topk_weights=w)  # the down projection and the mix in one launch
    want = (y_ref.double() * w.double()[..., None]).sum(1)
    assert_error_bar(mixed, want, out, factor=2.0, atol=2e-2 * want.abs().max().item())


@pytest.mark.gpu
def test_gpu_moe_idot_graph_replay_and_bad_ids(moe_idot_plans):
    """The Qwen3-30B-A3B decode FFN (route, gate/up, down + mix: three launches) replayed from a CUDA graph
    gives the eager bits every time; an expert id out of range gives NaN rows for that slot only (and NaN
    for its token once mixed)."""
    e, hidden, inter, topk = 128, 2048, 768, 8
    gq, gs_, gb = [t.cuda() for t in experts_affine(e, inter, hidden)]
    uq, us, ub = [t.cuda() for t in experts_affine(e, inter, hidden)]
    dq, ds, db = [t.cuda() for t in experts_affine(e, hidden, inter)]
    x = randn(1, hidden, dtype=torch.bfloat16, device="cuda")
    logits = randn(1, e, device="cuda")

    def ffn():
        ids, w = mn.moe_route(logits, topk)
        h = mn.moe_qmm(x, ids, gq, gs_, gb, w_up=uq, scales_up=us, biases_up=ub)
        return mn.moe_qmm(h, ids, dq, ds, db, topk_weights=w)

    eager = ffn()
    assert [p.mixes for p in moe_idot_plans] == [False, True]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ffn()
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)
    ids = torch.tensor([[3, 200, 7, 1, 0, 5, 9, 11]], dtype=torch.int32, device="cuda")
    h = mn.moe_qmm(x, ids, gq, gs_, gb, w_up=uq, scales_up=us, biases_up=ub)
    assert torch.isnan(h[0, 1]).all() and torch.isfinite(h[0, [0, 2, 3, 4, 5, 6, 7]]).all()
    h = h.nan_to_num()
    ok = mn.moe_qmm(h, ids.clamp(max=e - 1), dq, ds, db, topk_weights=torch.rand(1, topk, device="cuda"))
    assert torch.isfinite(ok).all()
    assert torch.isnan(mn.moe_qmm(h, ids, dq, ds, db, topk_weights=torch.rand(1, topk, device="cuda"))).all()


@pytest.mark.gpu
@pytest.mark.parametrize("tokens, e, hidden", [(1, 128, 2048), (4, 128, 2048), (8, 256, 2048), (3, 60, 4096),
                                              (37, 128, 2048)])
def test_gpu_router_real_sizes_and_graph(router_plans, tokens, e, hidden):
    """moe_router at Qwen3-MoE sizes (and a long row: two steps of the feature loop): the experts of the fp64
    logits, weights within the error bar; replayed from a CUDA graph on new rows, the eager bits each time (the
    counter rearms), and the step with ``router_weight`` the same through a graph."""
    r = randn(e, hidden, dtype=torch.bfloat16, device="cuda", scale=0.02)
    x = randn(tokens, hidden, dtype=torch.bfloat16, device="cuda", scale=4.0)
    ids, w = mn.moe_router(x, r, 8)
    assert [p.fused for p in router_plans] == [True]
    want_ids, want_w = route_loop((x.double() @ r.double().T).cpu(), 8, "softmax", True)
    assert torch.equal(ids.cpu().long(), want_ids)
    assert_error_bar(w.cpu(), want_w, route_loop((x.float() @ r.float().T).cpu(), 8, "softmax", True)[1].float())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_ids, g_w = mn.moe_router(x, r, 8)
    for seed in range(3):
        torch.manual_seed(seed)
        x.copy_(randn(tokens, hidden, dtype=torch.bfloat16, device="cuda", scale=4.0))
        graph.replay()
        e_ids, e_w = mn.moe_router(x, r, 8)
        assert torch.equal(g_ids, e_ids) and torch.equal(g_w, e_w)
        assert torch.equal(e_ids.cpu().long(), route_loop((x.double() @ r.double().T).cpu(), 8, "softmax", True)[0])


@pytest.mark.gpu
def test_gpu_moe_ffn_router_weight_graph(ffn_plans):
    """The Qwen3-30B-A3B decode step from the normed row (``router_weight``: router, routing, experts, mix in three
    chained launches) replayed from a CUDA graph gives the eager bits, within the bar of the fp64 oracle."""
    e, hidden, inter, topk = 128, 2048, 768, 8
    gate, up, down = (experts_affine(e, inter, hidden), experts_affine(e, inter, hidden),
                      experts_affine(e, hidden, inter))
    parts = [tuple(t.cuda() for t in p) for p in (gate, up, down)]
    x = randn(1, hidden, dtype=torch.bfloat16, scale=4.0)
    r = randn(e, hidden, dtype=torch.bfloat16, scale=0.02)
    xd, rd = x.cuda(), r.cuda()
    eager = mn.moe_ffn(xd, None, topk, *parts, router_weight=rd)
    assert [p.fused for p in ffn_plans] == [True] and ffn_plans[0].route.fused
    assert_error_bar(eager.cpu(), *ffn_oracles(x, x.double() @ r.double().T, topk, gate, up, down, 64))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mn.moe_ffn(xd, None, topk, *parts, router_weight=rd)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 64])
def test_gpu_moe_ggml_gemma_like(tokens):
    """Gemma-style MoE: 128 experts, top-8, GeGLU, hidden 2816, expert intermediate 704 (Q4_K / Q8_0)."""
    rng = np.random.default_rng(0)
    e, hidden, inter, topk = 128, 2816, 704, 8
    graw = torch.from_numpy(crafted_blocks("Q8_0", e * inter * hidden // 32, rng)).cuda()
    x = randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
    ids, w = mn.moe_route(randn(tokens, e, device="cuda"), topk)
    out = mn.moe_ggml_matmul(x, ids, graw, "Q8_0", (e, inter, hidden), raw_up=graw, activation="gelu_tanh")
    with mn.use_backend("reference"):
        want = mn.moe_ggml_matmul(x.float(), ids, graw, "Q8_0", (e, inter, hidden), raw_up=graw,
                                  activation="gelu_tanh")
    scale = want.abs().max().item()
    assert (out.float() - want).abs().max().item() <= 2e-2 * scale


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 8, 300])
def test_gpu_moe_ffn_qwen3_30b(ffn_plans, monkeypatch, tokens):
    """Qwen3-30B-A3B's FFN step (128 experts, top-8, hidden 2048, intermediate 768): the chained launches (1 and
    8 tokens; PDL on and off give the same bits, as does a CUDA graph replay) or the three ops (300 tokens),
    within the error bar of the reference (fp32 math, h in bf16) against fp32 throughout."""
    from mlx_native.runtime import env

    e, hidden, inter, topk = 128, 2048, 768, 8
    gate, up, down = [tuple(t.cuda() for t in experts_affine(e, n, k))
                      for n, k in ((inter, hidden), (inter, hidden), (hidden, inter))]
    x = randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
    logits = randn(tokens, e, device="cuda", scale=2.0)
    out = mn.moe_ffn(x, logits, topk, gate, up, down)
    assert [p.fused for p in ffn_plans] == [tokens * topk <= 64]
    with mn.use_backend("reference"):
        lowp = mn.moe_ffn(x, logits, topk, gate, up, down)
        oracle = mn.moe_ffn(x.float(), logits, topk, gate, up, down)
    assert_error_bar(out, oracle.double(), lowp, factor=2.0, atol=1e-2 * oracle.abs().max().item())
    if not ffn_plans[0].fused:
        return
    assert ffn_plans[0].glu.launch.pdl == ffn_plans[0].mix.launch.pdl == env.settings.pdl
    same_bits_replayed_and_pdl_flipped(monkeypatch, lambda: mn.moe_ffn(x, logits, topk, gate, up, down), out,
                                       ffn_plans, lambda p: p.mix.launch.pdl)


def same_bits_replayed_and_pdl_flipped(monkeypatch, step, out, built, pdl_of):
    """``step()`` (a chained MoE step whose first plan is ``built[0]``) gives ``out``'s bits in a CUDA graph replay and
    with ``MLX_NATIVE_PDL`` flipped (a new plan, whose last launch ``pdl_of(plan)`` says is a dependent or not)."""
    from mlx_native.runtime import env, plans

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed = step()
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(replayed, out)
    monkeypatch.setenv("MLX_NATIVE_PDL", "0" if env.settings.pdl else "1")
    env.reload_settings()
    try:
        plans.clear_all()
        assert torch.equal(step(), out)
        assert pdl_of(built[-1]) == env.settings.pdl != pdl_of(built[0])
    finally:
        monkeypatch.delenv("MLX_NATIVE_PDL")
        env.reload_settings()
        plans.clear_all()


@pytest.mark.gpu
@pytest.mark.parametrize("types", [("Q4_K", "Q4_K", "Q6_K"), ("Q5_K", "Q5_K", "Q4_K"), ("Q8_0", "Q8_0", "Q8_0")])
@pytest.mark.parametrize("tokens", [1, 2])
def test_gpu_moe_ggml_ffn_qwen3_30b(ggml_ffn_plans, monkeypatch, types, tokens):
    """Qwen3-30B-A3B's FFN step on GGUF experts (128 experts, top-8, hidden 2048, intermediate 768; Q4_K_M's Q6_K down
    projection among them): the chained launches give the bits of the three ops they chain, with PDL on and off and
    in a CUDA graph replay, within the error bar of the fp64 oracle."""
    from mlx_native.runtime import env

    rng = np.random.default_rng(tokens)
    e, hidden, inter, topk = 128, 2048, 768, 8
    raws, values = _ggml_experts(types, e, inter, hidden, rng)
    parts = [(r.cuda(), t) for r, t in zip(raws, types)]
    x = randn(tokens, hidden, dtype=torch.bfloat16, scale=0.05)
    logits = randn(tokens, e, scale=2.0)
    xd, zd = x.cuda(), logits.cuda()
    out = mn.moe_ggml_ffn(xd, zd, topk, *parts)
    plan = ggml_ffn_plans[0]
    assert [p.fused for p in ggml_ffn_plans] == [True]
    assert plan.glu.launch.pdl == plan.down.launch.pdl == env.settings.pdl
    assert_error_bar(out.cpu(), *ggml_ffn_oracles(x, logits, topk, values))
    ids, w = mn.moe_route(zd, topk)
    h = mn.moe_ggml_matmul(xd, ids, parts[0][0], types[0], (e, inter, hidden), raw_up=parts[1][0])
    assert torch.equal(mn.moe_ggml_matmul(h, ids, parts[2][0], types[2], (e, hidden, inter), topk_weights=w), out)
    same_bits_replayed_and_pdl_flipped(monkeypatch, lambda: mn.moe_ggml_ffn(xd, zd, topk, *parts), out,
                                       ggml_ffn_plans, lambda p: p.down.launch.pdl)
