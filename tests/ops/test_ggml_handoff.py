"""The norm handoff on GGUF Q4_K / Q5_K / Q4_0 / Q4_1 rows (``ops/ggml/matmul_norm.py``, ``kernels/norm_handoff.py``):
an o / down projection's launch adds the residual and hands ``h * w`` and parts of ``sum(h^2)`` to the next projection's
launch, which applies ``1 / rms(h)`` to its result. Oracle: h as the two ops round it, then the norm and the consumer in
fp64 on gguf.quants' values; error bar of norm -> ggml_matmul in the same dtype."""

import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar, randn, spy_plans
from mlx_native.ops.ggml import matmul_norm, q4_idot, q4_mv, q4k_idot
from mlx_native.ops.quant import affine_mv
from test_ggml import gguf_values, raw_tensor, rng_for, valid_blocks

N, K = 2048, 2048  # the producer [N, K]; consumers are [n2, N] (Q4_K: rows of whole 2048-value steps)
N4 = 1024  # Q4_0 / Q4_1: [N4, N4] and [n2, N4] (rows of whole 1024-value steps)


LAUNCHES = {"Q4_K": q4k_idot.Q4kIdotLaunch, "Q5_K": q4k_idot.Q5kIdotLaunch, "Q4_0": q4_idot.Q4IdotLaunch,
            "Q4_1": q4_idot.Q4IdotLaunch}


@pytest.fixture
def few_programs(monkeypatch):
    """32-row tiles: fewer programs for the interpreter (64 parts of sum(h^2)); the two ops' matmul runs the
    producer's kernel without a K split, so it sums K in the producer's order (a split or another kernel may round
    differently)."""
    monkeypatch.setattr(q4k_idot, "IDOT_BN", 32)
    monkeypatch.setattr(q4k_idot, "BIG_BN", 32)
    monkeypatch.setattr(q4_idot, "Q4I_BN", 32)
    for module in (affine_mv, q4_idot, q4k_idot):  # the split, and the prefetch choice that follows it
        monkeypatch.setattr(module, "split_count", lambda steps, tiles, target: 1)


def _case(request, dtype, device, n2, consumer="Q4_K", producer="Q4_K", n=N, k=K):
    rng = rng_for(request)
    raw, raw2 = valid_blocks(producer, n, k, rng), valid_blocks(consumer, n2, n, rng)
    x, r = randn(1, k, dtype=dtype, device=device), randn(1, n, dtype=dtype, device=device)
    nw = (torch.rand(n) + 0.5).to(device)
    return x, raw, r, nw, raw2


@pytest.mark.parametrize("name,n2,dtype,offset", [("Q4_K", 40, torch.bfloat16, 0.0), ("Q4_0", 36, torch.float16, 1.0),
                                                  ("Q4_1", 24, torch.bfloat16, 0.0), ("Q5_K", 20, torch.float16, 1.0)])
def test_norm_handoff_equals_norm_then_matmul(device, monkeypatch, few_programs, request, name, n2, dtype, offset):
    """Producer: h exactly as ``add_rms_norm(ggml_matmul(...))`` gives it, parts summing to ``sum(h^2)``;
    consumer: within the error bar of the normed row's ``ggml_matmul`` in the same dtype against fp64."""
    eps = 1e-5
    n = k = K if name in ("Q4_K", "Q5_K") else N4
    x, raw, r, nw, raw2 = _case(request, dtype, device, n2, name, name, n, k)
    built = spy_plans(monkeypatch, LAUNCHES[name])
    hand = matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw_tensor(raw, device), name, (n, k), r, nw, eps,
                                                        weight_offset=offset)
    assert hand is not None and hand.parts.shape == (n // 32,)
    normed2, h2 = mn.add_rms_norm(mn.ggml_matmul(x, raw_tensor(raw, device), name, (n, k)), r, nw, eps,
                                  weight_offset=offset)
    assert torch.equal(hand.h, h2), "h = round(round(x W^T) + residual), as the two ops"
    torch.testing.assert_close(hand.parts.sum(), h2.float().pow(2).sum(), rtol=1e-5, atol=0)
    out = matmul_norm.handoff_ggml_matmul(hand, raw_tensor(raw2, device), name, (n2, n))
    assert [(p.launch.constexprs["NORM_OUT"], p.launch.constexprs["NORM_IN"]) for p in built] == [
        (True, False), (False, False), (False, True)], "producer, the check's matmul, the consumer"
    assert built[0].split == 1, "the producer's programs each own whole rows"
    w2 = torch.from_numpy(gguf_values(raw2, name, (n2, n))).double()
    h = h2.double().cpu()
    oracle = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * (nw.double().cpu() + offset) @ w2.T
    base = mn.ggml_matmul(normed2, raw_tensor(raw2, device), name, (n2, n))
    assert out.shape == (1, n2) and out.dtype == dtype
    assert_error_bar(out.cpu(), oracle, base.cpu(), what="handoff consumer")


def test_norm_handoff_consumer_that_cannot_take_it_gets_the_normed_row(device, few_programs, request):
    """A Q8_0 consumer (no integer-dot kernel with the handoff) runs ``ggml_matmul`` on ``hand.normed()``."""
    x, raw, r, nw, raw2 = _case(request, torch.bfloat16, device, 16, "Q8_0", "Q4_0", N4, N4)
    hand = matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw_tensor(raw, device), "Q4_0", (N4, N4), r, nw)
    out = matmul_norm.handoff_ggml_matmul(hand, raw_tensor(raw2, device), "Q8_0", (16, N4))
    assert torch.equal(out, mn.ggml_matmul(hand.normed(), raw_tensor(raw2, device), "Q8_0", (16, N4)))


