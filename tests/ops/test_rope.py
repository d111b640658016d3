"""rope / rope_multi / head_norm_rope: MLX, independent HF-style oracles, fp64 error bar, bad input."""

import mlx.core as mx
import pytest
import torch
import triton
import triton.language as tl

import mlx_native as mn
from helpers import ALL_FLOAT, assert_agrees_with, assert_error_bar, from_mlx, mlx_array, randn
from mlx_native.kernels.math import sincos
from mlx_native.ops.rope import ref


def torch_rope_lowp(x, dims, pos, inv_freq, traditional):
    """What a PyTorch model does: cos/sin from fp32 angles, cast to x's dtype, rotate in x's dtype."""
    theta = pos.float()[..., None] * inv_freq.float()
    return ref.rotate(x, dims, theta, traditional) if x.dtype == torch.float32 else _rotate_cast(x, dims, theta,
                                                                                               traditional)


def _rotate_cast(x, dims, theta, traditional):
    cos, sin = torch.cos(theta).to(x.dtype), torch.sin(theta).to(x.dtype)
    half = dims // 2
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        rot = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
    else:
        a, b = x[..., :half], x[..., half:dims]
        rot = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    return torch.cat([rot, x[..., dims:]], -1)


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("head_dim,dims", [(64, 64), (80, 80), (128, 64), (96, 32)])
@pytest.mark.parametrize("offset", [0, 37])
def test_rope_matches_mlx(device, dtype, traditional, head_dim, dims, offset):
    x = randn(2, 3, 7, head_dim, dtype=dtype, device=device)
    ours = mn.rope(x, dims, traditional=traditional, base=10000.0, scale=1.0, offset=offset)
    theirs = from_mlx(mx.fast.rope(mlx_array(x), dims, traditional=traditional, base=10000.0, scale=1.0,
                                   offset=offset))
    oracle = ref.rope(x.double(), dims, traditional, 10000.0, 1.0, offset)
    assert_agrees_with(ours, theirs, oracle, what=f"rope vs MLX {dtype} trad={traditional} {head_dim}/{dims}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("traditional", [False, True])
def test_rope_freqs_scale_and_batch_offsets_match_mlx(device, dtype, traditional):
    x = randn(3, 2, 5, 48, dtype=dtype, device=device)
    freqs = (torch.rand(16) * 20 + 0.5).to(device)
    offsets = torch.tensor([0, 9, 1000], device=device)
    ours = mn.rope(x, 32, traditional=traditional, base=None, scale=0.25, offset=offsets, freqs=freqs)
    theirs = from_mlx(mx.fast.rope(mlx_array(x), 32, traditional=traditional, base=None, scale=0.25,
                                   offset=mx.array(offsets.cpu().numpy()), freqs=mlx_array(freqs)))
    oracle = ref.rope(x.double(), 32, traditional, 1.0, 0.25, 0, offsets, freqs.double())
    assert_agrees_with(ours, theirs, oracle, what="freqs/offsets vs MLX")
    # a 1-element offset tensor is a scalar offset
    one = mn.rope(x, 32, traditional=traditional, base=500.0, offset=torch.tensor(7, device=device))
    torch.testing.assert_close(one, mn.rope(x, 32, traditional=traditional, base=500.0, offset=7))


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("seq", [1, 7, 63])
@pytest.mark.parametrize("head_dim", [64, 80, 128])
def test_rope_error_bar(device, dtype, seq, head_dim):
    x = randn(2, 4, seq, head_dim, dtype=dtype, device=device)
    offset = 4000
    out = mn.rope(x, head_dim, base=500000.0, offset=offset)
    oracle = ref.rope(x.double(), head_dim, False, 500000.0, 1.0, offset)
    pos = torch.arange(seq, device=device) + offset
    inv = ref.inv_freq(head_dim, 500000.0, None, torch.float32, device)
    assert_error_bar(out, oracle, torch_rope_lowp(x, head_dim, pos, inv, False))


def test_rope_long_context_positions(device):
    x = randn(1, 2, 5, 128, dtype=torch.bfloat16, device=device)
    pos = torch.tensor([0, 1, 65535, 100000, 131071], device=device)
    out = mn.rope(x, 128, base=1e6, positions=pos)
    oracle = ref.rope(x.double(), 128, False, 1e6, 1.0, positions=pos)
    inv = ref.inv_freq(128, 1e6, None, torch.float32, device)
    assert_error_bar(out, oracle, torch_rope_lowp(x, 128, pos, inv, False))


@pytest.mark.parametrize("traditional", [False, True])
def test_rope_explicit_positions_layouts(device, traditional):
    b, h, seq, d = 2, 3, 6, 64
    pos = torch.randint(0, 3000, (b, seq), device=device)
    x_bhld = randn(b, h, seq, d, device=device)
    out = mn.rope(x_bhld, d, traditional=traditional, positions=pos[:, None, :])
    oracle = ref.rope(x_bhld.double(), d, traditional, 10000.0, 1.0, positions=pos[:, None, :])
    assert_error_bar(out, oracle, ref.rope(x_bhld, d, traditional, 10000.0, 1.0, positions=pos[:, None, :]))
    # the same data in [B, L, H, D] layout, positions [B, L, 1]
    x_blhd = x_bhld.transpose(1, 2)  # strided rows
    out2 = mn.rope(x_blhd, d, traditional=traditional, positions=pos[:, :, None])
    torch.testing.assert_close(out2, out.transpose(1, 2), rtol=1e-6, atol=1e-6)
    # shared positions [L] (MLX mode with offset gives the same as explicit arange)
    same = mn.rope(x_bhld, d, traditional=traditional, positions=torch.arange(seq, device=device) + 11)
    torch.testing.assert_close(same, mn.rope(x_bhld, d, traditional=traditional, offset=11), rtol=1e-6, atol=1e-6)


def test_rope_positions_three_level_index(device):
    """Positions read through a three-level index (a strided [A, B, L] slice, shared by the heads), and through
    levels that need no remainder (one sequence): each level of the kernel's index is used."""
    a, b, h, seq, d = 2, 3, 4, 5, 32
    big = torch.randint(0, 3000, (a, b + 1, seq + 3), device=device)
    pos = big[:, :b, :seq]  # strides (b+1)(seq+3), seq+3, 1: no two dims merge
    x = randn(a, b, h, seq, d, device=device)
    out = mn.rope(x, d, positions=pos[:, :, None, :])
    oracle = ref.rope(x.double(), d, False, 10000.0, 1.0, positions=pos[:, :, None, :])
    assert_error_bar(out, oracle, ref.rope(x, d, False, 10000.0, 1.0, positions=pos[:, :, None, :]))
    one = mn.rope(x[:1, :1], d, positions=pos[:1, :1, None, :])
    torch.testing.assert_close(one, out[:1, :1], rtol=0, atol=0)


def test_rope_position_index_levels():
    from mlx_native.ops.rope.kernel import pos_levels

    assert pos_levels(30, 3, 5, 24, 8, 1) == (1, 2, 2)  # 2 x 3 x 5 rows: every level, with remainders
    assert pos_levels(15, 3, 5, 24, 8, 1) == (0, 1, 2)  # one outer index: no outer level, no wrap of n1
    assert pos_levels(5, 1, 5, 0, 0, 1) == (0, 0, 1)  # [L] positions of one sequence: the row is the index
    assert pos_levels(8, 1, 1, 0, 0, 0) == (0, 0, 0)  # decode: one position shared by every row


def test_rope_positions_needing_materialization(device):
    # positions vary along three non-mergeable broadcast dims: the launcher copies them
    x = randn(2, 3, 4, 5, 32, device=device)
    pos = torch.randint(0, 100, (2, 1, 4, 5), device=device)[:, :, :, :]
    pos = pos.expand(2, 3, 4, 5).transpose(1, 2)  # [2, 4, 3, 5] non-collapsible strides
    x2 = x.transpose(1, 2)
    out = mn.rope(x2, 32, positions=pos)
    oracle = ref.rope(x2.double(), 32, False, 10000.0, 1.0, positions=pos)
    assert_error_bar(out, oracle, ref.rope(x2, 32, False, 10000.0, 1.0, positions=pos))


def hf_mrope_contiguous(x, pos, sections, base):
    """Qwen2-VL's formulation: cos/sin per stream, split by sections*2, pick stream i % 3 per chunk."""
    d = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d))
    freqs = pos.double()[..., None] * inv  # [3, B, L, d/2]
    emb = torch.cat([freqs, freqs], -1)
    cos = torch.cat([m[i % 3] for i, m in enumerate(emb.cos().split(list(sections) * 2, dim=-1))], -1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(emb.sin().split(list(sections) * 2, dim=-1))], -1)
    cos, sin = cos[:, None], sin[:, None]  # [B, 1, L, d]
    rot = torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def hf_mrope_interleaved(x, pos, sections, base):
    """Qwen3-VL's formulation: T frequencies, overwritten by H at 1::3 and W at 2::3 up to 3*section."""
    d = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d))
    freqs = pos.double()[..., None] * inv  # [3, B, L, d/2]
    f = freqs[0].clone()
    for dim, offset in ((1, 1), (2, 2)):
        idx = slice(offset, sections[dim] * 3, 3)
        f[..., idx] = freqs[dim, ..., idx]
    emb = torch.cat([f, f], -1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    rot = torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rot * sin


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("interleaved,sections", [(False, [16, 24, 24]), (True, [24, 20, 20]), (False, [8, 8, 16, 32])])
def test_rope_multi_matches_hf_formulation(device, dtype, interleaved, sections):
    b, h, seq, d = 2, 3, 7, 128
    x = randn(b, h, seq, d, dtype=dtype, device=device)
    pos = torch.randint(0, 500, (len(sections), b, seq), device=device)
    out = mn.rope_multi(x, d, pos[:, :, None, :], sections, interleaved=interleaved, base=1e6)
    if len(sections) == 3:
        hf = hf_mrope_interleaved if interleaved else hf_mrope_contiguous
        oracle = hf(x.double(), pos, sections, 1e6)
    else:
        oracle = ref.rope_multi(x.double(), d, pos[:, :, None, :], sections, False, False, 1e6, 1.0)
    baseline = ref.rope_multi(x.float(), d, pos[:, :, None, :], sections, interleaved, False, 1e6, 1.0).to(dtype)
    assert_error_bar(out, oracle, baseline, what=f"rope_multi {sections}")


def test_rope_multi_partial_rotary_qwen35(device):
    # Qwen3.5: head_dim 256, partial rotary 0.25 -> dims 64, interleaved sections [11, 11, 10]
    x = randn(1, 5, 4, 256, dtype=torch.bfloat16, device=device)  # [B, L, H, D]
    pos = torch.randint(0, 100, (3, 1, 5, 1), device=device)
    out = mn.rope_multi(x, 64, pos, [11, 11, 10], interleaved=True, base=1e7)
    oracle = ref.rope_multi(x.double(), 64, pos, [11, 11, 10], True, False, 1e7, 1.0)
    assert_error_bar(out, oracle, ref.rope_multi(x, 64, pos, [11, 11, 10], True, False, 1e7, 1.0))
    assert torch.equal(out[..., 64:], x[..., 64:])  # pass-through columns untouched
    # with all streams equal, M-RoPE is plain RoPE
    same = torch.randint(0, 100, (1, 5, 1), device=device).expand(3, 1, 5, 1)
    torch.testing.assert_close(mn.rope_multi(x, 64, same, [11, 11, 10], interleaved=True, base=1e7),
                               mn.rope(x, 64, base=1e7, positions=same[0]))


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("head_dim,dims", [(64, 64), (128, 128), (256, 64), (80, 40)])
@pytest.mark.parametrize("traditional", [False, True])
def test_head_norm_rope(device, dtype, head_dim, dims, traditional):
    x = randn(2, 7, 4, head_dim, dtype=dtype, device=device, scale=3.0)  # [B, T, H, D]
    w = randn(head_dim, dtype=dtype, device=device)
    pos = torch.randint(0, 2000, (2, 7), device=device)
    out = mn.head_norm_rope(x, w, positions=pos, eps=1e-6, dims=dims, base=1e6, traditional=traditional)
    oracle = ref.head_norm_rope(x.double(), w.double(), 1e-6, 0.0, dims, 1e6, 1.0, pos, traditional)
    # baseline: the unfused PyTorch pair (norm rounded to dtype, then rope in dtype)
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    inv = ref.inv_freq(dims, 1e6, None, torch.float32, device)
    baseline = torch_rope_lowp(normed, dims, pos[..., None], inv, traditional)
    assert_error_bar(out, oracle, baseline, what=f"head_norm_rope {dtype} {head_dim}/{dims}")


def test_head_norm_rope_equals_unfused_ops(device):
    x = randn(9, 8, 128, device=device)  # [T, H, D] fp32
    w = randn(128, device=device)
    pos = torch.arange(9, device=device) + 100
    fused = mn.head_norm_rope(x, w, positions=pos, eps=1e-6, weight_offset=1.0, base=1e4)
    unfused = mn.rope(mn.rms_norm(x, w, 1e-6, weight_offset=1.0), 128, base=1e4, positions=pos[:, None])
    torch.testing.assert_close(fused, unfused, rtol=2e-5, atol=2e-5)
    no_weight = mn.head_norm_rope(x, None, positions=pos, eps=1e-6, dims=64, freqs=torch.rand(32, device=device) + 1)
    assert torch.isfinite(no_weight).all()


def test_head_norm_rope_multi_sections(device):
    x = randn(3, 5, 2, 256, dtype=torch.bfloat16, device=device)  # [B, T, H, D]
    w = randn(256, dtype=torch.bfloat16, device=device)
    pos = torch.randint(0, 300, (3, 3, 5), device=device)
    out = mn.head_norm_rope(x, w, positions=pos, dims=64, base=1e7, sections=[11, 11, 10], interleaved=True)
    oracle = ref.head_norm_rope(x.double(), w.double(), 1e-6, 0.0, 64, 1e7, 1.0, pos, False, None, [11, 11, 10], True)
    baseline = ref.head_norm_rope(x, w, 1e-6, 0.0, 64, 1e7, 1.0, pos, False, None, [11, 11, 10], True)
    assert_error_bar(out, oracle, baseline)


class TestBadInput:
    x = torch.randn(2, 3, 4, 64)

    @pytest.mark.parametrize("dims,msg", [(7, "positive even"), (0, "positive even"), (128, "larger than")])
    def test_dims(self, dims, msg):
        with pytest.raises(mn.InvalidArgumentError, match=f"rope: dims.*{msg}|rope: dims {dims} is {msg}"):
            mn.rope(self.x, dims)

    def test_positions(self):
        with pytest.raises(mn.InvalidArgumentError, match="positions of shape .* do not broadcast"):
            mn.rope(self.x, 64, positions=torch.zeros(5, dtype=torch.int64))
        with pytest.raises(mn.UnsupportedDTypeError, match="positions has dtype float32"):
            mn.rope(self.x, 64, positions=torch.zeros(4))
        with pytest.raises(mn.InvalidArgumentError, match="either offset or positions"):
            mn.rope(self.x, 64, offset=torch.tensor(1), positions=torch.zeros(4, dtype=torch.int32))

    def test_offset_and_freqs(self):
        with pytest.raises(mn.InvalidArgumentError, match="offset tensor must hold 1 value or one per batch"):
            mn.rope(self.x, 64, offset=torch.tensor([1, 2, 3]))
        with pytest.raises(mn.InvalidArgumentError, match=r"freqs has shape \(31,\), expected \(32,\)"):
            mn.rope(self.x, 64, freqs=torch.ones(31), base=None)
        with pytest.raises(mn.InvalidArgumentError, match="base is None and no freqs"):
            mn.rope(self.x, 64, base=None)
        with pytest.raises(mn.InvalidArgumentError, match="rope: base must be > 0"):
            mn.rope(self.x, 64, base=-2.0)

    def test_layout(self):
        with pytest.raises(mn.InvalidArgumentError, match="at least 2 dims"):
            mn.rope(torch.randn(64), 64)
        with pytest.raises(mn.InvalidArgumentError, match="contiguous last dim"):
            mn.rope(torch.randn(2, 64, 8).transpose(1, 2), 8)
        with pytest.raises(mn.DeviceMismatchError):
            mn.rope(self.x, 64, positions=torch.zeros(4, dtype=torch.int64, device="meta"))

    def test_sections(self):
        pos = torch.zeros(3, 2, 3, 4, dtype=torch.int64)
        with pytest.raises(mn.InvalidArgumentError, match="sum to 31, expected dims / 2 = 32"):
            mn.rope_multi(self.x, 64, pos, [10, 11, 10])
        with pytest.raises(mn.InvalidArgumentError, match="interleaved layout takes 3 sections"):
            mn.rope_multi(self.x, 64, torch.zeros(4, 2, 3, 4, dtype=torch.int64), [8, 8, 8, 8], interleaved=True)
        with pytest.raises(mn.InvalidArgumentError, match="do not broadcast"):
            mn.rope_multi(self.x, 64, torch.zeros(2, 2, 3, 4, dtype=torch.int64), [16, 8, 8])

    def test_head_norm_rope(self):
        pos = torch.zeros(2, 3, dtype=torch.int64)
        with pytest.raises(mn.InvalidArgumentError, match=r"head_norm_rope: weight has shape \(32,\)"):
            mn.head_norm_rope(self.x, torch.ones(32), positions=pos)
        with pytest.raises(mn.InvalidArgumentError, match="head_norm_rope: eps must be > 0"):
            mn.head_norm_rope(self.x, None, positions=pos, eps=0.0)
        with pytest.raises(mn.InvalidArgumentError, match="token dims"):
            mn.head_norm_rope(self.x, None, positions=torch.zeros(2, 4, dtype=torch.int64))
        with pytest.raises(mn.UnsupportedDTypeError):
            mn.head_norm_rope(self.x.double(), None, positions=pos)


def test_empty(device):
    x = torch.empty(2, 0, 64, device=device)
    assert mn.rope(x, 64).shape == (2, 0, 64)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_real_sizes(dtype):
    q = randn(1, 32, 4096, 128, dtype=dtype, device="cuda")
    out = mn.rope(q, 128, base=500000.0, offset=17)
    oracle = ref.rope(q.double(), 128, False, 500000.0, 1.0, 17)
    inv = ref.inv_freq(128, 500000.0, None, torch.float32, "cuda")
    pos = torch.arange(4096, device="cuda") + 17
    assert_error_bar(out, oracle, torch_rope_lowp(q, 128, pos, inv, False))
    x = randn(4096, 16, 256, dtype=dtype, device="cuda")  # [T, H, D], Gemma-like
    w = randn(256, dtype=dtype, device="cuda")
    p = torch.arange(4096, device="cuda")
    out = mn.head_norm_rope(x, w, positions=p, dims=256, base=1e6, weight_offset=1.0)
    oracle = ref.head_norm_rope(x.double(), w.double(), 1e-6, 1.0, 256, 1e6, 1.0, p, False)
    baseline = ref.head_norm_rope(x, w, 1e-6, 1.0, 256, 1e6, 1.0, p, False)
    assert_error_bar(out, oracle, baseline)


def test_plan_shares_angles_across_heads():
    """The kernel computes cos/sin once per position row and reuses them for the heads."""
    from mlx_native.ops.rope.api import _rope_view
    from mlx_native.ops.rope.kernel import RopePlan

    x = torch.randn(2, 8, 5, 64)  # [B, H, L, D], MLX mode: heads share positions
    plan = RopePlan(x, 64, _rope_view(x, None), None, 5, traditional=False, base=1e4, freqs=None, sections=None,
                    interleaved=False)
    assert plan.n_groups == 8  # the 8 heads
    xt = torch.randn(7, 16, 128)  # [T, H, D] with positions per token
    pos = torch.arange(7)
    view = lambda p: p.unsqueeze(-1).expand(7, 16).unsqueeze(0)  # noqa: E731
    plan = RopePlan(xt, 128, view, pos, 0, traditional=False, base=1e4, freqs=None, sections=None, interleaved=False,
                    norm=True)
    assert plan.n_rows == 7 and plan.n_groups == 16  # 7 position rows x 16 heads


def test_launch_config_small_and_large_problems():
    """Small (decode) problems: SMALL_ROWS head rows per program, SMALL_ELEMS_PER_THREAD elements per thread;
    large ones unchanged."""
    from mlx_native.ops.rope import kernel

    sms = 132  # H100
    rows = kernel.SMALL_ROWS

    def warps(elems):  # of a small problem's program
        return min(8, max(1, elems // (32 * kernel.SMALL_ELEMS_PER_THREAD)))

    # (BLOCK_G, BLOCK_R, num_warps) for (position rows, heads, padded head-row elements, total elements)
    assert kernel.launch_config(1, 32, 128, 32 * 128, sms) == (rows, 1, warps(rows * 128))  # T1 H32 D128
    assert kernel.launch_config(4, 16, 256, 4 * 16 * 256, sms) == (rows, 1, warps(rows * 256))  # T4 H16 D256
    assert kernel.launch_config(1, 32, 128, 40 * 128, sms) == (rows, 1, warps(rows * 128))  # rope_qk B1 32/8
    assert kernel.launch_config(16, 32, 128, 16 * 32 * 128, sms) == (rows, 1, warps(rows * 128))  # T16 H32 D128
    assert kernel.launch_config(17, 1, 64, 17 * 64, sms) == (1, rows, warps(rows * 64))  # no head dim: position rows
    # 2 heads: rows/2 position rows
    assert kernel.launch_config(9, 2, 64, 9 * 2 * 64, sms) == (2, rows // 2, warps(rows * 64))
    # at most SMALL_ROWS head rows in all: one per program, one warp (T1 H8 D256, T7 without heads, T3 H2)
    assert kernel.launch_config(1, 8, 256, 8 * 256, sms) == (1, 1, 1)
    assert kernel.launch_config(7, 1, 64, 7 * 64, sms) == (1, 1, 1)
    assert kernel.launch_config(3, 2, 64, 3 * 2 * 64, sms) == (1, 1, 1)
    assert warps(8 * 128) == 4 and warps(8 * 256) == 8  # the swept decode configs (session 6)
    # large problems keep the verified config: LARGE_GROUP heads, ELEMS_PER_THREAD per thread
    assert kernel.launch_config(8192, 32, 256, 8192 * 32 * 256, sms) == (16, 1, 4)  # T8192 H32 D256
    assert kernel.launch_config(16384, 40, 128, 16384 * 40 * 128, sms) == (16, 1, 2)  # rope_qk B4 L4096 D128


@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("traditional", [False, True])
def test_rope_qk_equals_two_ropes(device, dtype, traditional):
    q = randn(2, 8, 5, 64, dtype=dtype, device=device)  # [B, Hq, L, D]
    k = randn(2, 2, 5, 64, dtype=dtype, device=device)  # [B, Hkv, L, D]
    qo, ko = mn.rope_qk(q, k, 48, traditional=traditional, base=5e5, offset=torch.tensor([3, 900], device=device))
    off = torch.tensor([3, 900], device=device)
    torch.testing.assert_close(qo, mn.rope(q, 48, traditional=traditional, base=5e5, offset=off))
    torch.testing.assert_close(ko, mn.rope(k, 48, traditional=traditional, base=5e5, offset=off))
    # token-major layout with explicit positions, k with a different head count
    qt = randn(7, 6, 128, dtype=dtype, device=device)
    kt = randn(7, 1, 128, dtype=dtype, device=device)
    pos = torch.randint(0, 4000, (7, 1), device=device)
    qo, ko = mn.rope_qk(qt, kt, 128, positions=pos)
    assert_error_bar(qo, ref.rope(qt.double(), 128, False, 1e4, 1.0, positions=pos),
                     ref.rope(qt, 128, False, 1e4, 1.0, positions=pos))
    assert_error_bar(ko, ref.rope(kt.double(), 128, False, 1e4, 1.0, positions=pos),
                     ref.rope(kt, 128, False, 1e4, 1.0, positions=pos))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_head_norm_rope_qk(device, dtype):
    q = randn(3, 5, 8, 128, dtype=dtype, device=device, scale=2.0)  # [B, T, Hq, D]
    k = randn(3, 5, 2, 128, dtype=dtype, device=device)
    qw, kw = randn(128, dtype=dtype, device=device), randn(128, dtype=dtype, device=device)
    pos = torch.randint(0, 3000, (3, 5), device=device)
    qo, ko = mn.head_norm_rope_qk(q, k, qw, kw, positions=pos, dims=64, base=1e6, weight_offset=1.0)
    for out, x, w in ((qo, q, qw), (ko, k, kw)):
        oracle = ref.head_norm_rope(x.double(), w.double(), 1e-6, 1.0, 64, 1e6, 1.0, pos, False)
        assert_error_bar(out, oracle, ref.head_norm_rope(x, w, 1e-6, 1.0, 64, 1e6, 1.0, pos, False))
    single = mn.head_norm_rope(k, kw, positions=pos, dims=64, base=1e6, weight_offset=1.0)
    torch.testing.assert_close(ko, single)


def test_strided_weights_and_freqs_are_read_with_their_stride(device):
    """Norm weights and freqs whose elements are not adjacent give what the same vectors give contiguous
    (the kernel reads them with unit stride: the plan copies strided ones)."""
    q = randn(3, 8, 64, dtype=torch.bfloat16, device=device)  # [T, H, D]
    k = randn(3, 2, 64, dtype=torch.bfloat16, device=device)
    qw, kw = randn(128, device=device)[::2], randn(192, device=device)[::3]
    freqs = (torch.rand(64, device=device) + 1)[::2]
    pos = torch.arange(3, device=device) + 5
    exact = dict(rtol=0, atol=0)
    torch.testing.assert_close(mn.rope(q, 64, freqs=freqs), mn.rope(q, 64, freqs=freqs.contiguous()), **exact)
    torch.testing.assert_close(mn.head_norm_rope(q, qw, positions=pos, freqs=freqs),
                               mn.head_norm_rope(q, qw.contiguous(), positions=pos, freqs=freqs.contiguous()), **exact)
    torch.testing.assert_close(mn.head_norm_rope_qk(q, k, qw, kw, positions=pos),
                               mn.head_norm_rope_qk(q, k, qw.contiguous(), kw.contiguous(), positions=pos), **exact)
    torch.testing.assert_close(mn.rope_qk(q, k, 64, positions=pos[:, None], freqs=freqs),
                               mn.rope_qk(q, k, 64, positions=pos[:, None], freqs=freqs.contiguous()), **exact)


def test_qk_bad_input():
    q = torch.randn(2, 8, 5, 64)
    with pytest.raises(mn.InvalidArgumentError, match="rope_qk: q and k cannot share one launch"):
        mn.rope_qk(q, torch.randn(2, 2, 4, 64), 64)  # differ in heads and length
    with pytest.raises(mn.UnsupportedDTypeError, match="rope_qk: k has dtype float16"):
        mn.rope_qk(q, torch.randn(2, 2, 5, 64, dtype=torch.float16), 64)
    with pytest.raises(mn.InvalidArgumentError, match="head_norm_rope_qk: pass both q_weight and k_weight"):
        mn.head_norm_rope_qk(q, torch.randn(2, 8, 2, 64), torch.ones(64), None,
                             positions=torch.zeros(2, 8, dtype=torch.int64))


@triton.jit
def _sincos_kernel(x_ptr, s_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    s, c = sincos(tl.load(x_ptr + offs, mask=ok))
    tl.store(s_ptr + offs, s, mask=ok)
    tl.store(c_ptr + offs, c, mask=ok)


def test_sincos_within_two_ulps(device):
    """kernels.math.sincos (the rope kernel's angles) against fp64 on 64k angles of |x| from 1e-6 to 1e5,
    within 2 fp32 ulps of the result (absolute floor 2**-24)."""
    gen = torch.Generator().manual_seed(0)
    mag = 2.0 ** (torch.rand(1 << 16, generator=gen) * 37 - 20)
    x = ((torch.rand(1 << 16, generator=gen) * 2 - 1) * mag).float().to(device)
    s, c = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    _sincos_kernel[(triton.cdiv(x.numel(), 1024),)](x, s, c, x.numel(), BLOCK=1024)
    xd = x.double()
    for got, exact in ((s, xd.sin()), (c, xd.cos())):
        ulp = torch.clamp(torch.abs(torch.nextafter(exact.float(), torch.full_like(x, float("inf"))) - exact.float()),
                          min=2.0 ** -24).double()
        assert ((got.double() - exact).abs() / ulp).max().item() <= 2.0
