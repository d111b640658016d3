"""MLX / Hugging Face safetensors directories: validation of truncated or corrupt
files (tensor name or offset in the message), config problems, unsupported quantization."""

import json
import os
import struct

import pytest
import torch
from safetensors.torch import save_file

import mlx_native as mn
from mlx_native.formats import DenseWeight, load_checkpoint


@pytest.fixture
def ckpt_dir(tmp_path):
    d = tmp_path / "m"
    os.makedirs(d)
    save_file({"model.embed_tokens.weight": torch.randn(10, 8), "model.norm.weight": torch.randn(8),
               "lm_head.weight": torch.randn(10, 8, dtype=torch.bfloat16)}, str(d / "model.safetensors"))
    with open(d / "config.json", "w") as f:
        json.dump({"model_type": "llama", "hidden_size": 8}, f)
    return d


def test_loads_plain_checkpoint(ckpt_dir):
    ckpt = load_checkpoint(str(ckpt_dir))
    assert ckpt.format == "hf"
    assert isinstance(ckpt.weights["lm_head.weight"], DenseWeight)
    assert ckpt.weights["lm_head.weight"].data.dtype == torch.bfloat16
    assert ckpt.num_parameters == 10 * 8 * 2 + 8


def test_truncated_file_names_the_tensor(ckpt_dir):
    f = ckpt_dir / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:-10])
    with pytest.raises(mn.FormatError, match=r"tensor \S+: data at offsets \[\d+, \d+\) runs past the end"):
        load_checkpoint(str(ckpt_dir))


def test_corrupt_headers(ckpt_dir):
    f = ckpt_dir / "model.safetensors"
    data = bytearray(f.read_bytes())
    f.write_bytes(struct.pack("<Q", 1 << 40) + bytes(data[8:]))
    with pytest.raises(mn.FormatError, match="offset 0 says the header has"):
        load_checkpoint(str(ckpt_dir))
    bad = bytearray(data)
    bad[8] = ord("x")
    f.write_bytes(bytes(bad))
    with pytest.raises(mn.FormatError, match=r"invalid JSON at offset \d+"):
        load_checkpoint(str(ckpt_dir))
    f.write_bytes(b"\x01\x00")
    with pytest.raises(mn.FormatError, match="truncated safetensors file"):
        load_checkpoint(str(ckpt_dir))


def test_inconsistent_offsets(ckpt_dir):
    f = ckpt_dir / "model.safetensors"
    data = f.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header["model.norm.weight"]["shape"] = [9]
    raw = json.dumps(header).encode()
    raw += b" " * (n - len(raw)) if len(raw) <= n else b""
    f.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n:])
    with pytest.raises(mn.FormatError, match=r"tensor model.norm.weight: data offsets .* do not hold F32 \[9\]"):
        load_checkpoint(str(ckpt_dir))


def test_missing_pieces(ckpt_dir, tmp_path):
    os.remove(ckpt_dir / "config.json")
    with pytest.raises(mn.FormatError, match="no config.json"):
        load_checkpoint(str(ckpt_dir))
    empty = tmp_path / "empty"
    os.makedirs(empty)
    (empty / "config.json").write_text("{}")
    with pytest.raises(mn.FormatError, match=r"no \*.safetensors"):
        load_checkpoint(str(empty))
    (empty / "config.json").write_text("{not json")
    with pytest.raises(mn.FormatError, match="invalid JSON"):
        load_checkpoint(str(empty))


def test_unsupported_quantization(ckpt_dir):
    cfg = json.loads((ckpt_dir / "config.json").read_text())
    (ckpt_dir / "config.json").write_text(json.dumps(dict(cfg, quantization_config={"quant_method": "gptq"})))
    with pytest.raises(mn.UnsupportedError, match="'gptq' is not supported; supported: MLX affine"):
        load_checkpoint(str(ckpt_dir))
    (ckpt_dir / "config.json").write_text(json.dumps(dict(cfg, quantization={"group_size": 32, "bits": 4,
                                                                            "mode": "mxfp4"})))
    with pytest.raises(mn.UnsupportedError, match="mode 'mxfp4' is not supported; supported: affine"):
        load_checkpoint(str(ckpt_dir))


def test_scales_without_biases(ckpt_dir):
    save_file({"model.layers.0.mlp.up_proj.weight": torch.zeros(4, 4, dtype=torch.uint32),
               "model.layers.0.mlp.up_proj.scales": torch.ones(4, 1)}, str(ckpt_dir / "model-2.safetensors"))
    cfg = json.loads((ckpt_dir / "config.json").read_text())
    (ckpt_dir / "config.json").write_text(json.dumps(dict(cfg, quantization={"group_size": 32, "bits": 4})))
    with pytest.raises(mn.FormatError, match="up_proj.scales has no model.layers.0.mlp.up_proj.biases"):
        load_checkpoint(str(ckpt_dir))


