"""silu_mul / gelu_mul / sigmoid_mul / softcap / softmax: fp64 oracle, MLX softmax, strides, bad input."""

import mlx.core as mx
import pytest
import torch
import torch.nn.functional as F

import mlx_native as mn
from helpers import ALL_FLOAT, assert_agrees_with, assert_error_bar, from_mlx, mlx_array, randn

COLS = [1, 7, 63, 1000, 4097]

GATED = {
    "silu_mul": (lambda g, u: mn.silu_mul(g, u), lambda g, u: F.silu(g) * u),
    "gelu_tanh_mul": (lambda g, u: mn.gelu_mul(g, u, "tanh"), lambda g, u: F.gelu(g, approximate="tanh") * u),
    "gelu_erf_mul": (lambda g, u: mn.gelu_mul(g, u, approximate="none"), lambda g, u: F.gelu(g) * u),
    "sigmoid_mul": (lambda x, g: mn.sigmoid_mul(x, g), lambda x, g: x * torch.sigmoid(g)),
}


@pytest.mark.parametrize("name", list(GATED))
@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("cols", COLS)
def test_gated_error_bar(device, name, dtype, cols):
    ours_fn, torch_fn = GATED[name]
    a = randn(3, cols, dtype=dtype, device=device, scale=3.0)
    b = randn(3, cols, dtype=dtype, device=device)
    out = ours_fn(a, b)
    assert_error_bar(out, torch_fn(a.double(), b.double()), torch_fn(a, b), what=f"{name} {dtype} {cols}")


@pytest.mark.parametrize("name", list(GATED))
def test_gated_strided_halves_and_flat(device, name):
    ours_fn, torch_fn = GATED[name]
    fused = randn(5, 2, 3 * 129, dtype=torch.bfloat16, device=device)  # a fused gate|up projection
    g, u = fused[..., :129], fused[..., 129:258]
    out = ours_fn(g, u)
    assert out.is_contiguous() and out.shape == g.shape
    assert_error_bar(out, torch_fn(g.double(), u.double()), torch_fn(g, u))
    flat_a = randn(5001, dtype=torch.float16, device=device)
    flat_b = randn(5001, dtype=torch.float16, device=device)
    assert_error_bar(ours_fn(flat_a, flat_b), torch_fn(flat_a.double(), flat_b.double()), torch_fn(flat_a, flat_b))


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("cap", [1.0, 30.0])
def test_softcap(device, dtype, cap):
    x = randn(7, 1000, dtype=dtype, device=device, scale=40.0)
    x[0, :6] = torch.tensor([1e-6, -3e-4, 0.2, -0.26, 1e4, -1e4], dtype=dtype)  # tiny, near the 0.25 switch, huge
    out = mn.softcap(x, cap)
    assert_error_bar(out, cap * torch.tanh(x.double() / cap), cap * torch.tanh(x / cap))


def test_tanh_relative_accuracy_near_zero(device):
    x = torch.logspace(-8, 1, 2000, device=device)
    x = torch.cat([x, -x])
    out = mn.softcap(x, 1.0)
    rel = ((out.double() - torch.tanh(x.double())) / torch.tanh(x.double())).abs().max().item()
    assert rel < 4e-7  # a few fp32 ulps, also where 1 - exp(-2x) would cancel


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("cols", COLS + [20000])
def test_softmax_error_bar(device, dtype, cols):
    x = randn(3, cols, dtype=dtype, device=device, scale=4.0)
    out = mn.softmax(x)
    assert_error_bar(out, torch.softmax(x.double(), -1), torch.softmax(x, -1), what=f"softmax {dtype} {cols}")


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_mlx(device, dtype, axis):
    x = randn(6, 37, 11, dtype=dtype, device=device, scale=3.0)
    ours = mn.softmax(x, axis)
    theirs = from_mlx(mx.softmax(mlx_array(x), axis=axis, precise=True))
    assert_agrees_with(ours, theirs, torch.softmax(x.double(), axis), what=f"softmax axis {axis}")


