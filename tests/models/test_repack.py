"""``LoadOptions.repack_gguf``: a tiny Llama GGUF with Q4_0 / Q4_1 matrices, loaded with its
Q4_0/Q4_1 matrices repacked into MLX affine (group 32) weights, gives the same logits as the
GGML blocks: bit for bit on the PyTorch reference path (the affine ``q * s + b`` is the GGML
value exactly), and within the kernels' error on ``device`` (CUDA, or the CPU interpreter)."""

import numpy as np
import pytest
import torch

import mlx_native as mn
from mlx_native.formats import AffineWeight, GGMLWeight, load_checkpoint
from mlx_native.formats.gguf import write_gguf
from mlx_native.models import LoadOptions, build_model
from mlx_native.models.base import place
from tiny import SEQ, make_hf_model

# layer 0: q/k Q4_0 with v Q4_1 (one fused affine qkv), down Q4_1; layer 1: v Q8_0 (qkv not fusable),
# gate Q4_0 with up Q4_1; embedding Q4_0 (stays GGML blocks); lm_head Q4_0
TYPES = {
    "model.layers.0.self_attn.v_proj.weight": "Q4_1",
    "model.layers.0.mlp.down_proj.weight": "Q4_1",
    "model.layers.1.self_attn.v_proj.weight": "Q8_0",
    "model.layers.1.mlp.up_proj.weight": "Q4_1",
}


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    hf = make_hf_model("llama")
    sd = {k: v.float().numpy() for k, v in hf.state_dict().items()}
    path = str(tmp_path_factory.mktemp("repack") / "q4.gguf")
    write_gguf(path, hf.config.to_dict(), sd, matrix_type="Q4_0", types=TYPES)
    return path


def _load(path, device="cpu", dtype=torch.float32, repack=False, fused_mlp_decode=False):
    opts = LoadOptions(torch.device(device), dtype, True, fused_mlp_decode=fused_mlp_decode, repack_gguf=repack)
    return build_model(load_checkpoint(path), opts)


def _prefill_and_decode(model, ids, device="cpu"):
    """All logits of a prefill of ``ids`` then the logits of two decode steps."""
    cache = model.new_cache(ids.shape[0], 32)
    with torch.no_grad():
        pre = model.forward(ids.to(device), cache, start=0, all_logits=True)
        steps = [model.forward(ids[:, i:i + 1].to(device), cache) for i in range(2)]
    return torch.cat([pre.reshape(-1), *[s.reshape(-1) for s in steps]]).cpu()


def test_repacked_weights_are_affine_where_expected(gguf_path):
    m = _load(gguf_path, repack=True)
    attn0, mlp0 = m.layers[0][1], m.layers[0][3]
    attn1, mlp1 = m.layers[1][1], m.layers[1][3]
    assert isinstance(attn0.qkv.weight, AffineWeight) and attn0.qkv.weight.scales.dtype == torch.float16
    assert (attn0.qkv.weight.group_size, attn0.qkv.weight.bits) == (32, 4)
    assert isinstance(mlp0.gate_up.weight, AffineWeight) and isinstance(mlp0.down.weight, AffineWeight)
    assert attn1.qkv is None and isinstance(attn1.v.weight, GGMLWeight) and isinstance(attn1.q.weight, AffineWeight)
    assert isinstance(mlp1.gate_up.weight, AffineWeight)
    assert isinstance(m.embed.weight, GGMLWeight) and m.embed.weight.type_name == "Q4_0"
    assert isinstance(m.lm_head.weight, AffineWeight)
    # off by default (layer 2 is all Q4_0: its q/k/v blocks fuse)
    assert isinstance(_load(gguf_path).layers[2][1].qkv.weight, GGMLWeight)
    assert not LoadOptions(torch.device("cpu"), torch.float32, True).repack_gguf


def test_fused_mlp_decode_default_follows_the_weight_kind(gguf_path):
    """``LoadOptions.fused_mlp_decode=None`` (the default) fuses GGML gate/up pairs only; an explicit
    value wins."""
    def fused(**kw):
        opts = LoadOptions(torch.device("cpu"), torch.float32, True, **kw)
        return [mlp.fused is not None for *_, mlp in build_model(load_checkpoint(gguf_path), opts).layers]

    assert LoadOptions(torch.device("cpu"), torch.float32, True).fused_mlp_decode is None
    assert fused() == [True, False, True]  # GGML blocks; layer 1's Q4_0 gate and Q4_1 up are not one weight
    assert fused(repack_gguf=True) == [False, False, False]  # affine after the repack
    assert fused(fused_mlp_decode=False) == [False, False, False]
    assert fused(repack_gguf=True, fused_mlp_decode=True) == [True, True, True]


