"""Qwen3-MoE from GGUF and MLX checkpoints: the stacked expert tensors (llama.cpp's ``ffn_*_exps``, mlx-lm's
``switch_mlp.*``), the routed ops that run them, and the mapping of names and config.

Oracle: transformers' Qwen3-MoE in float64 holding the checkpoint's own dequantized weights (dequantized by
``gguf.quants`` / ``mx.dequantize``, not by us); error bar: the same model in float32 on the CPU, or in the run's
low dtype on the GPU (tests/models/test_architectures.py covers the Hugging Face checkpoint).
"""

import copy
import json
import os
import tempfile

import gguf
import mlx.core as mx
import numpy as np
import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar
from mlx_native.formats import AffineWeight, DenseWeight, GGMLWeight, load_checkpoint
from mlx_native.formats.gguf import write_gguf
from mlx_native.models import LoadOptions, build_model
from mlx_native.models.base import Linear
from mlx_native.models.moe import EXPERT_PARTS, SparseMoE, router_matrix
from tiny import SEQ, configs, make_hf_model, save_tokenizer

SPARSE, EXPERTS = (0, 2), 8  # tiny qwen3_moe: layer 1 is dense


def _stacked(sd: dict, experts: int) -> dict:
    """Hugging Face per-expert matrices -> one ``[E, out, in]`` stack per projection (``mlp.experts.<part>``)."""
    out = {k: v for k, v in sd.items() if ".experts." not in k}
    for layer in SPARSE:
        p = f"model.layers.{layer}.mlp.experts"
        for part in EXPERT_PARTS:
            out[f"{p}.{part}.weight"] = np.stack([sd[f"{p}.{e}.{part}.weight"] for e in range(experts)])
    return out


def _unstacked(sd: dict) -> dict:
    out = {}
    for k, v in sd.items():
        if ".experts." in k:
            prefix, part = k.rsplit(".", 2)[0], k.rsplit(".", 2)[1]
            for e in range(v.shape[0]):
                out[f"{prefix}.{e}.{part}.weight"] = v[e]
        else:
            out[k] = v
    return out


def _file_state(hf) -> dict:
    """The model's tensors as its checkpoint file holds them (per-expert matrices), float32 arrays."""
    from safetensors.numpy import load_file

    with tempfile.TemporaryDirectory() as d:
        hf.save_pretrained(d)
        return {k: v.astype(np.float32) for k, v in load_file(os.path.join(d, "model.safetensors")).items()}


def _hf_holding(state: dict, config):
    """A transformers Qwen3-MoE of ``config`` whose weights are ``state`` (file names, per-expert matrices)."""
    import transformers as tf
    from safetensors.numpy import save_file

    with tempfile.TemporaryDirectory() as d:
        save_file({k: np.ascontiguousarray(v, np.float32) for k, v in state.items()},
                  os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        config.to_json_file(os.path.join(d, "config.json"))
        hf = tf.Qwen3MoeForCausalLM.from_pretrained(d, attn_implementation="eager", experts_implementation="eager",
                                                    dtype=torch.float32)
    assert set(_file_state(hf)) == set(state)
    return hf.eval()


def _oracle(hf, ids, dtype=torch.float32, device="cpu"):
    with torch.no_grad():
        return (copy.deepcopy(hf).double()(ids).logits,
                copy.deepcopy(hf).to(device=device, dtype=dtype)(ids.to(device)).logits.cpu().double())


def _prefill_decode(path, device="cpu", dtype=torch.float32, keep_quantized=False, ids=None):
    """Logits of a 15-token prefill and one decode step per remaining token (``[B, SEQ, V]``)."""
    model = build_model(load_checkpoint(path), LoadOptions(torch.device(device), dtype, keep_quantized))
    ids = ids.to(device)
    with torch.no_grad():
        cache = model.new_cache(ids.shape[0], 32)
        parts = [model.forward(ids[:, :15], cache, start=0, all_logits=True)]
        parts += [model.forward(ids[:, t:t + 1], cache, all_logits=True) for t in range(15, ids.shape[1])]
    return model, torch.cat(parts, 1).cpu().double()


# ---------------------------------------------------------------------------- GGUF

# experts: layer 0 Q8_0 / Q8_0 / Q4_0 down, layer 2 Q4_0 gate with a Q8_0 up (no gate/up pair): the fused step and
# its fallbacks; the router stays F32 as llama.cpp leaves it
GGUF_TYPES = {"model.layers.0.mlp.experts.down_proj.weight": "Q4_0",
              "model.layers.2.mlp.experts.gate_proj.weight": "Q4_0"}


def _gguf_state(path: str, names) -> dict:
    """HF name -> float32 array for each of ``names`` (stacked expert names), found in the file by llama.cpp's own
    name map (gguf's ``TensorNameMap``; qwen3's for the dense layer, which llama.cpp's qwen3moe lacks) and
    dequantized by the gguf package."""
    maps = [gguf.get_tensor_name_map(a, 3) for a in (gguf.MODEL_ARCH.QWEN3MOE, gguf.MODEL_ARCH.QWEN3)]
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    out = {}
    for name in names:
        base, kind = name.rsplit(".", 1)
        t = tensors[next(m.get_name(base) for m in maps if m.get_name(base)) + "." + kind]
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))
        out[name] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
    return out


