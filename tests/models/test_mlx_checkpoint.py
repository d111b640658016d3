"""MLX checkpoints: weights quantized by the ``mlx`` package (``mx.quantize``), saved in
mlx-lm's layout (``<module>.weight`` uint32 + ``.scales`` + ``.biases``, a
``quantization`` block in config.json with per-layer overrides).

The quantized checkpoint must give the logits of the same weights loaded
unquantized (``mx.dequantize`` -> a plain checkpoint) up to float rounding, and
its distance from the original float model must be the quantization error
(the distance of transformers running the dequantized weights).
"""

import json
import os

import mlx.core as mx
import numpy as np
import pytest
import torch

import mlx_native as mn
from helpers import max_err
from mlx_native.formats import AffineWeight, DenseWeight, load_checkpoint
from mlx_native.models import LoadOptions, build_model
from tiny import SEQ, make_hf_model

GROUP, BITS = 32, 4
OVERRIDES = {
    "model.layers.1.mlp.down_proj": {"group_size": 32, "bits": 8},
    "model.layers.2.mlp.gate_proj": {"group_size": 64, "bits": 2},
    "model.layers.0.self_attn.o_proj": False,
}


def _quantized_name(name: str) -> bool:
    return name.endswith(".weight") and ("_proj" in name or "embed_tokens" in name or "lm_head" in name)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlx")
    hf = make_hf_model("llama")
    cfg = hf.config.to_dict()
    sd = {k: v.detach().float().numpy() for k, v in hf.state_dict().items()}
    quant, dense = {}, {}
    for name, w in sd.items():
        module = name[: -len(".weight")]
        over = OVERRIDES.get(module)
        if not _quantized_name(name) or over is False:
            quant[name] = mx.array(w)
            dense[name] = w
            continue
        gs, bits = (over["group_size"], over["bits"]) if over else (GROUP, BITS)
        wq, scales, biases = mx.quantize(mx.array(w), group_size=gs, bits=bits)
        quant[name], quant[f"{module}.scales"], quant[f"{module}.biases"] = wq, scales, biases
        dense[name] = np.array(mx.dequantize(wq, scales, biases, group_size=gs, bits=bits))
    qdir, ddir = root / "quantized", root / "dequantized"
    os.makedirs(qdir)
    os.makedirs(ddir)
    mx.save_safetensors(str(qdir / "model.safetensors"), quant, metadata={"format": "mlx"})
    mx.save_safetensors(str(ddir / "model.safetensors"), {k: mx.array(v) for k, v in dense.items()})
    qcfg = dict(cfg, quantization={"group_size": GROUP, "bits": BITS, **OVERRIDES})
    for d, c in ((qdir, qcfg), (ddir, cfg)):
        with open(d / "config.json", "w") as f:
            json.dump(c, f)
    return hf, str(qdir), str(ddir), dense


def _logits(path, ids, device="cpu", keep_quantized=False):
    model = build_model(load_checkpoint(path), LoadOptions(torch.device(device), torch.float32, keep_quantized))
    with torch.no_grad():
        return model.forward(ids.to(device), model.new_cache(ids.shape[0], 32), start=0, all_logits=True).cpu()


def test_loader_reads_quantization_overrides(checkpoints):
    _, qdir, _, _ = checkpoints
    ckpt = load_checkpoint(qdir)
    assert ckpt.format == "mlx"
    w = ckpt.weights
    assert isinstance(w["model.layers.0.self_attn.q_proj.weight"], AffineWeight)
    assert (w["model.layers.0.self_attn.q_proj.weight"].bits, w["model.layers.0.self_attn.q_proj.weight"].group_size) == (4, 32)
    assert (w["model.layers.1.mlp.down_proj.weight"].bits, w["model.layers.1.mlp.down_proj.weight"].group_size) == (8, 32)
    assert (w["model.layers.2.mlp.gate_proj.weight"].bits, w["model.layers.2.mlp.gate_proj.weight"].group_size) == (2, 64)
    assert isinstance(w["model.layers.0.self_attn.o_proj.weight"], DenseWeight)
    assert isinstance(w["model.embed_tokens.weight"], AffineWeight)
    assert w["model.layers.0.self_attn.q_proj.weight"].shape == (64, 64)


@pytest.mark.parametrize("keep_quantized", [True, False])
def test_quantized_equals_dequantized_weights(checkpoints, keep_quantized):
    """Reference path: packed weights through quantized_matmul (or dequantized at load) ==
    the dequantized weights as a plain checkpoint."""
    _, qdir, ddir, _ = checkpoints
    ids = torch.randint(0, 211, (2, SEQ))
    with mn.use_backend("reference"):
        q = _logits(qdir, ids, keep_quantized=keep_quantized)
        d = _logits(ddir, ids)
    scale = d.abs().max().item()
    assert max_err(q, d) <= 1e-5 * scale, max_err(q, d)


def test_quantized_kernels_equal_dequantized_weights(checkpoints, device):
    """The quantized matmul / embedding kernels (interpreter on CPU, CUDA on the GPU)."""
    _, qdir, ddir, _ = checkpoints
    ids = torch.randint(0, 211, (2, SEQ))
    q = _logits(qdir, ids, device=device, keep_quantized=True)
    with mn.use_backend("reference"):
        d = _logits(ddir, ids)
    scale = d.abs().max().item()
    tol = 1e-5 if device == "cpu" else 5e-3  # fp32 tensor-core dots on the GPU
    assert max_err(q, d) <= tol * scale, max_err(q, d)


def test_distance_from_float_model_is_the_quantization_error(checkpoints):
    hf, qdir, _, dense = checkpoints
    ids = torch.randint(0, 211, (2, SEQ))
    with torch.no_grad():
        original = hf(ids).logits
        hf_deq = make_hf_model("llama")
        hf_deq.load_state_dict({k: torch.from_numpy(v) for k, v in dense.items()}, strict=False)
        theirs = hf_deq(ids).logits
    with mn.use_backend("reference"):
        ours = _logits(qdir, ids, keep_quantized=True)
    quant_err = max_err(theirs, original)
    assert quant_err > 1e-3  # 2- and 4-bit weights: a real quantization error
    assert abs(max_err(ours, original) - quant_err) <= 0.01 * quant_err