def test_fused_mlp_decode_default_leaves_streamed_pairs_unfused(monkeypatch):
    """Pairs whose one-row matmul takes a streamed kernel (Q4_K; Q4_0/Q4_1 with enough row tiles per SM) beat
    the fused pair: the default does not fuse them; Q4_0 pairs left to the word-level kernel are fused."""
    from mlx_native.models.base import GatedMLP, Linear
    from mlx_native.ops.ggml import q4_mv

    def fused(type_name, type_id, default=None, act_dtype=torch.bfloat16):  # K = 256: 144 bytes per row for both
        def linear():
            return Linear(GGMLWeight(torch.zeros(64, 144, dtype=torch.uint8), type_id, type_name, (64, 256)))
        return GatedMLP(linear(), linear(), linear(), "silu", default, act_dtype).fused is not None

    monkeypatch.setattr(q4_mv, "MIN_TILES_PER_SM", 10**6)  # Q4_0: too few row tiles for the streamed kernel
    assert not fused("Q4_K", 12) and fused("Q4_0", 2)
    assert fused("Q4_K", 12, True)
    assert fused("Q4_K", 12, act_dtype=torch.float32)  # fp32 rows run the word-level kernel: fused
    monkeypatch.setattr(q4_mv, "MIN_TILES_PER_SM", 0)  # Q4_0: the streamed kernel
    assert not fused("Q4_0", 2) and fused("Q4_0", 2, True)


@pytest.mark.parametrize("fused_mlp_decode", [False, True])
def test_repacked_logits_equal_ggml_on_reference_path(gguf_path, fused_mlp_decode):
    """Bit-equal, but for the decode steps of the fused MLP: the references of ``moe_qmm`` and
    ``moe_ggml_matmul`` sum in different orders (fp32 rounding; prefill stays bit-equal)."""
    ids = torch.randint(0, 211, (2, SEQ))
    with mn.use_backend("reference"):
        want = _prefill_and_decode(_load(gguf_path, fused_mlp_decode=fused_mlp_decode), ids)
        got = _prefill_and_decode(_load(gguf_path, repack=True, fused_mlp_decode=fused_mlp_decode), ids)
    assert torch.isfinite(want).all()
    n_prefill = 2 * SEQ * 211
    assert torch.equal(got[:n_prefill], want[:n_prefill])
    if fused_mlp_decode:
        assert (got - want).abs().max().item() <= 4 * torch.finfo(torch.float32).eps * want.abs().max().item()
    else:
        assert torch.equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_repacked_kernels_error_bar(gguf_path, device, dtype):
    """The affine kernels on CUDA (fp16 activations: the 16-bit decode kernels) on the repacked
    model: against the fp32 reference path, within 2x the error of the GGML kernels on the
    same blocks plus 1e-3 of the logits' scale."""
    ids = torch.randint(0, 211, (2, SEQ))
    with mn.use_backend("reference"):
        want = _prefill_and_decode(_load(gguf_path), ids)
    repacked = _load(gguf_path, device, dtype, repack=True, fused_mlp_decode=True)
    assert isinstance(repacked.layers[0][1].qkv.weight, AffineWeight)
    got = _prefill_and_decode(repacked, ids, device).float()
    base = _prefill_and_decode(_load(gguf_path, device, dtype, fused_mlp_decode=True), ids, device).float()
    err, base_err = (got - want).abs().max().item(), (base - want).abs().max().item()
    assert err <= 2 * base_err + 1e-3 * want.abs().max().item(), (err, base_err)


def test_bfloat16_models_keep_ggml_blocks(gguf_path):
    """fp16 scales would promote bf16 matmul outputs to fp32 (MLX's rule), bf16 ones are lossy."""
    m = _load(gguf_path, dtype=torch.bfloat16, repack=True)
    assert isinstance(m.layers[2][1].qkv.weight, GGMLWeight) and isinstance(m.lm_head.weight, GGMLWeight)


def test_q4_0_with_fp32_scales_only_in_fp32_models():
    """A Q4_0 tensor whose -8d overflows fp16 repacks with fp32 scales: kept in a float32 model,
    left as GGML blocks in a float16 one (its matmul would return float32)."""
    raw = np.zeros((2, 18), dtype=np.uint8)
    raw[:, 0:2] = np.array([[0.5], [9000.0]], dtype=np.float16).view(np.uint8)
    w = GGMLWeight(torch.from_numpy(raw).reshape(1, 36), 2, "Q4_0", (1, 64))
    cpu = torch.device("cpu")
    placed = place(w, LoadOptions(cpu, torch.float32, True, repack_gguf=True))
    assert isinstance(placed, AffineWeight) and placed.scales.dtype == torch.float32
    assert isinstance(place(w, LoadOptions(cpu, torch.float16, True, repack_gguf=True)), GGMLWeight)
    assert isinstance(place(w, LoadOptions(cpu, torch.float32, False, repack_gguf=True)), type(place(
        w, LoadOptions(cpu, torch.float32, False))))