@pytest.fixture(scope="module")
def gguf_model(tmp_path_factory):
    hf = make_hf_model("qwen3_moe")
    cfg = hf.config.to_dict()
    sd = _stacked(_file_state(hf), EXPERTS)
    path = str(tmp_path_factory.mktemp("moe") / "qwen3moe.gguf")
    write_gguf(path, cfg, sd, matrix_type="Q8_0", types={**GGUF_TYPES, **{
        f"model.layers.{i}.mlp.gate.weight": "F32" for i in SPARSE}})
    return path, _hf_holding(_unstacked(_gguf_state(path, sd)), hf.config)


def test_gguf_names_and_config(gguf_model):
    path, hf = gguf_model
    ckpt = load_checkpoint(path)
    c = ckpt.config
    assert (c["model_type"], c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"],
            c["norm_topk_prob"]) == ("qwen3_moe", 8, 2, 32, True)
    gate = ckpt.weights["model.layers.0.mlp.experts.gate_proj.weight"]
    assert isinstance(gate, GGMLWeight) and gate.shape == (8, 32, 64) and gate.type_name == "Q8_0"
    assert ckpt.weights["model.layers.0.mlp.experts.down_proj.weight"].shape == (8, 64, 32)
    assert isinstance(ckpt.weights["model.layers.2.mlp.gate.weight"], DenseWeight)
    model = build_model(ckpt, LoadOptions(torch.device("cpu"), torch.float32, True))
    assert [type(mlp).__name__ for *_, mlp in model.layers] == ["SparseMoE", "GatedMLP", "SparseMoE"]
    assert isinstance(model.layers[0][3].gate, GGMLWeight)


@pytest.mark.parametrize("keep_quantized", [False, True])
def test_gguf_logits_match_transformers_on_the_same_blocks(gguf_model, keep_quantized):
    """Experts dequantized at load (dense routed rows) or kept as blocks (``moe_ggml_ffn`` on the reference
    path): prefill and decode steps against transformers running gguf's dequantization of the file."""
    path, hf = gguf_model
    ids = torch.randint(0, 211, (2, SEQ))
    with mn.use_backend("reference"):
        _, ours = _prefill_decode(path, keep_quantized=keep_quantized, ids=ids)
    oracle, baseline = _oracle(hf, ids)
    assert_error_bar(ours, oracle, baseline, what=f"qwen3moe gguf keep_quantized={keep_quantized}")


# a GGUF whose experts the routed decode kernels take (K of whole super-blocks): Q4_K_M's mix in layer 0 (Q4_K gate /
# up, Q6_K down), Q8_0 / Q5_K in layer 2; dense layer 1 Q8_0 (its 96 features are no whole super-blocks)
WIDE = dict(hidden_size=256, moe_intermediate_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64)
WIDE_TYPES = {"model.layers.0.mlp.experts.down_proj.weight": "Q6_K",
              "model.layers.2.mlp.experts.gate_proj.weight": "Q8_0", "model.layers.2.mlp.experts.up_proj.weight": "Q8_0",
              "model.layers.2.mlp.experts.down_proj.weight": "Q5_K", **{
                  f"model.layers.1.mlp.{p}.weight": "Q8_0" for p in ("gate_proj", "up_proj", "down_proj")}}
