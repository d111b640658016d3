"""Attention: flash_attn_prefill / flash_attn_decode / scaled_dot_product_attention / kv_cache_write / KVCache.

Oracles: the fp64 reference (with the flash-attention error bar against the
same math done by PyTorch in the low dtype), PyTorch SDPA and MLX
``mx.fast.scaled_dot_product_attention`` (CPU) where they support the case.
Interpreter runs use small shapes; real sizes are ``@pytest.mark.gpu``.
"""


import mlx.core as mx
import pytest
import torch
import torch.nn.functional as F

import mlx_native as mn
from helpers import assert_agrees_with, assert_error_bar, from_mlx, mlx_array, randn
from mlx_native.ops.attention import ref
from mlx_native.ops.rope import ref as rope_ref

LOWP = (torch.float16, torch.bfloat16)
NEG_INF = float("-inf")


# --------------------------------------------------------------------------- oracles

def lowp_attention(q, k, v, scale, causal=False, mask=None, window=None, softcap=None):
    """Naive attention in the inputs' dtype, as PyTorch users write it (the error-bar baseline):
    scores and softcap in the low dtype, softmax in fp32 rounded to the dtype, then P @ V."""
    hq, lq, lk = q.shape[1], q.shape[2], k.shape[2]
    g = hq // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    s = s.float()
    if mask is not None:
        s = s.masked_fill(~mask, NEG_INF) if mask.dtype == torch.bool else s + mask.float()
    vis = ref.visible_positions(lq, lk, causal or window is not None, window, q.device)
    if vis is not None:
        s = s.masked_fill(~vis, NEG_INF)
    p = torch.softmax(s, -1).nan_to_num(0.0).to(v.dtype)
    return p @ v


def oracle(q, k, v, scale, causal=False, mask=None, window=None, softcap=None):
    return ref.flash_attn_prefill(q.double(), k.double(), v.double(), scale, causal, mask, window, softcap)


def check_prefill(q, k, v, *, causal=False, mask=None, window=None, softcap=None, scale=None, what=""):
    scale_ = scale if scale is not None else q.shape[-1] ** -0.5
    out, lse = mn.flash_attn_prefill(q, k, v, scale=scale, causal=causal, mask=mask, window=window, softcap=softcap,
                                     return_lse=True)
    o_ref, lse_ref = oracle(q, k, v, scale_, causal, mask, window, softcap)
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    base = lowp_attention(q, k, v, scale_, causal, mask, window, softcap)
    assert_error_bar(out, o_ref, base, what=what)
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isfinite(lse), finite), f"{what}: lse -inf pattern differs"
    lse_err = (lse.double() - lse_ref)[finite].abs().max().item() if finite.any() else 0.0
    assert lse_err <= 1e-4 * max(1.0, lse_ref[finite].abs().max().item() if finite.any() else 1.0), \
        f"{what}: lse error {lse_err}"
    return out


def make_qkv(b, hq, hkv, lq, lk, d, dtype, device, scale=1.0):
    return (randn(b, hq, lq, d, dtype=dtype, device=device, scale=scale),
            randn(b, hkv, lk, d, dtype=dtype, device=device, scale=scale),
            randn(b, hkv, lk, d, dtype=dtype, device=device))


# --------------------------------------------------------------------------- prefill

@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,lk", [(1, 1), (7, 7), (63, 63), (1, 63), (7, 100), (63, 130), (100, 100), (7, 1000),
                                   (3, 4097)])
def test_prefill_lengths(device, dtype, causal, lq, lk):
    q, k, v = make_qkv(1, 2, 1, lq, lk, 64, dtype, device)
    check_prefill(q, k, v, causal=causal, what=f"{lq}x{lk} causal={causal}")


@pytest.mark.parametrize("d", [8, 40, 64, 80, 96, 128, 192, 256, 512])
@pytest.mark.parametrize("dtype", LOWP)
def test_prefill_head_dims(device, d, dtype):
    q, k, v = make_qkv(1, 2, 2, 20, 37, d, dtype, device)
    check_prefill(q, k, v, causal=True, what=f"D={d}")


@pytest.mark.parametrize("d", [64, 96, 256])
def test_prefill_float32(device, d):
    q, k, v = make_qkv(2, 2, 1, 33, 50, d, torch.float32, device)
    check_prefill(q, k, v, causal=True, what="fp32")
    check_prefill(q, k, v, window=9, softcap=5.0, what="fp32 window softcap")


