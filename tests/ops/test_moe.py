"""MoE: routing, expert-grouped quantized matmuls (MLX affine and GGUF), fused gate/up,
weighted reduce; oracles are per-expert loops in fp64."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mlx_native as mn
from helpers import assert_error_bar, randn
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


def test_route_no_renormalize_bias_and_batch_dims(device):
    logits = randn(2, 3, 64, scale=2.0)
    bias = randn(64, scale=0.5)
    ids, w = mn.moe_route(logits.to(device), 6, scoring="sigmoid", renormalize=False, selection_bias=bias.to(device))
    want_ids, want_w = route_loop(logits, 6, "sigmoid", False, bias)
    assert ids.shape == (2, 3, 6) and torch.equal(ids.cpu().long(), want_ids)
    assert_error_bar(w.cpu(), want_w, want_w.float())


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
        with pytest.raises(mn.UnsupportedDTypeError, match="moe_qmm: expert_ids has dtype float32"):
            mn.moe_qmm(torch.randn(2, 64), torch.zeros(2, 2), wq, s, b)
        with pytest.raises(mn.FormatError, match="moe_ggml_matmul: raw holds 1 Q8_0 blocks"):
            mn.moe_ggml_matmul(torch.randn(1, 64), torch.zeros(1, 1, dtype=torch.int32),
                               torch.zeros(34, dtype=torch.uint8), "Q8_0", (3, 8, 64))

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
