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


def _patched(path, tmp_path, key: str, value: bytes = b"", name: bytes = b"") -> str:
    """A copy of the GGUF at ``path`` with metadata ``key``'s value bytes (after its type) replaced by ``value``, or
    its name by ``name`` (same length)."""
    raw = bytearray(open(path, "rb").read())
    k = key.encode()
    at = raw.index(struct.pack("<Q", len(k)) + k) + 8
    if name:
        raw[at:at + len(k)] = name
    else:
        raw[at + len(k) + 4:at + len(k) + 4 + len(value)] = value
    out = tmp_path / "patched.gguf"
    out.write_bytes(bytes(raw))
    return str(out)


@pytest.mark.parametrize("key, value, name, match", [
    ("llama.attention.head_count", b"", b"llama.attention.head_cXunt", "required key llama.attention.head_count is "
     "missing"),
    ("llama.block_count", struct.pack("<I", 0), b"",
     r"GGUF metadata: llama.block_count = 0 is not an integer in \[1, 2147483647\]"),
    ("llama.embedding_length", struct.pack("<I", 2**32 - 1), b"", r"llama.embedding_length = 4294967295 is not"),
    ("llama.rope.freq_base", struct.pack("<f", float("nan")), b"", r"llama.rope.freq_base = nan is not a finite"),
    ("llama.attention.layer_norm_rms_epsilon", struct.pack("<f", -1.0), b"", r"epsilon = -1.0 is not a finite"),
])
def test_bad_metadata_names_the_key(tmp_path, key, value, name, match):
    """A required key missing, a count of 0 or past int32, a non-finite or negative float: FormatError naming the
    key (they raised TypeError / ZeroDivisionError, or built a model that failed at its first step)."""
    _, path = _tiny_gguf(tmp_path / "m.gguf")
    with pytest.raises(mn.FormatError, match=match):
        mn.load(_patched(path, tmp_path, key, value, name), device="cpu")


def test_tensor_shapes_against_the_config(tmp_path):
    """Metadata that disagrees with the tensors (2 heads where q_proj holds 4 of 16): FormatError naming the tensor,
    its shape and the config's, at load, not a wrong answer or a reshape error at the first step."""
    _, path = _tiny_gguf(tmp_path / "m.gguf")
    bad = _patched(path, tmp_path, "llama.attention.head_count", struct.pack("<I", 2))
    with pytest.raises(mn.FormatError, match=r"tensor 'model.layers.0.self_attn.q_proj.weight' has shape \(64, 64\); "
                                             r"the model's config makes it \(32, 64\)"):
        mn.load(bad, device="cpu")


def test_random_corruption_raises_format_errors_only(tmp_path):
    """Seeded random damage to a GGUF (truncation anywhere, bytes of the header overwritten, 8-byte header fields set
    to extreme counts): every load either succeeds or raises FormatError / UnsupportedError, each within a second
    or two (no hang, no huge allocation)."""
    import random
    import time

    import gguf

    _, path = _tiny_gguf(tmp_path / "m.gguf")
    raw = open(path, "rb").read()
    header = gguf.GGUFReader(path).data_offset  # metadata and tensor infos
    rng = random.Random(0)
    outcomes = {}
    for case in range(90):
        damaged = bytearray(raw)
        if case % 3 == 0:
            damaged = damaged[:rng.randrange(len(raw))]
        elif case % 3 == 1:
            for _ in range(rng.randint(1, 8)):
                damaged[rng.randrange(header)] = rng.randrange(256)
        else:
            at = rng.randrange(header - 8)
            damaged[at:at + 8] = struct.pack("<Q", rng.choice([2**63 - 1, 2**40, 2**32, 2**32 - 1, 0, 1]))
        p = tmp_path / "damaged.gguf"
        p.write_bytes(bytes(damaged))
        start = time.perf_counter()
        try:
            mn.load(str(p), device="cpu")
            outcome = "loaded"
        except (mn.FormatError, mn.UnsupportedError) as exc:
            outcome = type(exc).__name__
        assert time.perf_counter() - start < 10, f"case {case}: {outcome} after {time.perf_counter() - start:.1f} s"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("FormatError", 0) > 45, outcomes


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
    cfg.update(hidden_size=256, head_dim=64)  # the IQ2 block is 256 wide; 4 heads of 64, 2 kv heads
    sd = {}
    rng = np.random.default_rng(0)
    for k, v in hf.state_dict().items():
        shape = tuple({64: 256, 32: 128}.get(s, s) for s in v.shape)
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