@pytest.mark.parametrize("ratio", [1, 4, 8])
def test_prefill_gqa(device, ratio):
    q, k, v = make_qkv(2, 8, 8 // ratio, 40, 40, 64, torch.bfloat16, device)
    check_prefill(q, k, v, causal=True, what=f"GQA {ratio}")


@pytest.mark.parametrize("window", [1, 5, 16, 33, 70, 1000])
@pytest.mark.parametrize("lq,lk", [(60, 60), (20, 90)])
def test_prefill_window(device, window, lq, lk):
    q, k, v = make_qkv(1, 2, 1, lq, lk, 64, torch.bfloat16, device)
    check_prefill(q, k, v, window=window, what=f"window {window}")


@pytest.mark.parametrize("softcap", [1.0, 30.0])
def test_prefill_softcap(device, softcap):
    q, k, v = make_qkv(1, 2, 1, 40, 50, 128, torch.float16, device, scale=4.0)
    check_prefill(q, k, v, causal=True, softcap=softcap, what="softcap")
    check_prefill(q, k, v, window=13, softcap=softcap, what="softcap + window")


def test_prefill_window_equals_causal_when_wide(device):
    q, k, v = make_qkv(1, 2, 1, 30, 45, 64, torch.bfloat16, device)
    torch.testing.assert_close(mn.flash_attn_prefill(q, k, v, window=45), mn.flash_attn_prefill(q, k, v, causal=True),
                               rtol=0, atol=0)


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("shape", ["LqLk", "BHLqLk", "B1LqLk", "1Lk"])
def test_prefill_bool_mask(device, dtype, shape):
    b, h, lq, lk = 2, 4, 33, 47
    q, k, v = make_qkv(b, h, 2, lq, lk, 64, dtype, device)
    mshape = {"LqLk": (lq, lk), "BHLqLk": (b, h, lq, lk), "B1LqLk": (b, 1, lq, lk), "1Lk": (1, lk)}[shape]
    mask = torch.rand(mshape, device=device) > 0.4
    check_prefill(q, k, v, mask=mask, what=f"bool mask {shape}")
    check_prefill(q, k, v, mask=mask, causal=True, what=f"bool mask {shape} + causal")


@pytest.mark.parametrize("mdtype", [torch.float32, torch.bfloat16, torch.float16])
def test_prefill_additive_mask(device, mdtype):
    b, h, lq, lk = 2, 2, 40, 40
    q, k, v = make_qkv(b, h, 1, lq, lk, 64, torch.bfloat16, device)
    mask = randn(b, h, lq, lk, dtype=mdtype, device=device, scale=2.0)
    mask[..., :, 17:] = NEG_INF  # whole tiles masked: skipped
    check_prefill(q, k, v, mask=mask, what="additive mask")
    check_prefill(q, k, v, mask=mask, window=20, softcap=10.0, what="additive mask + window + softcap")


def test_prefill_mask_tiles_skipped_match_dense(device):
    """A block-diagonal bool mask (most tiles all-False) gives the same result as the oracle."""
    lq = lk = 96
    q, k, v = make_qkv(1, 2, 2, lq, lk, 64, torch.float16, device)
    blk = torch.arange(lq, device=device) // 32
    mask = blk[:, None] == blk[None, :]
    check_prefill(q, k, v, mask=mask, what="block-diagonal")


def test_prefill_fully_masked_rows_are_zero(device):
    lq, lk = 40, 40
    q, k, v = make_qkv(1, 2, 1, lq, lk, 64, torch.bfloat16, device)
    mask = torch.rand(lq, lk, device=device) > 0.5
    mask[[0, 5, 39]] = False
    out, lse = mn.flash_attn_prefill(q, k, v, mask=mask, return_lse=True)
    assert not torch.isnan(out).any()
    assert (out[:, :, [0, 5, 39]] == 0).all()
    assert torch.isneginf(lse[:, :, [0, 5, 39]]).all()
    additive = torch.zeros(lq, lk, device=device).masked_fill(~mask, NEG_INF)
    out2 = check_prefill(q, k, v, mask=additive, what="additive -inf rows")
    assert (out2[:, :, [0, 5, 39]] == 0).all()
    # causal with Lk < Lq: the first rows see nothing
    q, k, v = make_qkv(1, 2, 1, 20, 8, 64, torch.bfloat16, device)
    out = check_prefill(q, k, v, causal=True, what="Lk < Lq")
    assert (out[:, :, :12] == 0).all()


def test_prefill_zero_keys(device):
    q = randn(1, 2, 5, 64, dtype=torch.bfloat16, device=device)
    k = torch.empty(1, 2, 0, 64, dtype=torch.bfloat16, device=device)
    out, lse = mn.flash_attn_prefill(q, k, k, return_lse=True)
    assert (out == 0).all() and torch.isneginf(lse).all()


def test_prefill_strided_inputs(device):
    """q from a [B, L, H, D] projection (transposed view), k/v as prefix views of a bigger cache."""
    b, l, h, d = 2, 37, 4, 64
    q = randn(b, l, h, d, dtype=torch.bfloat16, device=device).transpose(1, 2)
    cache_k = randn(b, 2, 100, d, dtype=torch.bfloat16, device=device)
    cache_v = randn(b, 2, 100, d, dtype=torch.bfloat16, device=device)
    k, v = cache_k[:, :, :60], cache_v[:, :, :60]
    assert not q.is_contiguous() and not k.is_contiguous()
    check_prefill(q, k, v, causal=True, what="strided")


def check_prefill_kv_lens(q, cache_k, cache_v, lens, *, causal=True, window=None, softcap=None, what=""):
    """``flash_attn_prefill(kv_lens=lens)`` over a cache whose slots past each sequence's length hold NaN,
    against the fp64 oracle of each sequence's prefix alone (error bar of the same-dtype PyTorch math)."""
    lens_host = [int(n) for n in lens.cpu()]
    out, lse = mn.flash_attn_prefill(q, cache_k, cache_v, causal=causal, window=window, softcap=softcap,
                                     kv_lens=lens, return_lse=True)
    scale = q.shape[-1] ** -0.5
    for b, n in enumerate(lens_host):
        k, v = cache_k[b:b + 1, :, :n], cache_v[b:b + 1, :, :n]
        o_ref, lse_ref = oracle(q[b:b + 1], k, v, scale, causal, None, window, softcap)
        base = lowp_attention(q[b:b + 1], k, v, scale, causal, None, window, softcap)
        assert_error_bar(out[b:b + 1], o_ref, base, what=f"{what} sequence {b} ({n} keys)")
        finite = torch.isfinite(lse_ref)
        assert torch.equal(torch.isfinite(lse[b:b + 1]), finite), f"{what}: lse -inf pattern differs"
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_prefill_kv_lens_reads_each_sequence_prefix(device, causal):
    """k / v a cache of 50 slots, NaN past each sequence's length: the chunk of 9 queries continues each
    sequence at its own length (rows at kv_lens[b] - 9 + i), nothing past it is read into the result."""
    b, hq, hkv, lq, cap, d = 3, 4, 2, 9, 50, 64
    q = randn(b, hq, lq, d, dtype=torch.bfloat16, device=device)
    cache_k = randn(b, hkv, cap, d, dtype=torch.bfloat16, device=device)
    cache_v = randn(b, hkv, cap, d, dtype=torch.bfloat16, device=device)
    lens = torch.tensor([9, 31, 50], dtype=torch.int32, device=device)
    for i, n in enumerate(lens.tolist()):
        cache_k[i, :, n:] = float("nan")
        cache_v[i, :, n:] = float("nan")
    out = check_prefill_kv_lens(q, cache_k, cache_v, lens, causal=causal, what=f"kv_lens causal={causal}")
    assert not torch.isnan(out).any()
    # the same chunk through host-sliced keys: identical results (one kernel, one tile order)
    for i, n in enumerate(lens.tolist()):
        sliced = mn.flash_attn_prefill(q[i:i + 1], cache_k[i:i + 1, :, :n], cache_v[i:i + 1, :, :n], causal=causal)
        assert torch.equal(out[i:i + 1], sliced), f"sequence {i}: kv_lens and slicing differ"


def test_prefill_kv_lens_window_softcap_gqa_int64(device):
    q = randn(2, 8, 17, 64, dtype=torch.float16, device=device)
    cache_k = randn(2, 1, 70, 64, dtype=torch.float16, device=device)
    cache_v = randn(2, 1, 70, 64, dtype=torch.float16, device=device)
    lens = torch.tensor([17, 66], dtype=torch.int64, device=device)
    cache_k[0, :, 17:] = float("nan")
    cache_v[1, :, 66:] = float("nan")
    check_prefill_kv_lens(q, cache_k, cache_v, lens, window=20, softcap=30.0, what="kv_lens window softcap")


def test_prefill_kv_lens_errors():
    q = torch.ones(2, 2, 4, 64)
    kc = torch.ones(2, 2, 10, 64)
    with pytest.raises(mn.InvalidArgumentError, match=r"flash_attn_prefill: kv_lens\[1\] = 11 is out of range"):
        mn.flash_attn_prefill(q, kc, kc, causal=True, kv_lens=torch.tensor([4, 11], dtype=torch.int32))
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: kv_lens"):
        mn.flash_attn_prefill(q, kc, kc, causal=True, kv_lens=torch.tensor([4], dtype=torch.int32))
    with pytest.raises(mn.UnsupportedDTypeError, match="flash_attn_prefill: kv_lens"):
        mn.flash_attn_prefill(q, kc, kc, causal=True, kv_lens=torch.tensor([4.0, 5.0]))
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: mask and kv_lens together"):
        mn.flash_attn_prefill(q, kc, kc, mask=torch.ones(4, 10, dtype=torch.bool),
                              kv_lens=torch.tensor([4, 5], dtype=torch.int32))


def test_prefill_custom_scale(device):
    q, k, v = make_qkv(1, 2, 1, 20, 20, 64, torch.bfloat16, device)
    check_prefill(q, k, v, scale=0.37, causal=True, what="scale")


@pytest.mark.parametrize("lq,lk", [(33, 33), (7, 40)])
@pytest.mark.parametrize("ratio", [1, 4])
def test_prefill_matches_torch_sdpa(device, lq, lk, ratio):
    q, k, v = make_qkv(2, 8, 8 // ratio, lq, lk, 64, torch.bfloat16, device)
    o_ref, _ = oracle(q, k, v, 0.125)
    theirs = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert_agrees_with(mn.flash_attn_prefill(q, k, v), theirs, o_ref, what="vs torch sdpa")
    # torch's is_causal is top-left aligned: compare through an explicit bottom-right mask
    vis = ref.visible_positions(lq, lk, True, None, device)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=vis, enable_gqa=True)
    o_ref, _ = oracle(q, k, v, 0.125, causal=True)
    assert_agrees_with(mn.flash_attn_prefill(q, k, v, causal=True), theirs, o_ref, what="causal vs torch sdpa")


# --------------------------------------------------------------------------- MLX

def mlx_sdpa(q, k, v, scale, mask):
    m = mask
    if isinstance(mask, torch.Tensor):
        m = mx.array(mask.cpu().numpy()) if mask.dtype == torch.bool else mlx_array(mask)
    return from_mlx(mx.fast.scaled_dot_product_attention(mlx_array(q), mlx_array(k), mlx_array(v), scale=scale,
                                                         mask=m))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("lq,lk", [(1, 50), (4, 50), (37, 37), (20, 63)])
@pytest.mark.parametrize("mask_kind", [None, "causal", "bool", "additive"])
def test_sdpa_matches_mlx(device, dtype, lq, lk, mask_kind):
    b, hq, hkv, d = 2, 8, 2, 64
    q, k, v = make_qkv(b, hq, hkv, lq, lk, d, dtype, device)
    scale = d ** -0.5
    mask = mask_kind
    if mask_kind == "bool":
        mask = torch.rand(b, 1, lq, lk, device=device) > 0.3
    elif mask_kind == "additive":
        mask = randn(lq, lk, dtype=dtype, device=device)
    ours = mn.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
    theirs = mlx_sdpa(q, k, v, scale, mask)
    o_ref, _ = oracle(q, k, v, scale, causal=mask_kind == "causal",
                      mask=mask if isinstance(mask, torch.Tensor) else None)
    assert_agrees_with(ours, theirs, o_ref, what=f"vs MLX {mask_kind}")


# --------------------------------------------------------------------------- decode

def decode_oracle(q, kc, vc, lens, scale, window=None, softcap=None):
    return ref.flash_attn_decode(q.double(), kc.double(), vc.double(), lens, scale, window, softcap)


def decode_baseline(q, kc, vc, lens, scale, window=None, softcap=None):
    """Low-precision baseline: the naive attention of each sequence over its own visible keys."""
    outs = []
    pos, valid = ref.slot_positions(lens, kc.shape[2], window is not None)
    for b in range(q.shape[0]):
        order = torch.argsort(torch.where(valid[b], pos[b], pos.new_tensor(-1)))
        keep = order[valid[b][order]]  # slots of this sequence ordered by position
        outs.append(lowp_attention(q[b:b + 1], kc[b:b + 1, :, keep], vc[b:b + 1, :, keep], scale, True, None, window,
                                   softcap) if keep.numel() else torch.zeros_like(q[b:b + 1]))
    return torch.cat(outs)


def check_decode(q, kc, vc, lens, *, window=None, softcap=None, what=""):
    scale = q.shape[-1] ** -0.5
    out = mn.flash_attn_decode(q, kc, vc, lens, window=window, softcap=softcap)
    assert out.shape == q.shape and out.dtype == q.dtype
    o_ref = decode_oracle(q, kc, vc, lens, scale, window, softcap)
    assert_error_bar(out, o_ref, decode_baseline(q, kc, vc, lens, scale, window, softcap), what=what)
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("ratio", [1, 4, 8])
def test_decode_ragged_lengths(device, dtype, ratio):
    b, hq, cap, d = 4, 8, 160, 64
    q = randn(b, hq, 1, d, dtype=dtype, device=device)
    kc, vc = (randn(b, hq // ratio, cap, d, dtype=dtype, device=device) for _ in range(2))
    lens = torch.tensor([1, 7, 160, 97], dtype=torch.int32, device=device)
    check_decode(q, kc, vc, lens, what=f"decode ratio {ratio}")


@pytest.mark.parametrize("d", [64, 80, 128, 256, 512])
def test_decode_head_dims(device, d):
    q = randn(2, 4, 1, d, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(2, 1, 70, d, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor([70, 33], dtype=torch.int32, device=device)
    check_decode(q, kc, vc, lens, softcap=20.0, what=f"decode D={d}")


@pytest.mark.parametrize("lq", [2, 5])
def test_decode_few_query_tokens(device, lq):
    q = randn(3, 8, lq, 64, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(3, 2, 90, 64, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor([lq, 50, 90], dtype=torch.int64, device=device)
    check_decode(q, kc, vc, lens, what="speculative")
    check_decode(q, kc, vc, lens, window=17, what="speculative + window")


@pytest.mark.parametrize("splits", [1, 3, 7])
def test_decode_forced_split_counts(device, splits, monkeypatch):
    """Fixed-length splits: short sequences leave trailing splits empty; every count gives the same result."""
    from mlx_native.ops.attention import decode as dec
    from mlx_native.runtime.plans import clear_all

    from mlx_native.ops.attention import stream

    monkeypatch.setattr(dec, "SPLITS_OVERRIDE", splits)
    monkeypatch.setattr(stream, "STREAM_OVERRIDE", False)  # batches take the stream-K kernel by default
    clear_all()
    try:
        q = randn(3, 4, 1, 64, dtype=torch.bfloat16, device=device)
        kc, vc = (randn(3, 2, 200, 64, dtype=torch.bfloat16, device=device) for _ in range(2))
        lens = torch.tensor([200, 17, 96], dtype=torch.int32, device=device)
        check_decode(q, kc, vc, lens, what=f"{splits} splits")
        check_decode(q, kc[:, :, :64], vc[:, :, :64], torch.tensor([64, 300, 100], dtype=torch.int32, device=device),
                     window=40, what=f"{splits} splits ring")
    finally:
        clear_all()


def _decode_plan(q, kc, vc, lens, *, fused=True, window=0, splits=4):
    """A DecodePlan built directly (not through the plan cache), with the fused merge or the second launch
    (programmatic dependent where the device has it); ``splits`` forces the split count (capped at one key tile
    per split) so small shapes split on the GPU too."""
    from mlx_native.ops.attention import decode as dec

    saved = dec.MERGE_OVERRIDE, dec.SPLITS_OVERRIDE
    dec.MERGE_OVERRIDE, dec.SPLITS_OVERRIDE = "fused" if fused else "pdl", splits
    try:
        return dec.DecodePlan(q, kc, vc, lens, window=window, softcap=0.0)
    finally:
        dec.MERGE_OVERRIDE, dec.SPLITS_OVERRIDE = saved


def test_decode_merge_mode_rule(monkeypatch):
    """One program per SM at most (batch 1): a second launch, PDL where the device has it; larger grids fuse;
    an override wins, and falls back to a plain launch where its mode is not available."""
    from mlx_native.ops.attention import decode as dec

    cpu = torch.device("cpu")
    assert dec.merge_mode(128, 132, cpu) == "launch"  # no PDL off CUDA
    assert dec.merge_mode(133, 132, cpu) == "fused"
    monkeypatch.setattr(dec, "MERGE_OVERRIDE", "fused")
    assert dec.merge_mode(1, 132, cpu) == "fused"
    monkeypatch.setattr(dec, "MERGE_OVERRIDE", "pdl")
    assert dec.merge_mode(1000, 132, cpu) == "launch"


def test_decode_fused_merge_rearms_its_counters(device):
    """One launch: the last split of each (sequence, KV head, row block) merges and leaves its counter at 0."""
    b, hq, hkv, cap, d = 3, 8, 2, 200, 64
    q = randn(b, hq, 1, d, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor([200, 90, 130], dtype=torch.int32, device=device)
    plan = _decode_plan(q, kc, vc, lens)
    assert plan.splits > 1 and plan.reduce is None
    assert plan.counters.shape == (b * hkv, 1) and plan.counters.dtype == torch.int32
    out = plan(q, kc, vc, lens, d ** -0.5, 0.0)
    assert torch.equal(plan.counters, torch.zeros_like(plan.counters))
    scale = d ** -0.5
    assert_error_bar(out, decode_oracle(q, kc, vc, lens, scale), decode_baseline(q, kc, vc, lens, scale),
                     what="fused merge")


def test_decode_fused_merge_repeated_calls(device):
    """The counters carry over between calls of one plan: new lengths on every call, each result exact."""
    b, hq, hkv, cap, d = 2, 8, 1, 160, 64
    q = randn(b, hq, 2, d, dtype=torch.float16, device=device)  # Lq = 2: 16 packed rows, one row block
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.float16, device=device) for _ in range(2))
    plan = _decode_plan(q, kc, vc, torch.ones(b, dtype=torch.int32, device=device))
    assert plan.splits > 1 and plan.counters is not None
    scale = d ** -0.5
    for n in ([160, 70], [33, 160], [2, 100], [160, 160]):
        lens = torch.tensor(n, dtype=torch.int32, device=device)
        out = plan(q, kc, vc, lens, scale, 0.0)
        assert_error_bar(out, decode_oracle(q, kc, vc, lens, scale), decode_baseline(q, kc, vc, lens, scale),
                         what=f"call with lengths {n}")
        assert not plan.counters.any()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("window", [0, 200])
@pytest.mark.parametrize("shorten", [True, False])
def test_decode_splits_left_empty_by_short_sequences(device, fused, window, shorten, monkeypatch):
    """Sequences of 0-2 positions hold one split's worth of keys. Fused: only the live splits run, and a
    sequence with one writes its output directly (0 positions: zeros); two-kernel merge (the benchmark's
    comparison): every split writes a partial, empty ones ``lse = -inf``. With and without splits shortened
    to the sequence (150 positions: several short live splits), each gives the reference result."""
    from mlx_native.ops.attention import decode as dec

    monkeypatch.setattr(dec, "SHORTEN_SPLITS", shorten)
    b, hq, hkv, cap, d = 5, 4, 2, 400, 64
    q = randn(b, hq, 1, d, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor([1, 400, 0, 2, 150], dtype=torch.int32, device=device)
    plan = _decode_plan(q, kc, vc, lens, fused=fused, window=window)
    assert plan.splits > 2 and (plan.counters is not None) == fused and (plan.reduce is None) == fused
    scale = d ** -0.5
    out = plan(q, kc, vc, lens, scale, 0.0)
    w = window or None
    assert_error_bar(out, decode_oracle(q, kc, vc, lens, scale, w), decode_baseline(q, kc, vc, lens, scale, w),
                     what=f"fused={fused} window={window}")
    assert (out[2] == 0).all()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("window", [0, 2000])
def test_decode_balances_ragged_batches(device, fused, window, monkeypatch):
    """Batch > 1: every split is about the batch's mean share (total / (B x ``BALANCE_SPLITS``), at most the
    span / ``BALANCE_SPLITS``, at least n / the plan's count), so the long sequence takes more splits than the mean
    and the short ones fewer. The two-kernel path shows which splits saw keys: their partial log-sum-exp is
    finite."""
    from mlx_native.ops.attention import decode as dec

    monkeypatch.setattr(dec, "BALANCE_SPLITS", 2)
    b, hq, hkv, cap, d = 4, 2, 1, 4096, 32
    q = randn(b, hq, 1, d, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.bfloat16, device=device) for _ in range(2))
    buffers = []
    real_empty = dec.empty
    monkeypatch.setattr(dec, "empty", lambda *a, **kw: buffers.append(real_empty(*a, **kw)) or buffers[-1])
    scale = d ** -0.5
    w = window or None
    for lens, expected in (([4096, 300, 100, 1500], {16: [4, 1, 1, 2], 64: [4, 1, 1, 2]} if window == 0 else
                            {16: [4, 1, 1, 4], 64: [4, 1, 1, 3]}),
                           ([4096] * 4, {16: [2] * 4, 64: [2] * 4})):  # equal lengths: BALANCE_SPLITS splits each
        lens = torch.tensor(lens, dtype=torch.int32, device=device)
        plan = _decode_plan(q, kc, vc, lens, fused=fused, window=window, splits=4)
        assert plan.splits == 4
        expected = expected[plan.launch.constexprs["BLOCK_N"]]  # interpreter 16-key tiles, GPU 64
        buffers.clear()
        out = plan(q, kc, vc, lens, scale, 0.0)
        assert_error_bar(out, decode_oracle(q, kc, vc, lens, scale, w), decode_baseline(q, kc, vc, lens, scale, w),
                         what=f"fused={fused} window={window}")
        if fused:
            assert not plan.counters.any()
        else:
            seen = torch.isfinite(buffers[2].view(plan.splits, b, hq)[:, :, 0]).sum(0).tolist()  # splits per seq
            # window 0: share cdiv(5996, 4 x 2) = 750 -> 752 / 768 positions (16 / 64-key tiles), the long
            # sequence 4096 / 4 splits; window 2000: visible 2000 / 300 / 100 / 1500, share cdiv(3900, 8) = 488
            # -> 496 / 512 (the long one: 2000 / 4 -> 512); equal lengths: span / 2
            assert seen == expected, seen


def _stream_plan(q, kc, vc, lens, *, programs, window=0, softcap=0.0):
    """A StreamPlan built directly with ``programs`` programs (so small shapes share columns between programs)."""
    from mlx_native.ops.attention import stream

    saved = stream.PROGRAMS_OVERRIDE
    stream.PROGRAMS_OVERRIDE = programs
    try:
        return stream.StreamPlan(q, kc, vc, lens, window=window, softcap=softcap)
    finally:
        stream.PROGRAMS_OVERRIDE = saved


@pytest.mark.parametrize("programs", [1, 3, 7, 40, 300])
@pytest.mark.parametrize("case", ["ragged", "uniform", "window", "queries", "softcap"])
def test_decode_stream_k(device, programs, case):
    """Stream-K: the batch's key tiles in one equal share per program, columns shared by several programs merged
    by the last to arrive (its counter back at 0). Program counts from one (every column whole in one program)
    to more programs than tiles (most hold one tile or none); a sequence with no key gives zeros. Equal lengths
    (10 columns): shares that cross columns (3, 7, 300 programs) and shares aligned with them (1: all columns in
    one program; 40: four programs per column, the grid_programs case)."""
    b, hq, hkv, cap, d, lq = 5, 8, 2, 200, 64, 1
    lens, window, softcap = [200, 0, 37, 1, 130], None, None
    if case == "uniform":
        lens = [150] * b
    elif case == "window":
        lens, window, cap = [500, 0, 64, 3, 90], 40, 64  # a ring of 64 slots, wrapped more than once
    elif case == "queries":
        lq, lens, window = 3, [200, 0, 37, 4, 130], 50
    elif case == "softcap":
        hq, hkv, d, softcap = 6, 6, 80, 20.0  # no GQA, head dim not a power of two
    q = randn(b, hq, lq, d, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor(lens, dtype=torch.int32, device=device)
    plan = _stream_plan(q, kc, vc, lens, programs=programs, window=window or 0, softcap=softcap or 0.0)
    scale = d ** -0.5
    out = plan(q, kc, vc, lens, scale, softcap or 0.0)
    assert_error_bar(out, decode_oracle(q, kc, vc, lens, scale, window, softcap),
                     decode_baseline(q, kc, vc, lens, scale, window, softcap), what=f"{case}, {programs} programs")
    assert (out[1] == 0).all() or case == "uniform"
    assert not plan.counters.any()


def test_decode_stream_k_repeated_calls(device):
    """One plan, new lengths each call (as a CUDA-graph replay sees them): shares move between columns."""
    b, hq, hkv, cap, d = 3, 4, 1, 300, 64
    q = randn(b, hq, 2, d, dtype=torch.float16, device=device)
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.float16, device=device) for _ in range(2))
    plan = _stream_plan(q, kc, vc, torch.ones(b, dtype=torch.int32, device=device), programs=4)
    scale = d ** -0.5
    for n in ([300, 2, 150], [16, 17, 300], [0, 0, 2], [300, 300, 300]):
        lens = torch.tensor(n, dtype=torch.int32, device=device)
        out = plan(q, kc, vc, lens, scale, 0.0)
        assert_error_bar(out, decode_oracle(q, kc, vc, lens, scale), decode_baseline(q, kc, vc, lens, scale),
                         what=f"lengths {n}")
        assert not plan.counters.any()


def test_decode_stream_k_route(monkeypatch):
    """Batches of 16-bit queries whose caches hold >= MIN_CACHE_BYTES of K/V within the span take the stream-K
    kernel; batch 1, small caches or windows, fp32 and plans built inside a CUDA-graph capture (no counters can be
    zeroed there) take the split decode; the override wins where the kernel applies."""
    from mlx_native.ops.attention import stream

    q = torch.empty(8, 64, 1, 128, dtype=torch.bfloat16)
    cache = torch.empty(8, 8, 32768, 128, dtype=torch.bfloat16, device="meta")  # 1 GiB of K + V
    assert stream.use_stream(q, cache, 0) and stream.use_stream(q, cache[:, :, :8192], 0)  # 1 GiB, 256 MiB
    assert not stream.use_stream(q, cache[:, :, :8191], 0)
    assert not stream.use_stream(q, cache, 4096)  # the window bounds the span
    assert not stream.use_stream(q[:1], cache[:1], 0) and not stream.use_stream(q.float(), cache.float(), 0)
    monkeypatch.setattr(stream, "MIN_CACHE_BYTES", 2 << 30)
    assert not stream.use_stream(q, cache, 0)
    monkeypatch.setattr(stream, "MIN_CACHE_BYTES", 256 << 20)
    monkeypatch.setattr(stream, "can_fuse", lambda device: False)
    assert not stream.use_stream(q, cache, 0)
    monkeypatch.undo()
    monkeypatch.setattr(stream, "STREAM_OVERRIDE", True)
    assert stream.use_stream(q[:1], cache[:1, :, :16], 0) and not stream.use_stream(q.float(), cache.float(), 0)
    monkeypatch.setattr(stream, "STREAM_OVERRIDE", False)
    assert not stream.use_stream(q, cache, 0)


def test_decode_stream_k_public_op(device, monkeypatch):
    """flash_attn_decode routes to the stream-K plan (forced here: the shapes are small) and gives the split
    decode's result."""
    from mlx_native.ops.attention import stream
    from mlx_native.runtime.plans import clear_all

    q = randn(3, 8, 1, 64, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(3, 2, 120, 64, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor([120, 33, 0], dtype=torch.int32, device=device)
    outs = {}
    for forced in (True, False):
        monkeypatch.setattr(stream, "STREAM_OVERRIDE", forced)
        clear_all()
        outs[forced] = check_decode(q, kc, vc, lens, what=f"stream={forced}")
    clear_all()
    torch.testing.assert_close(outs[True], outs[False], rtol=2 ** -6, atol=2 ** -8)


def test_decode_stream_k_grid():
    """The grid aligns with the columns when that keeps >= 90% of the resident programs."""
    from mlx_native.ops.attention.stream import grid_programs

    assert grid_programs(64, 132) == 128  # B8 Hkv8: two programs per column
    assert grid_programs(256, 132) == 128  # B32 Hkv8: two columns per program
    assert grid_programs(16, 132) == 128
    assert grid_programs(67, 132) == 132  # aligned would be 67 programs
    assert grid_programs(264, 132) == 132
    assert grid_programs(10, 7) == 7  # 5 programs of two columns: too few
    assert grid_programs(200, 132) == 132


def test_decode_stream_k_tile_ranges():
    """The int32 share arithmetic: program p holds tiles [p T // P, (p + 1) T // P) without forming p T, and the
    owner of a tile is found from an fp32 estimate, for totals past 2^31 / P."""
    import numpy as np

    def tile_range(p, P, total):  # the kernel's formula, in Python ints
        share, extra = total // P, total % P
        lo = p * share + p * extra // P
        return lo, lo + share + ((p + 1) * extra // P - p * extra // P)

    def owner(t, P, total):
        p = min(max(int(np.float32(np.float32(t + 1) * np.float32(P) / np.float32(total))), 0), P - 1)
        lo, hi = tile_range(p, P, total)
        return p - 1 if lo > t else p + 1 if hi <= t else p

    rng = np.random.default_rng(0)
    for P in (1, 5, 132, 264, 1056):
        for total in (1, 3, P - 1 or 1, P, 16384, 2 ** 22 + 7, int(rng.integers(1, 2 ** 24))):
            for p in {0, P // 2, P - 1}:
                assert tile_range(p, P, total) == (p * total // P, (p + 1) * total // P)
            for t in {0, total - 1, *rng.integers(0, total, 50).tolist()}:
                assert owner(t, P, total) == ((t + 1) * P - 1) // total


def test_batch1_tile_config_by_device():
    """Batch-1 decode takes three stages of 64-key tiles on the H100 and four on the H200 (session 33 run 4); other
    batches and head dims do not depend on the device."""
    from mlx_native.ops.attention import decode as dec

    assert dec.tile_config(128, 32768, torch.bfloat16, 1, "NVIDIA H100 80GB HBM3") == (64, 4, 3)
    assert dec.tile_config(128, 32768, torch.bfloat16, 1, "NVIDIA H200") == (64, 4, 4)
    for b, d in ((8, 128), (1, 256)):
        assert dec.tile_config(d, 32768, torch.bfloat16, b, "NVIDIA H200") == dec.tile_config(d, 32768,
                                                                                           torch.bfloat16, b)


def _h100_splits(b, hkv, kv, d=128, g=8):
    """Effective split count the plan would use on a 132-SM H100 (bf16, one query token)."""
    from mlx_native.ops.attention import decode as dec

    block_d = max(16, 1 << (d - 1).bit_length())
    block_m = min(dec.MAX_BLOCK_M, max(16, 1 << (g - 1).bit_length()))
    block_n, _, stages = dec.tile_config(block_d, kv, torch.bfloat16, b)
    slots = 132 * dec.occupancy(block_m, block_n, block_d, stages, 2)
    splits = dec.num_splits(b * hkv, kv, block_n, sms=132, slots=slots, batch=b, on_cuda=True)
    return dec.split_layout(kv, splits, block_n)[1]


@pytest.mark.parametrize("b, kv, d, expected", [
    # measured on the H100 (bench/results/2026-11-22-h100-attention/NOTES.md, session 7): the best forced count
    (1, 8192, 128, 16), (1, 32768, 128, 16), (1, 131072, 128, 16),
    # from 16k positions, 128-key tiles (one program per SM): 8 splits, balanced to a mean of 4 per sequence
    # (session 7: 360.2 us uniform, 202.5 ragged 1k-32k, against 372.1 / 201.8 with 64-key tiles and 16 splits)
    (8, 32768, 128, 8),
    # session 5 (bench/decode_small.py): 8 splits of 128 positions, 8.75 / 12.0 us vs 9.73 / 13.9 with 4
    (1, 1024, 128, 8), (1, 1024, 256, 8),
    (1, 256, 64, 2),  # a short sequence in it runs one live split (3.3-3.4 us at kv 16, whatever the count)
    (32, 32768, 128, 2), (32, 131072, 128, 2), (8, 131072, 128, 8),  # session 7: 0.99-1.00x cuDNN
    # not measured with forced counts: what the rule predicts
    (8, 1024, 128, 2), (8, 8192, 128, 4),
    (32, 1024, 128, 1), (32, 8192, 128, 4),
    (1, 32768, 256, 16), (1, 131072, 256, 16), (8, 32768, 256, 16), (32, 8192, 256, 4),
])
def test_decode_split_heuristic(b, kv, d, expected):
    """Fill (one program per SM at batch 1), ragged balance (~16 splits of >= 2048 positions at batch > 1)."""
    hkv, g = (8, 8) if d == 128 else (8, 2)
    assert _h100_splits(b, hkv, kv, d, g) == expected


def test_decode_split_rule_parts():
    from mlx_native.ops.attention import decode as dec

    slots = 132 * dec.occupancy(16, 64, 128, 4, 2)
    assert slots == 264  # H100, bf16, D=128: two programs per SM

    def rule(base, span, batch):
        return dec.num_splits(base, span, 64, sms=132, slots=slots, batch=batch, on_cuda=True)

    assert rule(8, 32768, 1) == 16  # batch 1: 128 programs, one per SM (not 33 = one wave of slots)
    assert rule(64, 32768, 1) == 2  # one long sequence over 64 programs per split: fill only
    assert rule(64, 32768, 8) == 16  # batch 8: ragged balance
    assert rule(16, 131072, 2) == 16  # batch 2: fill gives 8, balance caps at RAGGED_SPLITS
    assert rule(8, 2000, 1) == 16  # short caches: >= MIN_SPLIT_KEYS (128) positions per split ...
    assert rule(8, 1000, 1) == 8
    assert dec.MIN_SPLIT_KEYS == 128
    assert rule(64, 4096, 8) == 2  # ... and no ragged splits under RAGGED_MIN_KEYS positions
    assert rule(1024, 131072, 128) == 1  # batch 128: base alone is ~4 programs per slot, no split
    assert rule(1, 1 << 20, 1) == dec.MAX_SPLITS
    assert dec.split_layout(32768, 33, 64) == (1024, 32)  # a rounded-up chunk gives fewer splits
    assert dec.split_layout(131072, 33, 64) == (4032, 33)


def test_decode_split_override(monkeypatch):
    """SPLITS_OVERRIDE wins on every path, capped at one BLOCK_N tile per split."""
    from mlx_native.ops.attention import decode as dec

    monkeypatch.setattr(dec, "SPLITS_OVERRIDE", 33)
    for on_cuda in (True, False):
        assert dec.num_splits(8, 131072, 64, sms=132, slots=264, batch=1, on_cuda=on_cuda) == 33
        assert dec.num_splits(64, 32768, 64, sms=132, slots=264, batch=8, on_cuda=on_cuda) == 33
        assert dec.num_splits(8, 100, 64, sms=132, slots=264, batch=1, on_cuda=on_cuda) == 2


def test_decode_empty_sequence_is_zero(device):
    q = randn(2, 4, 1, 64, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(2, 4, 40, 64, dtype=torch.bfloat16, device=device) for _ in range(2))
    out = mn.flash_attn_decode(q, kc, vc, torch.tensor([0, 40], dtype=torch.int32, device=device))
    assert (out[0] == 0).all() and not torch.isnan(out).any()


@pytest.mark.parametrize("lq", [1, 3])
def test_decode_equals_last_rows_of_prefill(device, lq):
    b, hq, hkv, n, d = 2, 4, 1, 77, 128
    q, k, v = make_qkv(b, hq, hkv, n, n, d, torch.bfloat16, device)
    full = mn.flash_attn_prefill(q, k, v, causal=True, softcap=30.0)
    cap = 100
    kc = torch.zeros(b, hkv, cap, d, dtype=torch.bfloat16, device=device)
    vc = torch.zeros_like(kc)
    kc[:, :, :n], vc[:, :, :n] = k, v
    lens = torch.full((b,), n, dtype=torch.int32, device=device)
    dec = mn.flash_attn_decode(q[:, :, -lq:], kc, vc, lens, softcap=30.0)
    o_ref = decode_oracle(q[:, :, -lq:], kc, vc, lens, d ** -0.5, None, 30.0)
    # both within the error bar of the same oracle, and close to each other
    assert_error_bar(dec, o_ref, full[:, :, -lq:])
    torch.testing.assert_close(dec.float(), full[:, :, -lq:].float(), rtol=0, atol=2 * 2 ** -8 * 4)


@pytest.mark.parametrize("window,cap", [(16, 16), (16, 20), (40, 64)])
def test_ring_buffer_wraparound(device, window, cap):
    """Tokens written step by step into a ring; decode equals windowed prefill on the whole sequence."""
    b, hq, hkv, d, n = 2, 4, 2, 64, 70
    q, k, v = make_qkv(b, hq, hkv, n, n, d, torch.bfloat16, device)
    full = mn.flash_attn_prefill(q, k, v, window=window)
    cache = mn.KVCache(b, hkv, d, cap, window=window, dtype=torch.bfloat16, device=device)
    cache.write(k[:, :, :30], v[:, :, :30])  # a prompt longer than the ring
    assert cache.lens.tolist() == [30, 30]
    for t in range(30, n):
        cache.write(k[:, :, t:t + 1], v[:, :, t:t + 1])
        if t in (30, 47, n - 1):
            out = cache.attend(q[:, :, t:t + 1])
            o_ref, _ = oracle(q[:, :, :t + 1], k[:, :, :t + 1], v[:, :, :t + 1], d ** -0.5, window=window)
            assert_error_bar(out, o_ref[:, :, -1:], full[:, :, t:t + 1], what=f"ring step {t}")
    assert cache.lens.tolist() == [n, n]


# --------------------------------------------------------------------------- decode with append and RoPE

def _rope_tuple(spec, dtype=None):
    if spec is None:
        return None
    freqs = spec.freqs if spec.freqs is None or dtype is None else spec.freqs.to(dtype)
    return (spec.dims, spec.traditional, spec.base, spec.scale, freqs)


def check_append(b, hq, hkv, cap, d, lq, lens, *, dtype=torch.bfloat16, device="cpu", window=None, softcap=None,
                 rope=None, what=""):
    """One fused call (rotate q / k_new, write k_new / v_new, attend) against the fp64 oracle of the same steps,
    the same steps in the low dtype as baseline, and the caches the reference path leaves."""
    q = randn(b, hq, lq, d, dtype=dtype, device=device)
    kv = randn(b, 2 * hkv, lq, d, dtype=dtype, device=device)
    kn, vn = kv[:, :hkv], kv[:, hkv:]  # strided, as slices of a fused projection
    kc, vc = (randn(b, hkv, cap, d, dtype=dtype, device=device) for _ in range(2))
    lens = torch.tensor(lens, dtype=torch.int32, device=device)
    scale = d ** -0.5
    kc1, vc1 = kc.clone(), vc.clone()
    out = mn.flash_attn_decode(q, kc1, vc1, lens, k_new=kn, v_new=vn, rope=rope, window=window, softcap=softcap)
    assert out.shape == q.shape and out.dtype == q.dtype
    kc2, vc2 = kc.clone(), vc.clone()
    with mn.use_backend("reference"):
        mn.flash_attn_decode(q, kc2, vc2, lens, k_new=kn, v_new=vn, rope=rope, window=window, softcap=softcap)
    o_ref = ref.flash_attn_decode_append(q.double(), kc.double(), vc.double(), lens, kn.double(), vn.double(),
                                         scale, window, softcap, _rope_tuple(rope, torch.float64))
    # baseline: the same steps in the low dtype (rotation rounded to it), then the naive attention
    kc3 = kc.clone()
    vc3 = vc.clone()
    if rope is not None:
        pos = lens.long()[:, None, None] + torch.arange(lq, device=device)
        args = (rope.dims, rope.traditional, rope.base, rope.scale)
        qb = rope_ref.rope(q, *args, freqs=rope.freqs, positions=pos)
        kb = rope_ref.rope(kn, *args, freqs=rope.freqs, positions=pos)
    else:
        qb, kb = q, kn
    ref.kv_cache_write(kc3, vc3, lens, kb, vn, None, window is not None)
    base = decode_baseline(qb, kc3, vc3, lens + lq, scale, window, softcap)
    assert_error_bar(out, o_ref, base, what=what)
    assert torch.equal(vc1, vc2), f"{what}: V cache differs from the reference"
    # rotated K rows may round an ulp apart (polynomial sin/cos; fp32 sees its cancellation in a c - b s)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(kc1.float(), kc2.float(), rtol=2 * eps, atol=8 * eps * kc2.abs().max().item(),
                               msg=lambda m: f"{what}: K cache {m}")
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("lq", [1, 3])
def test_decode_append_rope(device, dtype, lq):
    spec = mn.RopeSpec(64, base=10000.0)
    check_append(3, 8, 2, 96, 64, lq, [0, 41, 96 - lq], dtype=dtype, device=device, rope=spec,
                 what=f"append+rope {dtype} lq={lq}")


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("d,dims", [(64, 32), (80, 80), (128, 128)])
def test_decode_append_rope_layouts(device, traditional, d, dims):
    """Partial rotary dims, odd head dims (padded tiles) and both pair layouts; scale and MLX freqs."""
    spec = mn.RopeSpec(dims, base=500000.0, traditional=traditional, scale=0.25)
    check_append(2, 4, 1, 70, d, 1, [69, 5], device=device, rope=spec, what=f"rope D={d} dims={dims}")
    freqs = (torch.rand(dims // 2) * 50 + 1).to(device)
    check_append(2, 4, 1, 70, d, 2, [17, 30], device=device, rope=mn.RopeSpec(dims, traditional=traditional,
                                                                                freqs=freqs), what="rope freqs")
    strided = torch.stack([freqs, -freqs], -1)[:, 0]  # every other element of a buffer
    check_append(2, 4, 1, 70, d, 1, [9, 30], device=device, rope=mn.RopeSpec(dims, traditional=traditional,
                                                                               freqs=strided), what="strided freqs")


@pytest.mark.parametrize("window,cap", [(16, 20), (40, 64)])
def test_decode_append_ring(device, window, cap):
    """Sliding-window layers: the new token goes to slot pos % capacity; older slots are overwritten."""
    check_append(3, 8, 2, cap, 64, 1, [0, 57, 200], device=device, window=window, rope=mn.RopeSpec(64),
                 what=f"ring window {window}")
    check_append(2, 4, 2, cap, 64, 3, [cap - 3, 101], device=device, window=window, softcap=30.0,
                 what="ring lq=3 softcap")


def test_decode_append_without_rope_and_rope_only(device):
    check_append(2, 8, 8, 48, 64, 1, [0, 47], device=device, what="append, no rope")
    # rope without k_new: queries at kv_lens - Lq + i over a filled cache
    q = randn(2, 8, 2, 64, dtype=torch.bfloat16, device=device)
    kc, vc = (randn(2, 2, 40, 64, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor([2, 33], dtype=torch.int32, device=device)
    spec = mn.RopeSpec(64, base=1000.0)
    out = mn.flash_attn_decode(q, kc, vc, lens, rope=spec)
    pos = lens.long()[:, None, None] - 2 + torch.arange(2, device=device)
    q_rot = mn.rope(q, 64, base=1000.0, positions=pos)
    o_ref = decode_oracle(rope_ref.rope(q.double(), 64, False, 1000.0, 1.0, positions=pos), kc, vc, lens, 0.125)
    assert_error_bar(out, o_ref, decode_baseline(q_rot, kc, vc, lens, 0.125), what="rope only")


@pytest.mark.parametrize("splits", [1, 3])
def test_decode_append_split_counts(device, splits, monkeypatch):
    """The last live split takes the new tokens, whatever the split count and the cached length."""
    from mlx_native.ops.attention import decode as dec
    from mlx_native.runtime.plans import clear_all

    monkeypatch.setattr(dec, "SPLITS_OVERRIDE", splits)
    clear_all()
    try:
        check_append(4, 4, 2, 120, 64, 1, [0, 16, 63, 119], device=device, rope=mn.RopeSpec(64),
                     what=f"{splits} splits")
    finally:
        clear_all()


def test_decode_append_steps_equal_prefill(device):
    """Token-by-token fused decode over a prompt equals causal prefill of the rotated sequence."""
    b, hq, hkv, d, n, cap = 2, 8, 2, 64, 24, 32
    spec = mn.RopeSpec(64, base=10000.0)
    q, k, v = make_qkv(b, hq, hkv, n, n, d, torch.bfloat16, device)
    pos = torch.arange(n, device=device)
    q_rot = mn.rope(q, 64, positions=pos)
    k_rot = mn.rope(k, 64, positions=pos)
    full = mn.flash_attn_prefill(q_rot, k_rot, v, causal=True)
    kc = torch.zeros(b, hkv, cap, d, dtype=torch.bfloat16, device=device)
    vc = torch.zeros_like(kc)
    lens = torch.zeros(b, dtype=torch.int32, device=device)
    for t in range(n):
        out = mn.flash_attn_decode(q[:, :, t:t + 1], kc, vc, lens, k_new=k[:, :, t:t + 1], v_new=v[:, :, t:t + 1],
                                   rope=spec)
        lens += 1
        if t in (0, 7, n - 1):
            o_ref, _ = oracle(q_rot[:, :, :t + 1], k_rot[:, :, :t + 1], v[:, :, :t + 1], d ** -0.5, causal=True)
            assert_error_bar(out, o_ref[:, :, -1:], full[:, :, t:t + 1], what=f"step {t}")
    torch.testing.assert_close(kc[:, :, :n].float(), k_rot.float(), rtol=2 ** -7, atol=2 ** -8)
    assert torch.equal(vc[:, :, :n], v)


def test_decode_append_bad_input(device):
    q = torch.zeros(2, 8, 1, 64, dtype=torch.bfloat16, device=device)
    kc = torch.zeros(2, 2, 16, 64, dtype=torch.bfloat16, device=device)
    vc = torch.zeros_like(kc)
    kn = torch.zeros(2, 2, 1, 64, dtype=torch.bfloat16, device=device)
    lens = torch.tensor([3, 4], dtype=torch.int32, device=device)
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: k_new and v_new go together"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn)
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: k_new has shape"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn[:, :1], v_new=kn[:, :1])
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: v_new has shape"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn, v_new=torch.zeros(2, 2, 2, 64, dtype=kn.dtype, device=device))
    with pytest.raises(mn.UnsupportedDTypeError, match="flash_attn_decode"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn.half(), v_new=kn.half())
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: dims must be a positive even number"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn, v_new=kn, rope=mn.RopeSpec(33))
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: dims 128 is larger"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn, v_new=kn, rope=mn.RopeSpec(128))
    with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: rope must be an mn.RopeSpec"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn, v_new=kn, rope=64)
    with pytest.raises(mn.InvalidArgumentError, match="rope.freqs"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn, v_new=kn,
                             rope=mn.RopeSpec(64, freqs=torch.ones(31, device=device)))
    with pytest.raises(mn.InvalidArgumentError, match="rope.base"):
        mn.flash_attn_decode(q, kc, vc, lens, k_new=kn, v_new=kn, rope=mn.RopeSpec(64, base=-1.0))
    with pytest.raises(mn.InvalidArgumentError, match="cache too small: 20 new tokens"):
        q20 = torch.zeros(2, 8, 20, 64, dtype=torch.bfloat16, device=device)
        k20 = torch.zeros(2, 2, 20, 64, dtype=torch.bfloat16, device=device)
        mn.flash_attn_decode(q20, kc, vc, lens, k_new=k20, v_new=k20)
    if device == "cpu":  # value checks need no sync on the CPU only
        with pytest.raises(mn.InvalidArgumentError, match=r"kv_lens\[1\] = 16 is out of range; cache too small"):
            mn.flash_attn_decode(q, kc, vc, torch.tensor([3, 16], dtype=torch.int32), k_new=kn, v_new=kn)


# --------------------------------------------------------------------------- kv_cache_write / KVCache

@pytest.mark.parametrize("ring,l_new,with_n", [(False, 1, False), (False, 5, True), (False, 16, False),
                                                (True, 1, False), (True, 5, True), (True, 16, True),
                                                (True, 24, False), (True, 40, False)])
def test_kv_cache_write_matches_reference(device, ring, l_new, with_n):
    b, h, cap, d = 3, 2, 16, 40
    kc = randn(b, h, cap, d, dtype=torch.bfloat16, device=device)
    vc = randn(b, h, cap, d, dtype=torch.bfloat16, device=device)
    start = [0, 3, 11] if not ring else [0, 13, 40]
    if not ring:
        start = [min(s, cap - l_new) for s in start]
    lens = torch.tensor(start, dtype=torch.int32, device=device)
    base = randn(b, 2 * h, l_new, d, dtype=torch.bfloat16, device=device)
    kn, vn = base[:, :h], base[:, h:]  # strided new K/V
    n_new = torch.tensor([l_new, 0, max(l_new - 2, 0)], dtype=torch.int32, device=device) if with_n else None
    kc2, vc2, lens2 = kc.clone(), vc.clone(), lens.clone()
    mn.kv_cache_write(kc, vc, lens, kn, vn, ring=ring, n_new=n_new)
    with mn.use_backend("reference"):
        mn.kv_cache_write(kc2, vc2, lens2, kn, vn, ring=ring, n_new=n_new)
    assert torch.equal(kc, kc2) and torch.equal(vc, vc2) and torch.equal(lens, lens2)
    expect = torch.tensor(start, dtype=torch.int32) + (n_new.cpu() if with_n else l_new)
    assert lens.cpu().tolist() == expect.tolist()
    # independent check of one sequence: token i at slot (start + i) % cap
    for i in range(n_new[2].item() if with_n else l_new):
        slot = (start[2] + i) % cap if ring else start[2] + i
        if ring and i < (n_new[2].item() if with_n else l_new) - cap:
            continue
        assert torch.equal(kc[2, :, slot], kn[2, :, i])


def test_kv_cache_write_no_advance(device):
    cache = mn.KVCache(2, 2, 64, 32, dtype=torch.float16, device=device)
    x = randn(2, 2, 3, 64, dtype=torch.float16, device=device)
    cache.write(x, x, advance=False)
    assert cache.lens.tolist() == [0, 0] and torch.equal(cache.k[:, :, :3], x)
    cache.lens.add_(3)
    cache.write(x, -x)
    assert cache.lens.tolist() == [6, 6] and torch.equal(cache.v[:, :, 3:6], -x)
    k, v = cache.prefix(6)
    assert k.shape == (2, 2, 6, 64)
    cache.reset()
    assert cache.lens.tolist() == [0, 0]


def test_kv_cache_prefill_then_decode(device):
    """The model runner's flow: chunked prefill over the cache prefix, then decode steps."""
    b, hq, hkv, d = 2, 8, 2, 64
    cache = mn.KVCache(b, hkv, d, 64, dtype=torch.bfloat16, device=device)
    q, k, v = make_qkv(b, hq, hkv, 40, 40, d, torch.bfloat16, device)
    outs = []
    for lo, hi in ((0, 25), (25, 37)):
        cache.write(k[:, :, lo:hi], v[:, :, lo:hi])
        kp, vp = cache.prefix(hi)
        outs.append(mn.flash_attn_prefill(q[:, :, lo:hi], kp, vp, causal=True))
    for t in range(37, 40):
        cache.write(k[:, :, t:t + 1], v[:, :, t:t + 1])
        outs.append(cache.attend(q[:, :, t:t + 1]))
    got = torch.cat(outs, 2)
    o_ref, _ = oracle(q, k, v, d ** -0.5, causal=True)
    assert_error_bar(got, o_ref, lowp_attention(q, k, v, d ** -0.5, True))


def test_sdpa_routes_decode_shapes(device):
    q, k, v = make_qkv(2, 8, 2, 1, 77, 64, torch.bfloat16, device)
    out = mn.scaled_dot_product_attention(q, k, v, scale=0.125)
    o_ref, _ = oracle(q, k, v, 0.125)
    assert_error_bar(out, o_ref, lowp_attention(q, k, v, 0.125))
    q3 = randn(2, 8, 3, 64, dtype=torch.bfloat16, device=device)
    out = mn.scaled_dot_product_attention(q3, k, v, scale=0.125, mask="causal")
    o_ref, _ = oracle(q3, k, v, 0.125, causal=True)
    assert_error_bar(out, o_ref, lowp_attention(q3, k, v, 0.125, True))


def test_reference_backend_matches_kernel(device):
    q, k, v = make_qkv(1, 4, 2, 30, 41, 64, torch.float32, device)
    got = mn.flash_attn_prefill(q, k, v, causal=True)
    with mn.use_backend("reference"):
        expected = mn.flash_attn_prefill(q, k, v, causal=True)
    torch.testing.assert_close(got, expected, rtol=2e-5, atol=2e-5)


def test_empty_inputs(device):
    q = torch.empty(0, 4, 5, 64, device=device)
    assert mn.flash_attn_prefill(q, q[:, :2], q[:, :2]).shape == (0, 4, 5, 64)
    q = torch.empty(1, 4, 0, 64, device=device)
    out, lse = mn.flash_attn_prefill(q, q[:, :2], q[:, :2], return_lse=True)
    assert out.shape == (1, 4, 0, 64) and lse.shape == (1, 4, 0)


# --------------------------------------------------------------------------- bad input

class TestBadInput:
    def qkv(self, hq=8, hkv=2, d=64, lq=4, lk=6, dtype=torch.float16):
        return torch.ones(1, hq, lq, d, dtype=dtype), torch.ones(1, hkv, lk, d, dtype=dtype), \
            torch.ones(1, hkv, lk, d, dtype=dtype)

    def test_head_dim(self):
        for d in (520, 100, 4):
            q, k, v = self.qkv(d=d)
            with pytest.raises(mn.InvalidArgumentError, match=f"flash_attn_prefill: head dim {d} is not supported"):
                mn.flash_attn_prefill(q, k, v)
        q, k, v = self.qkv(d=1024)
        with pytest.raises(ValueError, match="flash_attn_decode: head dim 1024"):
            mn.flash_attn_decode(q, k, v, torch.ones(1, dtype=torch.int32))

    def test_gqa_ratio(self):
        q, k, v = self.qkv(hq=12, hkv=8)
        with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: k has 8 heads, which does not divide "
                                                          "q's 12 heads"):
            mn.flash_attn_prefill(q, k, v)
        with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: k_cache has 8 heads"):
            mn.flash_attn_decode(q, k, v, torch.ones(1, dtype=torch.int32))

    def test_mask_shape(self):
        q, k, v = self.qkv()
        for shape in ((4, 5), (2, 8, 4, 6), (1, 3, 4, 6), (1, 1, 1, 4, 6)):
            with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: mask"):
                mn.flash_attn_prefill(q, k, v, mask=torch.ones(shape, dtype=torch.bool))
        with pytest.raises(mn.UnsupportedDTypeError, match="flash_attn_prefill: mask has dtype int32"):
            mn.flash_attn_prefill(q, k, v, mask=torch.ones(4, 6, dtype=torch.int32))
        with pytest.raises(mn.InvalidArgumentError, match="the only string mask is 'causal'"):
            mn.scaled_dot_product_attention(q, k, v, scale=1.0, mask="full")

    def test_window(self):
        q, k, v = self.qkv()
        for w in (0, -3):
            with pytest.raises(mn.InvalidArgumentError, match=f"flash_attn_prefill: window must be > 0, got {w}"):
                mn.flash_attn_prefill(q, k, v, window=w)
            with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: window must be > 0"):
                mn.flash_attn_decode(q, k, v, torch.ones(1, dtype=torch.int32), window=w)
        with pytest.raises(mn.InvalidArgumentError, match="window must be an int"):
            mn.flash_attn_prefill(q, k, v, window=2.5)
        with pytest.raises(mn.InvalidArgumentError, match="KVCache: window must be a positive int"):
            mn.KVCache(1, 2, 64, window=0, device="cpu")
        with pytest.raises(mn.InvalidArgumentError, match="capacity 8 is smaller than the window 16"):
            mn.KVCache(1, 2, 64, 8, window=16, device="cpu")

    def test_softcap_and_scale(self):
        q, k, v = self.qkv()
        for cap in (0.0, -1.0, float("nan"), float("inf")):
            with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: softcap"):
                mn.flash_attn_prefill(q, k, v, softcap=cap)
        with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: scale must be a finite number"):
            mn.flash_attn_prefill(q, k, v, scale=float("nan"))
        with pytest.raises(mn.InvalidArgumentError, match="flash_attn_decode: scale must be > 0"):
            mn.flash_attn_decode(q, k, v, torch.ones(1, dtype=torch.int32), scale=-0.1)

    def test_dtype_mismatch(self):
        q, k, v = self.qkv()
        with pytest.raises(mn.UnsupportedDTypeError, match="flash_attn_prefill: k has dtype bfloat16 but q has "
                                                           "float16"):
            mn.flash_attn_prefill(q, k.bfloat16(), v)
        with pytest.raises(mn.UnsupportedDTypeError, match="flash_attn_decode: v_cache has dtype float32"):
            mn.flash_attn_decode(q, k, v.float(), torch.ones(1, dtype=torch.int32))
        with pytest.raises(mn.UnsupportedDTypeError, match="flash_attn_prefill: q has dtype float64"):
            mn.flash_attn_prefill(q.double(), k.double(), v.double())
        with pytest.raises(mn.UnsupportedDTypeError, match="kv_cache_write: k_new has dtype bfloat16 but k_cache"):
            mn.kv_cache_write(k, v, torch.zeros(1, dtype=torch.int32), k[:, :, :1].bfloat16(), v[:, :, :1].bfloat16())

    def test_shapes(self):
        q, k, v = self.qkv()
        with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: v has length 5 but k has 6"):
            mn.flash_attn_prefill(q, k, v[:, :, :5])
        with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: q must be 4-D"):
            mn.flash_attn_prefill(q[0], k, v)
        with pytest.raises(mn.InvalidArgumentError, match="flash_attn_prefill: k has batch 2 but q has 1"):
            mn.flash_attn_prefill(q, k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1))
        with pytest.raises(mn.InvalidArgumentError, match="contiguous last dim"):
            mn.flash_attn_prefill(q, k.transpose(2, 3), v)

    def test_kv_lens(self):
        q, k, v = self.qkv()
        with pytest.raises(mn.UnsupportedDTypeError, match="flash_attn_decode: kv_lens has dtype float32"):
            mn.flash_attn_decode(q, k, v, torch.ones(1))
        with pytest.raises(mn.InvalidArgumentError, match=r"flash_attn_decode: kv_lens has shape \(2,\), expected "
                                                          r"\(1,\)"):
            mn.flash_attn_decode(q, k, v, torch.ones(2, dtype=torch.int32))
        with pytest.raises(mn.DeviceMismatchError, match="flash_attn_decode: kv_lens is on meta"):
            mn.flash_attn_decode(q, k, v, torch.ones(1, dtype=torch.int32, device="meta"))
        for bad in (-1, 7):  # capacity 6
            with pytest.raises(mn.InvalidArgumentError, match=rf"flash_attn_decode: kv_lens\[0\] = {bad} is out of "
                                                              "range"):
                mn.flash_attn_decode(q, k, v, torch.tensor([bad], dtype=torch.int32))

    def test_devices(self):
        q, k, v = self.qkv()
        with pytest.raises(mn.DeviceMismatchError, match="flash_attn_prefill: v is on meta"):
            mn.flash_attn_prefill(q, k, v.to("meta"))

    def test_cache_too_small(self):
        kc = torch.zeros(1, 2, 8, 64)
        with pytest.raises(mn.InvalidArgumentError, match="kv_cache_write: cache too small: 9 new tokens do not fit "
                                                          "in a linear cache of capacity 8"):
            mn.kv_cache_write(kc, kc.clone(), torch.zeros(1, dtype=torch.int32), torch.ones(1, 2, 9, 64),
                              torch.ones(1, 2, 9, 64))
        with pytest.raises(mn.InvalidArgumentError, match="kv_cache_write: .*cache too small"):
            mn.kv_cache_write(kc, kc.clone(), torch.tensor([5], dtype=torch.int32), torch.ones(1, 2, 4, 64),
                              torch.ones(1, 2, 4, 64))
        with pytest.raises(mn.InvalidArgumentError, match="ring cache written with n_new"):
            mn.kv_cache_write(kc, kc.clone(), torch.zeros(1, dtype=torch.int32), torch.ones(1, 2, 9, 64),
                              torch.ones(1, 2, 9, 64), ring=True, n_new=torch.ones(1, dtype=torch.int32))
        with pytest.raises(mn.InvalidArgumentError, match=r"kv_cache_write: k_new has shape \(1, 3, 1, 64\)"):
            mn.kv_cache_write(kc, kc.clone(), torch.zeros(1, dtype=torch.int32), torch.ones(1, 3, 1, 64),
                              torch.ones(1, 3, 1, 64))
        cache = mn.KVCache(1, 2, 64, 8, dtype=torch.float32, device="cpu")
        cache.write(torch.ones(1, 2, 8, 64), torch.ones(1, 2, 8, 64))
        with pytest.raises(mn.InvalidArgumentError, match="cache too small"):
            cache.write(torch.ones(1, 2, 1, 64), torch.ones(1, 2, 1, 64))


# --------------------------------------------------------------------------- GPU, real sizes

@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 80, 96, 128, 192, 256, 512])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("l", [1000, 4097])
def test_gpu_prefill_real_sizes(d, causal, l):
    q, k, v = make_qkv(1, 4, 2, l, l, d, torch.bfloat16, "cuda")
    check_prefill(q, k, v, causal=causal, what=f"gpu D={d} L={l}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_gpu_prefill_dtypes_window_softcap_mask(dtype):
    q, k, v = make_qkv(2, 8, 1, 1500, 2600, 128, dtype, "cuda")
    check_prefill(q, k, v, window=700, softcap=50.0, what="window softcap")
    mask = torch.rand(1500, 2600, device="cuda") > 0.2
    mask[:, 1000:1800] = False
    mask[7] = False
    check_prefill(q, k, v, mask=mask, causal=True, what="bool mask")


@pytest.mark.gpu
@pytest.mark.parametrize("lq", [128, 2048])
def test_gpu_prefill_kv_lens_real_sizes(lq):
    """Chunks continuing caches of 4096 slots at four lengths, NaN past them; also inside a CUDA graph replayed
    after the lengths change."""
    b, hq, hkv, cap, d = 4, 32, 8, 4096, 128
    q = randn(b, hq, lq, d, dtype=torch.bfloat16, device="cuda")
    cache_k = randn(b, hkv, cap, d, dtype=torch.bfloat16, device="cuda")
    cache_v = randn(b, hkv, cap, d, dtype=torch.bfloat16, device="cuda")
    lens = torch.tensor([lq, lq + 1, cap // 2 + 7, cap], dtype=torch.int32, device="cuda")
    for i, n in enumerate(lens.tolist()):
        cache_k[i, :, n:] = float("nan")
        cache_v[i, :, n:] = float("nan")
    eager = check_prefill_kv_lens(q, cache_k, cache_v, lens, what=f"gpu kv_lens Lq={lq}")
    graph_lens = torch.full_like(lens, lq)
    mn.flash_attn_prefill(q, cache_k, cache_v, causal=True, kv_lens=graph_lens)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = mn.flash_attn_prefill(q, cache_k, cache_v, causal=True, kv_lens=graph_lens)
    graph_lens.copy_(lens)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)


@pytest.mark.gpu
@pytest.mark.parametrize("ratio", [1, 8])
@pytest.mark.parametrize("d", [64, 128, 256, 512])
def test_gpu_decode_real_sizes(ratio, d):
    b, hkv = 4, 2
    cap = 33000 if d <= 256 else 9000
    q = randn(b, hkv * ratio, 1, d, dtype=torch.bfloat16, device="cuda")
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    lens = torch.tensor([1, 1000, cap, cap // 3], dtype=torch.int32, device="cuda")
    check_decode(q, kc, vc, lens, what=f"gpu decode D={d} ratio {ratio}")


@pytest.mark.gpu
@pytest.mark.parametrize("lq", [1, 4])
@pytest.mark.parametrize("d,hq,hkv", [(128, 32, 8), (64, 9, 3), (256, 16, 8)])
def test_gpu_decode_append_real_sizes(d, hq, hkv, lq):
    """RoPE + cache write + attention in one launch at model sizes (Llama-3-8B, SmolLM2, D=256)."""
    spec = mn.RopeSpec(d, base=500000.0)
    check_append(4, hq, hkv, 8192, d, lq, [0, 1000, 8192 - lq, 77], device="cuda", rope=spec,
                 what=f"gpu append D={d} lq={lq}")
    check_append(2, hq, hkv, 1024, d, lq, [5000, 3], device="cuda", window=1024, rope=spec,
                 what=f"gpu append ring D={d} lq={lq}")


@pytest.mark.gpu
def test_gpu_decode_128k_and_ring():
    q = randn(1, 8, 1, 128, dtype=torch.bfloat16, device="cuda")
    kc, vc = (randn(1, 1, 131072, 128, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    check_decode(q, kc, vc, torch.tensor([131072], dtype=torch.int32, device="cuda"), what="128k")
    ring_k, ring_v = kc[:, :, :4096], vc[:, :, :4096]
    check_decode(q, ring_k, ring_v, torch.tensor([100000], dtype=torch.int32, device="cuda"), window=4096,
                 softcap=30.0, what="ring 4096 at position 100000")


@pytest.mark.gpu
@pytest.mark.parametrize("b", [1, 8])
def test_gpu_decode_fused_merge_sees_every_split(b):
    """Memory ordering of both merges on the GPU: many calls with new lengths each time (fresh, NaN-filled
    partial buffers), the fused merge equal to the second launch (programmatic dependent on the H100) within one
    bf16 ulp. A merge that read a partial before its split's stores were visible (a fused merge ahead of the
    arrivals, a dependent launch ahead of its wait) would get NaN or another call's values."""
    hq, hkv, d, cap = 64, 8, 128, 8192
    q = randn(b, hq, 1, d, dtype=torch.bfloat16, device="cuda")
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    lens = torch.full((b,), cap, dtype=torch.int32, device="cuda")
    fused, two = _decode_plan(q, kc, vc, lens, splits=None), _decode_plan(q, kc, vc, lens, fused=False, splits=None)
    assert fused.splits > 1 and fused.reduce is None and two.counters is None
    assert two.reduce.pdl == (torch.cuda.get_device_capability() >= (9, 0))
    for _ in range(200):
        lens = torch.randint(1, cap + 1, (b,), dtype=torch.int32, device="cuda")
        out = fused(q, kc, vc, lens, d ** -0.5, 0.0)
        torch.testing.assert_close(out, two(q, kc, vc, lens, d ** -0.5, 0.0), rtol=2 ** -7, atol=1e-6)
    assert not fused.counters.any()


@pytest.mark.gpu
@pytest.mark.parametrize("d,hq,hkv", [(128, 64, 8), (256, 16, 8), (64, 9, 3)])
def test_gpu_decode_stream_k_real_sizes(d, hq, hkv):
    """The stream-K kernel at model sizes on its default grid: equal lengths (shares aligned with the columns where
    grid_programs aligns them, crossing them otherwise) and ragged ones, against the fp64 oracle; then 100 calls with
    new lengths against the split decode (fresh NaN-filled partials each call): a merge that read a partial before
    its program's stores were visible would differ."""
    b, cap = 8, 32768 if d <= 128 else 16384
    q = randn(b, hq, 1, d, dtype=torch.bfloat16, device="cuda")
    kc, vc = (randn(b, hkv, cap, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    lens = torch.full((b,), cap, dtype=torch.int32, device="cuda")
    plan = _stream_plan(q, kc, vc, lens, programs=None)
    assert plan.programs >= 0.9 * torch.cuda.get_device_properties(0).multi_processor_count
    scale = d ** -0.5
    for n in (lens, torch.tensor([cap, 1, 0, 1000, cap - 1, 77, cap // 2, 5000], dtype=torch.int32, device="cuda")):
        assert_error_bar(plan(q, kc, vc, n, scale, 0.0), decode_oracle(q, kc, vc, n, scale),
                         decode_baseline(q, kc, vc, n, scale), what=f"stream-K D={d} lengths {n.tolist()}")
    split = _decode_plan(q, kc, vc, lens, splits=None)
    for _ in range(100):
        n = torch.randint(0, cap + 1, (b,), dtype=torch.int32, device="cuda")
        ours, theirs = plan(q, kc, vc, n, scale, 0.0).float(), split(q, kc, vc, n, scale, 0.0).float()
        # the two cut the keys differently (bf16 P @ V per piece): a few bf16 ulps of each row's scale apart
        row_scale = theirs.abs().amax(-1, keepdim=True)
        assert not ours.isnan().any() and ((ours - theirs).abs() <= 2 ** -6 * row_scale + 1e-6).all()
    assert not plan.counters.any()


@pytest.mark.gpu
@pytest.mark.parametrize("b", [1, 8])  # batch 1 merges in a programmatic dependent launch, batch 8 fused
def test_gpu_decode_cuda_graph_with_changing_lengths(b):
    hq, hkv, d, cap = 32, 8, 128, 8192
    cache = mn.KVCache(b, hkv, d, cap, dtype=torch.bfloat16, device="cuda")
    k, v = (randn(b, hkv, 6000, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    cache.write(k, v, torch.randint(100, 6000, (b,), dtype=torch.int32, device="cuda"))
    q = randn(b, hq, 1, d, dtype=torch.bfloat16, device="cuda")
    kn, vn = (randn(b, hkv, 1, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))

    def step():
        cache.write(kn, vn)
        return cache.attend(q)

    lens0 = cache.lens.clone()
    step()  # compile outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    cache.lens.copy_(lens0)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        expected = decode_oracle(q, cache.k, cache.v, cache.lens, d ** -0.5)
        assert_error_bar(out, expected, decode_baseline(q, cache.k, cache.v, cache.lens, d ** -0.5))
    assert torch.equal(cache.lens, lens0 + 3)