K_SCALES = {"Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}  # byte offsets of each super-block's fp16 scales


def _k_blocks(type_name: str, shape: tuple, rng) -> np.ndarray:
    """Random super-blocks of a K-quant (which gguf cannot quantize) with small positive fp16 scales:
    uint8 ``[*shape[:-1], row_bytes]``."""
    size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]][1]
    n = int(np.prod(shape)) // 256
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    for off in K_SCALES[type_name]:
        raw[:, off:off + 2] = rng.uniform(1e-4, 4e-4, n).astype(np.float16).view(np.uint8).reshape(n, 2)
    return raw.reshape(*shape[:-1], -1)


@pytest.fixture(scope="module")
def wide_gguf(tmp_path_factory):
    import transformers as tf

    base, _ = configs(tf)["qwen3_moe"]
    config = tf.Qwen3MoeConfig(**{**base.to_dict(), **WIDE})
    rng = np.random.default_rng(1)
    sd = {k: (rng.standard_normal(v.shape) * (0.3 if v.ndim == 1 else 0.05)).astype(np.float32)
          for k, v in _file_state(tf.Qwen3MoeForCausalLM(config)).items()}
    sd = _stacked(sd, EXPERTS)
    types = {n: WIDE_TYPES.get(n, "Q4_K") for n, v in sd.items() if v.ndim >= 2}
    types.update({f"model.layers.{i}.mlp.gate.weight": "F32" for i in SPARSE})
    sd = {n: _k_blocks(types[n], v.shape, rng) if types.get(n) in K_SCALES else v for n, v in sd.items()}
    path = str(tmp_path_factory.mktemp("moe") / "qwen3moe_wide.gguf")
    write_gguf(path, config.to_dict(), sd, types=types)
    return path, _hf_holding(_unstacked(_gguf_state(path, sd)), config)


def test_wide_gguf_reference_path(wide_gguf):
    path, hf = wide_gguf
    ids = torch.randint(0, 211, (2, SEQ))
    with mn.use_backend("reference"):
        _, ours = _prefill_decode(path, keep_quantized=True, ids=ids)
    oracle, baseline = _oracle(hf, ids)
    assert_error_bar(ours, oracle, baseline, what="qwen3moe Q4_K_M-style gguf, reference")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_wide_gguf_kernels_on_gpu(wide_gguf, dtype):
    """The routed GGUF kernels in the model: prefill (grouped) and decode steps (the chained ``moe_ggml_ffn``),
    eagerly and as the generator's CUDA-graph decode; within 2x transformers' own error in ``dtype``."""
    path, hf = wide_gguf
    ids = torch.randint(0, 211, (2, SEQ))
    model, ours = _prefill_decode(path, "cuda", dtype, keep_quantized=True, ids=ids)
    assert isinstance(model.layers[0][3], SparseMoE) and isinstance(model.layers[0][3].gate, GGMLWeight)
    oracle, baseline = _oracle(hf, ids, dtype, "cuda")
    assert_error_bar(ours, oracle, baseline, atol=1e-2 * oracle.abs().max().item(), what=f"qwen3moe gguf {dtype}")


# ---------------------------------------------------------------------------- MLX

GROUP, BITS = 32, 4
MLX_OVERRIDES = {"model.layers.2.mlp.switch_mlp.down_proj": {"group_size": 32, "bits": 8}}  # layer 2: moe_qmm ops