@pytest.mark.parametrize("quant, error, match", [
    ({"group_size": 32, "bits": 7}, mn.UnsupportedError, r"up_proj: MLX affine bits = 7 is not supported; supported: "
     r"2, 3, 4, 5, 6, 8"),
    ({"group_size": 48, "bits": 4}, mn.UnsupportedError, r"group_size = 48 is not supported; supported: 32, 64, 128"),
    ({"group_size": "32", "bits": 4}, mn.FormatError, r"quantization group_size = '32' is not an integer"),
    ({"group_size": 32, "bits": 4, "model.layers.0.mlp.up_proj": {"bits": 0}}, mn.UnsupportedError,
     r"bits = 0 is not supported"),
    (4, mn.FormatError, r"quantization block is 4, not an object"),
])
def test_bad_quantization_values(ckpt_dir, quant, error, match):
    """An MLX quantization block (or a per-layer override) with bits / group sizes MLX does not have, or of the wrong
    type: a typed error naming the tensor and the value (bits 0 divided by zero)."""
    save_file({"model.layers.0.mlp.up_proj.weight": torch.zeros(4, 4, dtype=torch.uint32),
               "model.layers.0.mlp.up_proj.scales": torch.ones(4, 1), "model.layers.0.mlp.up_proj.biases":
               torch.zeros(4, 1)}, str(ckpt_dir / "model-2.safetensors"))
    cfg = json.loads((ckpt_dir / "config.json").read_text())
    (ckpt_dir / "config.json").write_text(json.dumps(dict(cfg, quantization=quant)))
    with pytest.raises(error, match=match):
        load_checkpoint(str(ckpt_dir))


@pytest.mark.parametrize("scales, biases, match", [
    (torch.ones(3, 1), torch.zeros(3, 1), r"scales \(3, 1\) and biases \(3, 1\): MLX affine needs"),
    (torch.ones(4, 1), torch.zeros(4, 2), r"scales \(4, 1\) and biases \(4, 2\)"),
    (torch.ones(4, 1, dtype=torch.int32), torch.zeros(4, 1), r"scales torch.int32 / biases torch.float32, expected"),
])
def test_malformed_affine_tensors(ckpt_dir, scales, biases, match):
    """Scales / biases whose rows or shapes disagree with the packed weight or each other, or are not floats:
    FormatError naming the tensor at load (they raised the ops' InvalidArgumentError, or a RuntimeError where
    q/k/v are fused, at the first step)."""
    save_file({"model.layers.0.mlp.up_proj.weight": torch.zeros(4, 4, dtype=torch.uint32),
               "model.layers.0.mlp.up_proj.scales": scales, "model.layers.0.mlp.up_proj.biases": biases},
              str(ckpt_dir / "model-2.safetensors"))
    cfg = json.loads((ckpt_dir / "config.json").read_text())
    (ckpt_dir / "config.json").write_text(json.dumps(dict(cfg, quantization={"group_size": 32, "bits": 4})))
    with pytest.raises(mn.FormatError, match=match):
        load_checkpoint(str(ckpt_dir))


@pytest.mark.parametrize("key, value, match", [
    ("num_attention_heads", 0, r"num_attention_heads = 0 is not an integer in \[1, "),
    ("hidden_size", "64", r"hidden_size = '64' is not an integer"),
    ("num_hidden_layers", [3], r"num_hidden_layers = \[3\] is not an integer"),
    ("head_dim", 2**40, r"head_dim = 1099511627776 is not an integer in \[1, 65536\]"),
    ("rms_norm_eps", "x", r"llama config: rms_norm_eps = 'x' is not a finite positive number"),
    ("num_key_value_heads", 3, r"k_proj.weight' has shape \(32, 64\); the model's config makes it \(48, 64\)"),
])
def test_bad_config_values_name_the_key(tmp_path, key, value, match):
    """config.json counts of the wrong type or range (they raised ValueError / TypeError / ZeroDivisionError, or
    tried to allocate a 2**40-wide RoPE table) and counts that disagree with the tensors: FormatError naming them."""
    from models.tiny import make_hf_model, save_hf

    d = save_hf(make_hf_model("llama"), str(tmp_path / "m"))
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg[key] = value
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(mn.FormatError, match=match):
        mn.load(d, device="cpu")


def test_config_not_an_object(ckpt_dir):
    """config.json holding a list: FormatError (it raised AttributeError)."""
    (ckpt_dir / "config.json").write_text("[1, 2]")
    with pytest.raises(mn.FormatError, match=r"config.json: a list, not a JSON object"):
        load_checkpoint(str(ckpt_dir))