def test_norm_handoff_not_for_other_types_or_rows(device, request):
    """Several rows of x, or a type without the integer-dot kernel: None (the caller runs the two ops)."""
    rng = rng_for(request)
    raw = raw_tensor(valid_blocks("Q4_K", 64, K, rng), device)
    raw8 = raw_tensor(valid_blocks("Q8_0", 64, K, rng), device)
    x2, r2 = randn(2, K, device=device), randn(2, 64, device=device)
    nw = torch.ones(64, device=device)
    assert matmul_norm.ggml_matmul_add_rms_norm_handoff(x2.bfloat16(), raw, "Q4_K", (64, K), r2.bfloat16(),
                                                        nw) is None
    assert matmul_norm.ggml_matmul_add_rms_norm_handoff(x2[:1].bfloat16(), raw8, "Q8_0", (64, K),
                                                        r2[:1].bfloat16(), nw) is None


def test_norm_handoff_not_where_the_word_level_kernel_serves(device, monkeypatch, request):
    """Q4_0 / Q4_1 matrices too small for the streamed kernels (``q4_mv.MIN_TILES_PER_SM`` row tiles a SM) run
    ``ggml_matmul``'s word-level kernel, and keep the norm launch: None."""
    monkeypatch.setattr(q4_mv, "MIN_TILES_PER_SM", 10**6)
    raw = raw_tensor(valid_blocks("Q4_0", 64, N4, rng_for(request)), device)
    x, r = randn(1, N4, dtype=torch.bfloat16, device=device), randn(1, 64, dtype=torch.bfloat16, device=device)
    assert matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw, "Q4_0", (64, N4), r, torch.ones(64, device=device)) \
        is None


def test_norm_handoff_bad_input(device, request):
    op = "ggml_matmul_add_rms_norm_handoff"
    raw = raw_tensor(valid_blocks("Q4_K", 64, K, rng_for(request)), device)
    x, r = randn(1, K, dtype=torch.bfloat16, device=device), randn(1, 64, dtype=torch.bfloat16, device=device)
    nw = torch.ones(64, device=device)
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: residual has shape"):
        matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw, "Q4_K", (64, K), r[:, :10], nw)
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: weight"):
        matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw, "Q4_K", (64, K), r, nw[:10])
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: eps"):
        matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw, "Q4_K", (64, K), r, nw, 0.0)
    with pytest.raises(mn.InvalidArgumentError, match=f"{op}: x has 1024 features"):
        matmul_norm.ggml_matmul_add_rms_norm_handoff(x[:, :1024], raw, "Q4_K", (64, K), r, nw)
    with pytest.raises(mn.FormatError, match=op):
        matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw[:-1], "Q4_K", (64, K), r, nw)
    hand = matmul_norm.NormHandoff(x, x, torch.ones(4, device=device), 1e-6)
    with pytest.raises(mn.InvalidArgumentError, match="handoff_ggml_matmul: x has 2048 features"):
        matmul_norm.handoff_ggml_matmul(hand, raw, "Q4_K", (32, 4096))


def _gated_oracle(x: torch.Tensor, w: torch.Tensor, activation: str) -> torch.Tensor:
    """fp64 ``act(x G^T) * (x U^T)`` of a stacked ``[2 I, K]`` weight."""
    y = x.double().cpu() @ w.T
    g, u = y.chunk(2, dim=-1)
    act = torch.nn.functional.silu(g) if activation == "silu" else torch.nn.functional.gelu(g, approximate="tanh")
    return act * u


@pytest.mark.parametrize("name,inter,dtype,activation", [("Q4_K", 37, torch.bfloat16, "silu"),
                                                         ("Q4_0", 36, torch.float16, "gelu_tanh"),
                                                         ("Q4_1", 21, torch.bfloat16, "silu"),
                                                         ("Q5_K", 19, torch.bfloat16, "gelu_tanh")])