def _mlx_checkpoints(root, scale_dtype) -> tuple[str, str, object]:
    """mlx-lm's layout (``switch_mlp`` stacks, every projection and the router quantized, scales and biases in
    ``scale_dtype``) and the same weights dequantized by ``mx.dequantize`` (float stacks), with the transformers
    model holding them: ``(quantized dir, dequantized dir, hf)``."""
    hf = make_hf_model("qwen3_moe")
    cfg = hf.config.to_dict()
    sd = _stacked(_file_state(hf), EXPERTS)
    sd = {k.replace(".mlp.experts.", ".mlp.switch_mlp."): v for k, v in sd.items()}
    quant, dense = {}, {}
    for name, w in sd.items():
        module = name[: -len(".weight")]
        if w.ndim < 2 or "norm" in name:
            quant[name], dense[name] = mx.array(w), w
            continue
        over = MLX_OVERRIDES.get(module, {})
        gs, bits = over.get("group_size", GROUP), over.get("bits", BITS)
        wq, s, b = mx.quantize(mx.array(w).astype(scale_dtype), group_size=gs, bits=bits)
        quant[name], quant[f"{module}.scales"], quant[f"{module}.biases"] = wq, s, b
        dense[name] = np.array(mx.dequantize(wq, s, b, group_size=gs, bits=bits).astype(mx.float32))
    paths = []
    for d, tensors, c in (("quantized", quant, dict(cfg, quantization={"group_size": GROUP, "bits": BITS,
                                                                        **MLX_OVERRIDES})),
                          ("dequantized", {k: mx.array(v) for k, v in dense.items()}, cfg)):
        os.makedirs(root / d)
        mx.save_safetensors(str(root / d / "model.safetensors"), tensors, metadata={"format": "mlx"})
        with open(root / d / "config.json", "w") as f:
            json.dump(c, f)
        paths.append(save_tokenizer(str(root / d)))
    state = _unstacked({k.replace(".switch_mlp.", ".experts."): v for k, v in dense.items()})
    return paths[0], paths[1], _hf_holding(state, hf.config)


@pytest.fixture(scope="module")
def mlx_checkpoints(tmp_path_factory):
    """float32 scales: an fp32 model's quantized matmuls then round nothing (MLX computes in the scales' dtype)."""
    return _mlx_checkpoints(tmp_path_factory.mktemp("mlx_moe"), mx.float32)


@pytest.fixture(scope="module")
def mlx_bf16_checkpoints(tmp_path_factory):
    """bfloat16 scales, as mlx-community files have: the bf16 models' kernels on the GPU."""
    return _mlx_checkpoints(tmp_path_factory.mktemp("mlx_moe_bf16"), mx.bfloat16)


def test_mlx_experts_load_stacked(mlx_checkpoints):
    qpath, dpath, _ = mlx_checkpoints
    model = build_model(load_checkpoint(qpath), LoadOptions(torch.device("cpu"), torch.float32, True))
    moe0, moe2 = model.layers[0][3], model.layers[2][3]
    assert isinstance(moe0.gate, AffineWeight) and moe0.gate.shape == (8, 32, 64)
    assert (moe2.down_w.bits, moe2.down_w.group_size) == (8, 32) and moe2.down_w.shape == (8, 64, 32)
    dense = build_model(load_checkpoint(dpath), LoadOptions(torch.device("cpu"), torch.float32, False))
    assert isinstance(dense.layers[0][3].gate, DenseWeight) and dense.layers[0][3].gate.shape == (8, 32, 64)


@pytest.mark.parametrize("which", ["quantized-kept", "quantized-dequantized", "dequantized"])
def test_mlx_logits_match_transformers(mlx_checkpoints, which):
    """``moe_ffn`` (layer 0) and the ``moe_qmm`` ops (layer 2's 8-bit down) on the reference path, the experts
    dequantized at load, and the float stacks: against transformers holding ``mx.dequantize``'s weights."""
    qpath, dpath, hf = mlx_checkpoints
    ids = torch.randint(0, 211, (2, SEQ))
    path = dpath if which == "dequantized" else qpath
    with mn.use_backend("reference"):
        _, ours = _prefill_decode(path, keep_quantized=which == "quantized-kept", ids=ids)
    oracle, baseline = _oracle(hf, ids)
    assert_error_bar(ours, oracle, baseline, what=f"qwen3_moe mlx {which}")