@pytest.mark.parametrize("shape", [(1, 5000), (2, 9000), (1, 151936)])
def test_softmax_few_long_rows_split_over_programs(device, shape):
    x = randn(*shape, dtype=torch.bfloat16, device=device, scale=4.0)
    x[0, : shape[1] // 2] = float("-inf")  # whole chunks of -inf in the split path
    out = mn.softmax(x)
    assert_error_bar(out, torch.softmax(x.double(), -1), torch.softmax(x, -1))


def test_softmax_masked_rows(device):
    x = randn(4, 3000, device=device)
    x[1, :2900] = float("-inf")
    x[2] = float("-inf")
    out = mn.softmax(x)
    expected = torch.softmax(x.double(), -1)
    torch.testing.assert_close(out[[0, 1, 3]].double(), expected[[0, 1, 3]], rtol=1e-5, atol=1e-7)
    assert torch.isnan(out[2]).all()  # all -inf: NaN, like PyTorch and MLX
    big = randn(2, 20000, device=device)
    big[0, :17000] = float("-inf")  # the first chunks of the long-row path see only -inf
    torch.testing.assert_close(mn.softmax(big).double(), torch.softmax(big.double(), -1), rtol=1e-5, atol=1e-8)


def test_reference_backend(device):
    g, u = randn(4, 100, device=device), randn(4, 100, device=device)
    with mn.use_backend("reference"):
        expected = [mn.silu_mul(g, u), mn.softmax(g), mn.softcap(g, 2.0)]
    got = [mn.silu_mul(g, u), mn.softmax(g), mn.softcap(g, 2.0)]
    for e, o in zip(expected, got):
        torch.testing.assert_close(o, e, rtol=2e-6, atol=2e-6)


class TestBadInput:
    def test_shapes_dtypes_devices(self):
        with pytest.raises(mn.InvalidArgumentError, match="silu_mul: up has shape"):
            mn.silu_mul(torch.ones(2, 4), torch.ones(2, 5))
        with pytest.raises(mn.UnsupportedDTypeError, match="gelu_mul: up has dtype float16 but gate has float32"):
            mn.gelu_mul(torch.ones(2, 4), torch.ones(2, 4, dtype=torch.float16))
        with pytest.raises(mn.DeviceMismatchError, match="sigmoid_mul: gate is on meta"):
            mn.sigmoid_mul(torch.ones(2, 4), torch.ones(2, 4, device="meta"))
        with pytest.raises(mn.UnsupportedDTypeError, match="softmax: x has dtype int64"):
            mn.softmax(torch.ones(3, dtype=torch.int64))

    def test_values(self):
        with pytest.raises(mn.InvalidArgumentError, match="approximate must be 'tanh' or 'none'"):
            mn.gelu_mul(torch.ones(2), torch.ones(2), approximate="erf")
        with pytest.raises(mn.InvalidArgumentError, match="softcap: cap must be > 0"):
            mn.softcap(torch.ones(2), 0.0)
        with pytest.raises(mn.InvalidArgumentError, match="softmax: axis 2 is out of range"):
            mn.softmax(torch.ones(2, 2), 2)
        with pytest.raises(mn.InvalidArgumentError, match="contiguous last dim"):
            mn.silu_mul(torch.ones(4, 4).t(), torch.ones(4, 4).t())

    def test_empty(self, device):
        e = torch.empty(0, 8, device=device)
        assert mn.silu_mul(e, e).shape == (0, 8) and mn.softmax(e).shape == (0, 8)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_real_sizes(dtype):
    gu = randn(4096, 2 * 14336, dtype=dtype, device="cuda", scale=2.0)
    g, u = gu[:, :14336], gu[:, 14336:]
    for name, (ours_fn, torch_fn) in GATED.items():
        assert_error_bar(ours_fn(g, u), torch_fn(g.double(), u.double()), torch_fn(g, u), what=name)
    logits = randn(16, 151936, dtype=dtype, device="cuda", scale=5.0)
    assert_error_bar(mn.softmax(logits), torch.softmax(logits.double(), -1), torch.softmax(logits, -1))
    assert_error_bar(mn.softcap(logits, 30.0), 30 * torch.tanh(logits.double() / 30), 30 * torch.tanh(logits / 30))