def test_gated_matmul_in_one_launch(device, monkeypatch, few_programs, request, name, inter, dtype, activation):
    """``ggml_gated_matmul``: the stacked gate/up rows of a program's outputs in one launch (ragged last tile),
    within the error bar of ``ggml_matmul`` + the activation in the same dtype against fp64."""
    k = K if name in ("Q4_K", "Q5_K") else N4
    raw = valid_blocks(name, 2 * inter, k, rng_for(request))
    x = randn(1, k, dtype=dtype, device=device)
    built = spy_plans(monkeypatch, LAUNCHES[name])
    out = matmul_norm.ggml_gated_matmul(x, raw_tensor(raw, device), name, (2 * inter, k), activation)
    assert [(p.launch.constexprs["GLU"], p.n, p.split) for p in built] == [(True, inter, 1)]
    y = mn.ggml_matmul(x, raw_tensor(raw, device), name, (2 * inter, k))
    base = mn.silu_mul(y[:, :inter], y[:, inter:]) if activation == "silu" else mn.gelu_mul(y[:, :inter],
                                                                                             y[:, inter:])
    oracle = _gated_oracle(x, torch.from_numpy(gguf_values(raw, name, (2 * inter, k))).double(), activation)
    assert out.shape == (1, inter) and out.dtype == dtype
    assert_error_bar(out.cpu(), oracle, base.cpu(), what="gated matmul")


def test_gated_matmul_takes_the_norm_handoff(device, few_programs, request):
    """A handed-off norm into the stacked gate/up launch: ``act(normed G^T) * (normed U^T)`` with ``1 / rms`` applied
    to both before the activation; within the error bar of the three ops against fp64."""
    eps, inter = 1e-5, 20
    x, raw, r, nw, raw2 = _case(request, torch.bfloat16, device, 2 * inter, "Q4_0", "Q4_0", N4, N4)
    hand = matmul_norm.ggml_matmul_add_rms_norm_handoff(x, raw_tensor(raw, device), "Q4_0", (N4, N4), r, nw, eps)
    out = matmul_norm.handoff_ggml_matmul(hand, raw_tensor(raw2, device), "Q4_0", (2 * inter, N4), activation="silu")
    normed = hand.normed()
    y = mn.ggml_matmul(normed, raw_tensor(raw2, device), "Q4_0", (2 * inter, N4))
    base = mn.silu_mul(y[:, :inter], y[:, inter:])
    h = hand.h.double().cpu()
    normed64 = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * nw.double().cpu()
    oracle = _gated_oracle(normed64, torch.from_numpy(gguf_values(raw2, "Q4_0", (2 * inter, N4))).double(), "silu")
    assert out.shape == (1, inter)
    assert_error_bar(out.cpu(), oracle, base.cpu(), what="handoff into the gated matmul")


def test_gated_matmul_falls_back_and_rejects_bad_input(device, request):
    """Several rows of x, a type without the integer-dot kernel, or Q4_K rows of no whole number of integer-dot
    steps (one row of a plain matrix of them ends in a partial step; gate/up pairs do not): ``ggml_matmul`` + the
    activation, exactly; an unknown activation or an odd number of stacked rows: a typed error naming the op."""
    rng = rng_for(request)
    rawk = raw_tensor(valid_blocks("Q4_K", 12, 2304, rng), device)  # 9 super-blocks
    xk = randn(1, 2304, dtype=torch.bfloat16, device=device)
    yk = mn.ggml_matmul(xk, rawk, "Q4_K", (12, 2304))
    assert torch.equal(matmul_norm.ggml_gated_matmul(xk, rawk, "Q4_K", (12, 2304), "silu"),
                       mn.silu_mul(yk[:, :6], yk[:, 6:]))
    raw8 = raw_tensor(valid_blocks("Q8_0", 32, N4, rng), device)
    x = randn(3, N4, dtype=torch.bfloat16, device=device)
    y = mn.ggml_matmul(x, raw8, "Q8_0", (32, N4))
    out = matmul_norm.ggml_gated_matmul(x, raw8, "Q8_0", (32, N4), "gelu_tanh")
    assert torch.equal(out, mn.gelu_mul(y[:, :16], y[:, 16:], "tanh"))
    for bad in ("relu", None):
        with pytest.raises(mn.InvalidArgumentError, match="ggml_gated_matmul: activation"):
            matmul_norm.ggml_gated_matmul(x, raw8, "Q8_0", (32, N4), bad)
    raw = raw_tensor(valid_blocks("Q4_0", 31, N4, rng), device)
    with pytest.raises(mn.InvalidArgumentError, match="ggml_gated_matmul: a stacked gate/up matrix"):
        matmul_norm.ggml_gated_matmul(x[:1], raw, "Q4_0", (31, N4))