@pytest.mark.gpu
def test_mlx_kernels_on_gpu(mlx_bf16_checkpoints):
    """A bf16 model on bf16-scaled experts: ``moe_ffn``'s chained decode steps, the ``moe_qmm`` ops of layer 2."""
    qpath, _, hf = mlx_bf16_checkpoints
    ids = torch.randint(0, 211, (2, SEQ))
    _, ours = _prefill_decode(qpath, "cuda", torch.bfloat16, keep_quantized=True, ids=ids)
    oracle, baseline = _oracle(hf, ids, torch.bfloat16, "cuda")
    assert_error_bar(ours, oracle, baseline, atol=1e-2 * oracle.abs().max().item(), what="qwen3_moe mlx bf16")


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["gguf", "mlx"])
def test_gpu_graph_and_eager_decode_agree(wide_gguf, mlx_bf16_checkpoints, which):
    """The generator's CUDA-graph decode (the MoE steps' chained launches captured) gives the eager tokens."""
    model, tok = mn.load(wide_gguf[0] if which == "gguf" else mlx_bf16_checkpoints[0], device="cuda")
    assert isinstance(model.layers[0][3], SparseMoE) and not isinstance(model.layers[0][3].gate, DenseWeight)
    for kw in (dict(), dict(temp=0.9, top_k=20, seed=1)):
        g = [r.token for r in mn.stream_generate(model, tok, [5, 9, 11], max_tokens=24, cuda_graph=True, **kw)]
        e = [r.token for r in mn.stream_generate(model, tok, [5, 9, 11], max_tokens=24, cuda_graph=False, **kw)]
        assert g == e


# ---------------------------------------------------------------------------- errors

def test_router_matrix_of_each_kind():
    """The router's ``[E, hidden]`` matrix for moe_router: a dense weight as it is; a GGUF Q8_0 router as gguf.quants
    dequantizes it; an MLX-quantized router as ``mx.dequantize`` in fp32; None for a router with a bias."""
    w = torch.randn(8, 64)
    assert router_matrix(Linear(DenseWeight(w))) is w
    raw = gguf.quants.quantize(w.numpy(), gguf.GGMLQuantizationType.Q8_0)
    want = torch.from_numpy(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q8_0)).reshape(8, 64)
    got = router_matrix(Linear(GGMLWeight(torch.from_numpy(raw.reshape(8, -1)), 8, "Q8_0", (8, 64))))
    assert got.dtype == torch.float32 and torch.equal(got, want)
    wq, sc, bi = mx.quantize(mx.array(w.numpy()).astype(mx.bfloat16), group_size=32, bits=8)
    aff = AffineWeight(torch.from_numpy(np.array(wq)), torch.from_numpy(np.array(sc.astype(mx.float32))).bfloat16(),
                       torch.from_numpy(np.array(bi.astype(mx.float32))).bfloat16(), 32, 8)
    want = torch.from_numpy(np.array(mx.dequantize(wq, sc.astype(mx.float32), bi.astype(mx.float32), group_size=32,
                                                   bits=8)))
    got = router_matrix(Linear(aff))
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert router_matrix(Linear(DenseWeight(w), bias=torch.zeros(8))) is None


def test_experts_of_mixed_kinds_are_refused():
    dense = DenseWeight(torch.zeros(8, 32, 64))
    blocks = GGMLWeight(torch.zeros(8 * 64, 34, dtype=torch.uint8), 8, "Q8_0", (8, 64, 32))
    with pytest.raises(mn.FormatError, match="mix weight kinds"):
        SparseMoE(None, (dense, dense, blocks), 2, True)


def test_missing_expert_is_named(tmp_path):
    from safetensors.torch import save_file

    hf = make_hf_model("qwen3_moe")
    hf.config.to_json_file(str(tmp_path / "config.json"))
    sd = {k: torch.from_numpy(v) for k, v in _file_state(hf).items() if k != "model.layers.2.mlp.experts.5.up_proj.weight"}
    save_file(sd, str(tmp_path / "model.safetensors"))
    with pytest.raises(mn.FormatError, match=r"model\.layers\.2\.mlp\.experts\.5\.up_proj\.weight"):
        build_model(load_checkpoint(str(tmp_path)), LoadOptions(torch.device("cpu"), torch.float32, False))
