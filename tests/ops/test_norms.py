"""rms_norm / add_rms_norm / l2_norm: fp64 oracle with the error bar, MLX, strides, bad input."""

import mlx.core as mx
import pytest
import torch

import mlx_native as mn
from helpers import ALL_FLOAT, assert_agrees_with, assert_error_bar, from_mlx, mlx_array, randn
from mlx_native.ops.norms import ref

COLS = [1, 7, 63, 1000, 4097]


def torch_rms_norm_lowp(x, w, eps, offset=0.0):
    """The same math in x's dtype, as a PyTorch user writes it (the error-bar baseline)."""
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * (w.to(x.dtype) + offset) if w is not None else y


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_error_bar(device, dtype, cols, with_weight):
    x = randn(3, cols, dtype=dtype, device=device, scale=3.0)
    w = randn(cols, dtype=dtype, device=device) if with_weight else None
    out = mn.rms_norm(x, w, 1e-5)
    oracle = ref.rms_norm(x.double(), None if w is None else w.double(), 1e-5)
    assert_error_bar(out, oracle, torch_rms_norm_lowp(x, w, 1e-5), what=f"rms_norm {dtype} {cols}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rms_norm_long_rows_two_pass(device, dtype):
    x = randn(2, 20011, dtype=dtype, device=device)
    w = randn(20011, dtype=torch.float32, device=device)  # weight dtype may differ from x
    out = mn.rms_norm(x, w, 1e-6, weight_offset=1.0)
    oracle = ref.rms_norm(x.double(), w.double(), 1e-6, 1.0)
    assert_error_bar(out, oracle, torch_rms_norm_lowp(x, w, 1e-6, 1.0), what="two-pass")


def test_rms_norm_gemma_offset_and_strided_rows(device):
    base = randn(4, 6, 2, 96, dtype=torch.bfloat16, device=device)
    x = base[:, ::2, 1, :]  # leading dims strided, last dim contiguous
    assert not x.is_contiguous()
    w = randn(96, dtype=torch.bfloat16, device=device)
    out = mn.rms_norm(x, w, 1e-6, weight_offset=1.0)
    assert out.is_contiguous() and out.shape == x.shape
    oracle = ref.rms_norm(x.double(), w.double(), 1e-6, 1.0)
    assert_error_bar(out, oracle, torch_rms_norm_lowp(x, w, 1e-6, 1.0))


def test_rms_norm_three_strided_levels(device):
    base = randn(3, 4, 5, 2, 40, dtype=torch.float16, device=device)
    x = base[:, ::2, :, 0, :].transpose(0, 1)  # leading dims that do not collapse to two strides
    out = mn.rms_norm(x, None, 1e-6)
    assert_error_bar(out, ref.rms_norm(x.double(), None, 1e-6), torch_rms_norm_lowp(x, None, 1e-6))


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("cols", [7, 1000, 4097])
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_matches_mlx(device, dtype, cols, with_weight):
    x = randn(5, cols, dtype=dtype, device=device, scale=2.0)
    w = randn(cols, dtype=dtype, device=device) if with_weight else None
    ours = mn.rms_norm(x, w, 1e-5)
    theirs = from_mlx(mx.fast.rms_norm(mlx_array(x), None if w is None else mlx_array(w), 1e-5))
    oracle = ref.rms_norm(x.double(), None if w is None else w.double(), 1e-5)
    assert_agrees_with(ours, theirs, oracle, what=f"rms_norm vs MLX {dtype}")


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("cols", [1, 63, 4097, 20000])
def test_add_rms_norm(device, dtype, cols):
    x = randn(3, cols, dtype=dtype, device=device)
    r = randn(3, cols, dtype=dtype, device=device, scale=4.0)
    w = randn(cols, dtype=dtype, device=device)
    normed, h = mn.add_rms_norm(x, r, w, 1e-6)
    h_ref = (x.double() + r.double())
    assert_error_bar(h, h_ref, x + r, what="sum")
    # normed is the norm of the returned (rounded) sum: compare with the unfused pair
    assert_error_bar(normed, ref.rms_norm(h.double(), w.double(), 1e-6), torch_rms_norm_lowp(h, w, 1e-6),
                     what="normed")


def test_add_rms_norm_strided_residual(device):
    big = randn(8, 2 * 100, dtype=torch.bfloat16, device=device)
    x, r = big[:, :100], big[:, 100:]
    normed, h = mn.add_rms_norm(x, r, None)
    fused_ref, h_ref = ref.add_rms_norm(x, r, None, 1e-6)
    torch.testing.assert_close(h, h_ref, rtol=0, atol=0)
    assert_error_bar(normed, ref.rms_norm(h.double(), None, 1e-6), torch_rms_norm_lowp(h, None, 1e-6))


def test_strided_weight_is_read_with_its_stride(device):
    """A weight vector whose elements are not adjacent (every other element of a buffer) gives what the same
    weight gives contiguous (the kernel reads unit-stride weights: the plan copies a strided one)."""
    x = randn(5, 100, dtype=torch.bfloat16, device=device)
    res = randn(5, 100, dtype=torch.bfloat16, device=device)
    w = randn(200, device=device)[::2]
    assert w.stride() == (2,)
    torch.testing.assert_close(mn.rms_norm(x, w), mn.rms_norm(x, w.contiguous()), rtol=0, atol=0)
    torch.testing.assert_close(mn.add_rms_norm(x, res, w), mn.add_rms_norm(x, res, w.contiguous()), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("cols", [1, 64, 1000, 4097])
def test_l2_norm(device, dtype, cols):
    x = randn(4, cols, dtype=dtype, device=device)
    out = mn.l2_norm(x, 1e-6)
    baseline = x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6)
    assert_error_bar(out, ref.l2_norm(x.double(), 1e-6), baseline)


def test_reference_backend_matches_kernel(device):
    x = randn(6, 333, dtype=torch.float32, device=device)
    w = randn(333, device=device)
    with mn.use_backend("reference"):
        expected = mn.rms_norm(x, w)
    torch.testing.assert_close(mn.rms_norm(x, w), expected, rtol=2e-6, atol=2e-6)


def test_empty_inputs(device):
    x = torch.empty(0, 64, device=device)
    assert mn.rms_norm(x, None).shape == (0, 64)
    n, h = mn.add_rms_norm(x, x, None)
    assert n.shape == h.shape == (0, 64)



def test_plan_bakes_row_length_and_inverse_of_n(device):
    """The row length and the mean's multiplier 1/N (1.0 for l2_norm) are compile-time constants of the plan's
    launch, so that the parameters a decode launch reads fit one line of the constant bank."""
    from mlx_native.ops.norms import api
    from mlx_native.runtime.plans import tensor_key

    x = randn(2, 576, device=device)
    w = randn(576, device=device)
    key = (tensor_key(x), tensor_key(w), 1e-6)
    plans = (api._RMS_PLANS.get(key, x, w, None, 1e-6),
             api._ADD_RMS_PLANS.get((tensor_key(x), tensor_key(w), tensor_key(x), 1e-6), x, w, x, 1e-6),
             api._L2_PLANS.get((tensor_key(x), 1e-6), x, None, None, 1e-6))
    assert [(p.launch.constexprs["N"], p.launch.constexprs["INV_N"]) for p in plans] == [
        (576, 1.0 / 576), (576, 1.0 / 576), (576, 1.0)]


def test_launch_config_decode_rows_take_more_warps():
    """Decode problems (few rows) take at least DECODE_MIN_WARPS warps; larger ones keep 16 elements per thread."""
    from mlx_native.ops.norms import kernel

    low = kernel.DECODE_MIN_WARPS
    # (BLOCK_R, BLOCK_N, SINGLE_TILE, num_warps)
    assert kernel.config(1, 576) == (1, 1024, True, low)  # 1024 / (32 * 16) = 2 warps without the floor
    assert kernel.config(4, 2048) == (1, 2048, True, max(low, 4))
    assert kernel.config(16, 8192) == (1, 8192, True, 16)
    assert kernel.config(17, 576) == (2, 1024, True, 4)  # past DECODE_ROWS: elements per thread decide
    assert kernel.config(16384, 4096) == (1, 4096, True, 8)
    assert kernel.config(65536, 1024) == (2, 1024, True, 4)


def test_lean_rows_only_where_offsets_fit(device):
    """int32 row offsets for single-level layouts (NARROW), no row mask for whole row tiles (EVEN_ROWS)."""
    from mlx_native.ops.norms import kernel

    def flags(x):
        c = kernel.NormPlan(x, None, None, mean=True).launch.constexprs
        return c["NARROW"], c["EVEN_ROWS"]

    assert flags(randn(4, 576, device=device)) == (True, True)
    assert flags(randn(7, 1000, device=device)) == (True, False)  # 2-row tiles over 7 rows
    assert flags(randn(4, 8, 64, device=device)[:, :4]) == (False, True)  # two strided levels: int64
    wide = torch.empty_strided((2, 8), (2**31, 1), dtype=torch.bfloat16, device="meta")  # no memory: plan only
    assert flags(wide)[0] is False


class TestBadInput:
    def test_wrong_dtype(self):
        with pytest.raises(mn.UnsupportedDTypeError, match="rms_norm: x has dtype int32"):
            mn.rms_norm(torch.ones(2, 4, dtype=torch.int32))
        with pytest.raises(TypeError):  # also a TypeError
            mn.l2_norm(torch.ones(2, 4, dtype=torch.float64))

    def test_weight_length(self):
        with pytest.raises(mn.InvalidArgumentError, match=r"rms_norm: weight has shape \(5,\), expected \(4,\)"):
            mn.rms_norm(torch.ones(2, 4), torch.ones(5))

    def test_eps(self):
        for eps in (0.0, -1e-6, float("nan")):
            with pytest.raises(ValueError, match="rms_norm: eps"):
                mn.rms_norm(torch.ones(2, 4), None, eps)

    def test_non_contiguous_last_dim(self):
        with pytest.raises(mn.InvalidArgumentError, match="contiguous last dim"):
            mn.rms_norm(torch.ones(4, 6).t())

    def test_mixed_devices(self):
        with pytest.raises(mn.DeviceMismatchError, match="add_rms_norm: residual is on meta"):
            mn.add_rms_norm(torch.ones(2, 4), torch.ones(2, 4, device="meta"), None)

    def test_shape_and_dtype_mismatch(self):
        with pytest.raises(mn.InvalidArgumentError, match="residual has shape"):
            mn.add_rms_norm(torch.ones(2, 4), torch.ones(3, 4), None)
        with pytest.raises(mn.UnsupportedDTypeError, match="residual has dtype float16"):
            mn.add_rms_norm(torch.ones(2, 4), torch.ones(2, 4, dtype=torch.float16), None)

    def test_not_a_tensor(self):
        with pytest.raises(mn.InvalidArgumentError, match="x must be a torch.Tensor"):
            mn.rms_norm([1.0, 2.0])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(8192, 4096), (4, 8192), (1000, 4097), (333, 576), (16, 20000)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_real_sizes(shape, dtype):
    x = randn(*shape, dtype=dtype, device="cuda", scale=2.0)
    r = randn(*shape, dtype=dtype, device="cuda")
    w = randn(shape[-1], dtype=dtype, device="cuda")
    out = mn.rms_norm(x, w, 1e-6)
    assert_error_bar(out, ref.rms_norm(x.double(), w.double(), 1e-6), torch_rms_norm_lowp(x, w, 1e-6))
    normed, h = mn.add_rms_norm(x, r, w, 1e-6)
    assert_error_bar(h, x.double() + r.double(), x + r)
    assert_error_bar(normed, ref.rms_norm(h.double(), w.double(), 1e-6), torch_rms_norm_lowp(h, w, 1e-6))
    l2 = mn.l2_norm(x)
    assert_error_bar(l2, ref.l2_norm(x.double(), 1e-6), x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6))
