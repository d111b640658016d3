"""GGUF loader: metadata -> config, names, validation of truncated / corrupt files,
unsupported architectures and tensor types, files written like llama.cpp."""

import os
import struct

import numpy as np
import pytest
import torch

import mlx_native as mn
from mlx_native.formats import GGMLWeight, default_model_path, load_checkpoint
from mlx_native.formats.gguf import write_gguf
from mlx_native.models import LoadOptions, build_model
from models.tiny import SEQ, make_hf_model


def _tiny_gguf(path, name="llama", matrix_type="F32", types=None):
    hf = make_hf_model(name)
    cfg = hf.config.to_dict()
    if name == "gemma3":
        cfg["model_type"] = "gemma3"
    sd = {k: v.float().numpy() for k, v in hf.state_dict().items()}
    if hf.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    write_gguf(str(path), cfg, sd, matrix_type=matrix_type, types=types)
    return hf, str(path)


def test_smollm2_metadata_and_tensors():
    ckpt = load_checkpoint(default_model_path())
    c = ckpt.config
    assert (c["model_type"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
            c["num_key_value_heads"], c["head_dim"], c["vocab_size"]) == ("llama", 576, 30, 9, 3, 64, 49152)
    assert c["tie_word_embeddings"] and c["rope_theta"] == 100000.0 and c["_mlx_native_rope_traditional"]
    kinds = {}
    for w in ckpt.weights.values():
        kinds[w.quant] = kinds.get(w.quant, 0) + 1
    assert kinds == {"Q4_1": 210, "Q8_0": 1, "F32": 61}
    emb = ckpt.weights["model.embed_tokens.weight"]
    assert isinstance(emb, GGMLWeight) and emb.shape == (49152, 576) and emb.raw.shape == (49152, 612)
    assert ckpt.tokenizer["gguf"]["ggml.model"] == "gpt2"


@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_written_gguf_matches_transformers(tmp_path, name):
    """A GGUF written as llama.cpp does (Llama q/k rows permuted for adjacent-pair RoPE)."""
    hf, path = _tiny_gguf(tmp_path / "m.gguf", name)
    with mn.use_backend("reference"):
        model = build_model(load_checkpoint(path), LoadOptions(torch.device("cpu"), torch.float32, False))
        ids = torch.randint(0, 211, (1, SEQ))
        with torch.no_grad():
            ours = model.forward(ids, model.new_cache(1, 32), start=0, all_logits=True)
            theirs = hf(ids).logits
    assert (ours - theirs).abs().max().item() < 1e-5


def test_quantized_gguf_kernels_match_dequantized(tmp_path, device):
    """Q4_1 / Q8_0 / Q4_K matrices through ggml_matmul / ggml_embedding (interpreter on CPU,
    CUDA on the GPU) against the same blocks dequantized once at load."""
    types = {"model.layers.0.mlp.down_proj.weight": "Q8_0", "model.embed_tokens.weight": "Q8_0"}
    _, path = _tiny_gguf(tmp_path / "q.gguf", "llama", matrix_type="Q4_1", types=types)
    ids = torch.randint(0, 211, (2, SEQ))
    with mn.use_backend("reference"):
        ref_model = build_model(load_checkpoint(path), LoadOptions(torch.device("cpu"), torch.float32, False))
        with torch.no_grad():
            want = ref_model.forward(ids, ref_model.new_cache(2, 32), start=0, all_logits=True)
    model = build_model(load_checkpoint(path), LoadOptions(torch.device(device), torch.float32, True))
    assert isinstance(model.layers[0][1].qkv.weight, GGMLWeight)
    with torch.no_grad():
        got = model.forward(ids.to(device), model.new_cache(2, 32), start=0, all_logits=True).cpu()
    tol = 1e-5 if device == "cpu" else 5e-3
    assert (got - want).abs().max().item() <= tol * want.abs().max().item()


def _truncated_copy(path, nbytes: int, tmp_path) -> str:
    """The first ``nbytes`` of the file at ``path``, as a new file."""
    with open(path, "rb") as f:
        data = f.read(nbytes)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data)
    return str(cut)


def test_truncated_data_names_the_tensor(tmp_path):
    _, path = _tiny_gguf(tmp_path / "m.gguf")
    cut = _truncated_copy(path, os.path.getsize(path) - 100, tmp_path)
    with pytest.raises(mn.FormatError, match=r"tensor output.weight: data at offsets \[\d+, \d+\) runs past the end"):
        load_checkpoint(cut)


def test_truncated_header_names_the_offset(tmp_path):
    _, path = _tiny_gguf(tmp_path / "m.gguf")
    cut = _truncated_copy(path, 200, tmp_path)
    with pytest.raises(mn.FormatError, match=r"truncated or corrupt GGUF header at offset \d+"):
        load_checkpoint(cut)


def test_bad_magic_and_corrupt_lengths(tmp_path):
    _, path = _tiny_gguf(tmp_path / "m.gguf")
    raw = bytearray(open(path, "rb").read())
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUX" + raw[4:])
    with pytest.raises(mn.FormatError, match="magic at offset 0"):
        load_checkpoint(str(bad))
    corrupt = bytearray(raw)
    corrupt[24:32] = struct.pack("<Q", 1 << 40)  # length of the first key
    bad.write_bytes(bytes(corrupt))
    with pytest.raises(mn.FormatError, match="at offset 32"):
        load_checkpoint(str(bad))
    corrupt = bytearray(raw)
    corrupt[4:8] = struct.pack("<I", 7)
    bad.write_bytes(bytes(corrupt))
    with pytest.raises(mn.FormatError, match="GGUF version 7"):
        load_checkpoint(str(bad))


def test_unsupported_architecture(tmp_path):
    import gguf

    path = str(tmp_path / "mamba.gguf")
    w = gguf.GGUFWriter(path, "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(mn.UnsupportedError, match="'mamba' is not supported; supported: llama, mistral, qwen2"):
        load_checkpoint(path)


def test_unsupported_tensor_type(tmp_path):
    import gguf

    qtype = gguf.GGMLQuantizationType.IQ2_XXS
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = np.zeros((96, 256 // block * size), np.uint8)  # gate_proj [96, 64] needs 256-wide rows: use its own shape
    hf = make_hf_model("llama")
    cfg = hf.config.to_dict()
    cfg["hidden_size"] = 256  # the IQ2 block is 256 wide
    sd = {}
    rng = np.random.default_rng(0)
    for k, v in hf.state_dict().items():
        shape = tuple(256 if s == 64 else s for s in v.shape)
        sd[k] = rng.standard_normal(shape).astype(np.float32) * 0.02
    sd["model.layers.0.mlp.gate_proj.weight"] = raw
    path = str(tmp_path / "iq2.gguf")
    write_gguf(path, cfg, sd, types={"model.layers.0.mlp.gate_proj.weight": "IQ2_XXS"})
    with pytest.raises(mn.UnsupportedError, match="IQ2_XXS.*[Ss]upported"):
        mn.load(path, device="cpu")


def test_missing_path_and_not_gguf(tmp_path):
    with pytest.raises(mn.InvalidArgumentError, match="does not exist"):
        load_checkpoint(str(tmp_path / "missing.gguf"))
    p = tmp_path / "x.bin"
    p.write_bytes(b"hello world, not a model")
    with pytest.raises(mn.FormatError, match="not a GGUF file"):
        load_checkpoint(str(p))
