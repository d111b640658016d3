"""GGUF checkpoints through the ``gguf`` package (memory-mapped).

The header is first walked by a small validator that knows every offset, so a
truncated or corrupt file raises :class:`~mlx_native.errors.FormatError` naming
the byte offset (header) or the tensor (data) before any tensor is touched.
Then ``gguf.GGUFReader`` memory-maps the file; quantized tensors stay raw GGML
blocks (:class:`GGMLWeight`) for the quantized matmul ops, and the metadata is
mapped to a Hugging Face style config dict.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import warnings
from typing import Any

import numpy as np
import torch

from ..errors import FormatError, UnsupportedError
from .values import REQUIRED, config_float, config_int
from .weights import Checkpoint, DenseWeight, GGMLWeight

GGUF_MAGIC = b"GGUF"

# GGUF value types -> struct format (scalars)
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

SUPPORTED_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "qwen3moe", "gemma3")


def _ggml_sizes() -> dict[int, tuple[int, int, str]]:
    import gguf

    return {int(t): (*gguf.GGML_QUANT_SIZES[t], t.name) for t in gguf.GGMLQuantizationType
            if t in gguf.GGML_QUANT_SIZES}


class _Walker:
    """Walks a GGUF header, checking every length against the file size."""

    def __init__(self, path: str, buf, size: int):
        self.path, self.buf, self.size, self.pos = path, buf, size, 0

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise FormatError(f"{self.path}: truncated or corrupt GGUF header at offset {self.pos}: {what} needs "
                              f"{n} bytes but the file has {self.size - self.pos} left")

    def scalar(self, fmt: str, what: str):
        n = struct.calcsize(fmt)
        self.need(n, what)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return v

    def string(self, what: str, keep: bool = True):
        n = self.scalar("<Q", f"length of {what}")
        self.need(n, what)
        s = bytes(self.buf[self.pos:self.pos + n]) if keep else None
        self.pos += n
        if keep:
            try:
                return s.decode("utf-8")
            except UnicodeDecodeError:
                raise FormatError(f"{self.path}: {what} at offset {self.pos - n} is not valid UTF-8") from None
        return None

    def value(self, vtype: int, what: str, keep: bool):
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype], what)
        if vtype == _STRING:
            return self.string(what, keep)
        if vtype == _ARRAY:
            start = self.pos
            itype = self.scalar("<I", f"item type of {what}")
            count = self.scalar("<Q", f"item count of {what}")
            if itype in _SCALAR:
                n = struct.calcsize(_SCALAR[itype]) * count
                self.need(n, what)
                self.pos += n
                return None
            if itype == _STRING:
                if count > self.size:
                    raise FormatError(f"{self.path}: corrupt GGUF header at offset {start}: {what} claims {count} "
                                      f"strings")
                for i in range(count):
                    self.string(f"{what}[{i}]", keep=False)
                return None
            raise FormatError(f"{self.path}: corrupt GGUF header at offset {start}: {what} has unknown item type "
                              f"{itype}")
        raise FormatError(f"{self.path}: corrupt GGUF header at offset {self.pos - 4}: {what} has unknown value "
                          f"type {vtype}")


def validate(path: str) -> None:
    """Check the header and that every tensor's data lies inside the file.

    Raises:
        FormatError: naming the offset of the bad header field, or the tensor
            whose data runs past the end of the file.
    """
    size = os.path.getsize(path)
    if size < 24:
        raise FormatError(f"{path}: not a GGUF file: {size} bytes, a GGUF header needs at least 24")
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if buf[:4] != GGUF_MAGIC:
            raise FormatError(f"{path}: not a GGUF file: magic at offset 0 is {bytes(buf[:4])!r}, expected b'GGUF'")
        w = _Walker(path, buf, size)
        w.pos = 4
        version = w.scalar("<I", "version")
        if version not in (2, 3):
            raise FormatError(f"{path}: GGUF version {version} at offset 4 is not supported (supported: 2, 3)")
        n_tensors = w.scalar("<Q", "tensor count")
        n_kv = w.scalar("<Q", "key/value count")
        if n_tensors > size or n_kv > size:
            raise FormatError(f"{path}: corrupt GGUF header at offset 8: {n_tensors} tensors, {n_kv} keys")
        alignment = 32
        for _ in range(n_kv):
            key = w.string("key")
            vtype = w.scalar("<I", f"type of {key}")
            v = w.value(vtype, key, keep=key == "general.alignment")
            if key == "general.alignment":
                alignment = int(v)
        sizes = _ggml_sizes()
        infos = []
        for _ in range(n_tensors):
            at = w.pos
            name = w.string("tensor name")
            n_dims = w.scalar("<I", f"dims of {name}")
            if not 1 <= n_dims <= 4:
                raise FormatError(f"{path}: corrupt tensor info of {name} at offset {at}: {n_dims} dims")
            dims = [w.scalar("<Q", f"shape of {name}") for _ in range(n_dims)]
            ttype = w.scalar("<I", f"type of {name}")
            offset = w.scalar("<Q", f"data offset of {name}")
            if ttype not in sizes:
                raise FormatError(f"{path}: tensor {name} (info at offset {at}) has unknown GGML type {ttype}")
            block, type_size, _ = sizes[ttype]
            n = 1
            for d in dims:
                n *= d
            if dims[0] % block:
                raise FormatError(f"{path}: tensor {name}: row length {dims[0]} is not a multiple of the "
                                  f"{sizes[ttype][2]} block size {block}")
            infos.append((name, offset, n // block * type_size))
        data_start = (w.pos + alignment - 1) // alignment * alignment
        for name, offset, nbytes in infos:
            start = data_start + offset
            if start + nbytes > size:
                raise FormatError(f"{path}: tensor {name}: data at offsets [{start}, {start + nbytes}) runs past the "
                                  f"end of the file ({size} bytes): truncated file")
    finally:
        buf.close()


def _field(reader, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return default
    value = f.contents()
    return value


def read_metadata(reader) -> dict[str, Any]:
    """Every key/value except the big tokenizer arrays."""
    out = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF.") or key in _TOKENIZER_ARRAYS:
            continue
        out[key] = f.contents()
    return out


_TOKENIZER_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                     "tokenizer.ggml.scores", "tokenizer.ggml.precompiled_charsmap")


def tokenizer_metadata(reader) -> dict[str, Any]:
    out = {}
    for key, f in reader.fields.items():
        if key.startswith("tokenizer."):
            out[key[len("tokenizer."):]] = f.contents()
    return out


# ---------------------------------------------------------------------------- names

_LAYER_MAP_COMMON = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_LAYER_MAP = {
    "llama": {**_LAYER_MAP_COMMON, "ffn_norm": "post_attention_layernorm"},
    "qwen2": {**_LAYER_MAP_COMMON, "ffn_norm": "post_attention_layernorm"},
    "qwen3": {**_LAYER_MAP_COMMON, "ffn_norm": "post_attention_layernorm"},
    "gemma3": {**_LAYER_MAP_COMMON, "ffn_norm": "pre_feedforward_layernorm",
               "post_attention_norm": "post_attention_layernorm", "post_ffw_norm": "post_feedforward_layernorm"},
}
_LAYER_MAP["mistral"] = _LAYER_MAP["llama"]
# Qwen3-MoE: the router and the experts stacked [E, out, in] (mlx-lm's SwitchGLU names without "switch_mlp")
_LAYER_MAP["qwen3moe"] = {**_LAYER_MAP["qwen3"], "ffn_gate_inp": "mlp.gate", "ffn_gate_exps": "mlp.experts.gate_proj",
                          "ffn_up_exps": "mlp.experts.up_proj", "ffn_down_exps": "mlp.experts.down_proj"}
# GGUF architecture <-> Hugging Face model_type where they differ
_MODEL_TYPE = {"mistral": "llama", "qwen3moe": "qwen3_moe"}
_GGUF_ARCH = {"qwen3_moe": "qwen3moe"}
_GLOBAL_MAP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
               "rope_freqs": "rope_freqs"}
_BLK = re.compile(r"^blk\.(\d+)\.([a-z_0-9]+)\.(weight|bias)$")


def hf_name(arch: str, name: str) -> str:
    m = _BLK.match(name)
    if m:
        layer, part, kind = m.groups()
        mapped = _LAYER_MAP[arch].get(part)
        if mapped is None:
            raise UnsupportedError(f"GGUF tensor {name}: {part!r} is not a known {arch} tensor")
        return f"model.layers.{layer}.{mapped}.{kind}"
    base, _, kind = name.rpartition(".")
    if base in _GLOBAL_MAP:
        return f"{_GLOBAL_MAP[base]}.{kind}"
    raise UnsupportedError(f"GGUF tensor {name} is not a known {arch} tensor")


# ---------------------------------------------------------------------------- config

def hf_config(meta: dict[str, Any], n_vocab: int, has_output: bool) -> dict[str, Any]:
    """Hugging Face style config from GGUF metadata."""
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedError(f"GGUF architecture {arch!r} is not supported; supported: "
                               f"{', '.join(SUPPORTED_ARCHITECTURES)}")

    def g(key, default=None):
        return meta.get(f"{arch}.{key}", default)

    def count(key, default=REQUIRED, **kw):
        return config_int(meta, f"{arch}.{key}", "GGUF metadata", default, **kw)

    def real(key, default, **kw):
        return config_float(meta, f"{arch}.{key}", "GGUF metadata", default, **kw)

    hidden = count("embedding_length")
    heads = count("attention.head_count")
    head_dim = count("attention.key_length", hidden // heads)
    model_type = _MODEL_TYPE.get(arch, arch)
    cfg: dict[str, Any] = {
        "model_type": model_type,
        "vocab_size": count("vocab_size", n_vocab),
        "hidden_size": hidden,
        "intermediate_size": count("feed_forward_length", 0 if arch == "qwen3moe" else REQUIRED),
        "num_hidden_layers": count("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": count("attention.head_count_kv", heads, per_layer=True),
        "head_dim": head_dim,
        "rms_norm_eps": real("attention.layer_norm_rms_epsilon", 1e-6),
        "rope_theta": real("rope.freq_base", 10000.0),
        "max_position_embeddings": count("context_length", 4096),
        "tie_word_embeddings": not has_output,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        # llama.cpp's converter permutes q/k rows of Llama-family models for its
        # adjacent-pair ("normal") RoPE; rotating adjacent pairs gives the same math.
        "_mlx_native_rope_traditional": arch in ("llama", "mistral"),
    }
    rope_dims = count("rope.dimension_count", head_dim)
    if rope_dims != head_dim:
        cfg["partial_rotary_factor"] = rope_dims / head_dim
    scaling = g("rope.scaling.type")
    if scaling in ("linear",):
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": real("rope.scaling.factor", 1.0)}
    elif scaling not in (None, "none"):
        raise UnsupportedError(f"GGUF rope scaling {scaling!r} is not supported; supported: none, linear "
                               f"(and llama3 frequency factors in rope_freqs.weight)")
    if arch == "qwen2":
        cfg["attention_bias"] = True
    if arch == "qwen3moe":  # llama.cpp's qwen3moe graph: softmax routing, top-k weights renormalized
        cfg.update(num_experts=count("expert_count"), num_experts_per_tok=count("expert_used_count"),
                   moe_intermediate_size=count("expert_feed_forward_length"),
                   norm_topk_prob=bool(g("expert_weights_norm", True)))
    if arch == "gemma3":
        n_layers = cfg["num_hidden_layers"]
        cfg.update(
            sliding_window=count("attention.sliding_window", 4096),
            layer_types=["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n_layers)],
            rope_local_base_freq=10000.0,
            query_pre_attn_scalar=hidden // heads if hidden == 5376 else head_dim,  # llama.cpp: 27B uses d/h
            hidden_activation="gelu_pytorch_tanh",
            final_logit_softcapping=real("final_logit_softcapping", None, zero_ok=True),
            attn_logit_softcapping=real("attn_logit_softcapping", None, zero_ok=True),
            # llama.cpp stores Gemma norm weights with the +1 already added
            _mlx_native_norm_offset=0.0,
        )
    return cfg


# ---------------------------------------------------------------------------- loader

def load_gguf(path: str) -> Checkpoint:
    """Read a GGUF file: validate, memory-map, map names and metadata.

    Raises:
        FormatError: truncated/corrupt file (offset or tensor name in the message).
        UnsupportedError: architecture or tensor names we do not support.
    """
    import gguf

    validate(path)
    try:
        reader = gguf.GGUFReader(path, "r")
    except Exception as exc:  # noqa: BLE001 - the validator passed, so this is a gguf-level surprise
        raise FormatError(f"{path}: the gguf package could not read the file: {exc}") from exc
    meta = read_metadata(reader)
    tok_meta = tokenizer_metadata(reader)
    arch = meta.get("general.architecture")
    names = {t.name for t in reader.tensors}
    n_vocab = len(tok_meta.get("ggml.tokens", [])) or 0
    try:
        config = hf_config(meta, n_vocab, has_output="output.weight" in names)
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from None
    if arch == "qwen3moe":  # layers without a router are dense (mlp_only_layers; llama.cpp writes none)
        config["mlp_only_layers"] = [i for i in range(config["num_hidden_layers"])
                                     if f"blk.{i}.ffn_gate_inp.weight" not in names]
    weights = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about read-only memmaps; we never write them
        for t in reader.tensors:
            name = hf_name(arch, t.name)
            ttype = int(t.tensor_type)
            shape = tuple(int(s) for s in reversed(t.shape.tolist()))  # ggml ne -> [out, in]
            data = np.asarray(t.data)
            if ttype in (0, 1) and data.dtype != np.uint8:
                weights[name] = DenseWeight(torch.from_numpy(data.reshape(shape)))
            elif ttype == 30:  # BF16
                raw = torch.from_numpy(data.view(np.uint8).reshape(-1)).view(torch.bfloat16)
                weights[name] = DenseWeight(raw.reshape(shape))
            else:
                rows = 1
                for s in shape[:-1]:
                    rows *= s
                raw = torch.from_numpy(data.view(np.uint8).reshape(rows, -1))
                weights[name] = GGMLWeight(raw, ttype, t.tensor_type.name, shape)
    return Checkpoint(path=path, format="gguf", config=config, weights=weights, metadata=meta,
                      tokenizer={"gguf": tok_meta})


# ---------------------------------------------------------------------------- writer

def _permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row permutation for Llama models (half-split pairs -> adjacent pairs)."""
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def write_gguf(path: str, config: dict[str, Any], tensors: dict[str, np.ndarray], *,
               matrix_type: str = "Q8_0", types: dict[str, str] | None = None,
               tokenizer: dict[str, Any] | None = None) -> str:
    """Write a GGUF file the way llama.cpp's converter lays it out (for tests and synthetic benchmarks).

    Args:
        path: output file.
        config: Hugging Face style config (``model_type`` llama, qwen2, qwen3, qwen3_moe or gemma3).
        tensors: Hugging Face names -> float32 arrays (``[out, in]`` matrices, 1-D vectors; Qwen3-MoE experts
            stacked ``[E, out, in]`` as ``model.layers.N.mlp.experts.{gate,up,down}_proj.weight``).
        matrix_type: GGML type of 2-D and 3-D weights (F32, F16, Q4_0, Q4_1, Q8_0, Q4_K, ...);
            1-D tensors are F32.
        types: per-tensor overrides (HF name -> type name); a uint8 array is written as
            raw blocks of its type.
        tokenizer: ``tokens``, ``token_type``, ``merges``, ``model`` ("gpt2"), ``pre``,
            ``bos``, ``eos``, ``chat_template`` (all optional but ``tokens``).

    Llama q/k rows are permuted as llama.cpp does; Gemma norm weights get +1.
    """
    import gguf

    arch = _GGUF_ARCH.get(config["model_type"], config["model_type"])
    if arch not in _LAYER_MAP:
        raise UnsupportedError(f"write_gguf: architecture {config['model_type']!r}; supported: "
                               f"{', '.join(_MODEL_TYPE.get(a, a) for a in _LAYER_MAP)}")
    inverse = {v: k for k, v in _LAYER_MAP[arch].items()}
    inverse_global = {v: k for k, v in _GLOBAL_MAP.items()}
    w = gguf.GGUFWriter(path, arch)
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    w.add_block_count(config["num_hidden_layers"])
    w.add_context_length(config.get("max_position_embeddings", 4096))
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    if arch == "qwen3moe":
        w.add_expert_count(config.get("num_experts") or config["num_local_experts"])  # transformers 5 renamed it
        w.add_expert_used_count(config["num_experts_per_tok"])
        w.add_expert_feed_forward_length(config["moe_intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(config["vocab_size"])
    if arch == "gemma3" and config.get("sliding_window"):
        w.add_sliding_window(int(config["sliding_window"]))
    tok = tokenizer or {"tokens": [f"<t{i}>" for i in range(config["vocab_size"])]}
    w.add_tokenizer_model(tok.get("model", "gpt2"))
    if tok.get("pre"):
        w.add_tokenizer_pre(tok["pre"])
    w.add_token_list(tok["tokens"])
    if tok.get("token_type") is not None:
        w.add_token_types(tok["token_type"])
    if tok.get("merges") is not None:
        w.add_token_merges(tok["merges"])
    if tok.get("bos") is not None:
        w.add_bos_token_id(tok["bos"])
    if tok.get("eos") is not None:
        w.add_eos_token_id(tok["eos"])
    if tok.get("chat_template"):
        w.add_chat_template(tok["chat_template"])
    types = types or {}
    for name, data in tensors.items():
        m = re.match(r"^model\.layers\.(\d+)\.(.+)\.(weight|bias)$", name)
        if m:
            layer, part, kind = m.groups()
            gname = f"blk.{layer}.{inverse[part]}.{kind}"
        else:
            base, _, kind = name.rpartition(".")
            gname = f"{inverse_global[base]}.{kind}"
        if data.dtype == np.uint8:  # raw blocks of types["name"] given as bytes [rows, row_bytes]
            qtype = gguf.GGMLQuantizationType[types[name]]
            w.add_tensor(gname, data, raw_dtype=qtype)
            continue
        data = np.ascontiguousarray(data, dtype=np.float32)
        if arch in ("llama", "mistral") and name.endswith(("q_proj.weight", "q_proj.bias")):
            data = _permute_qk(data, heads)
        elif arch in ("llama", "mistral") and name.endswith(("k_proj.weight", "k_proj.bias")):
            data = _permute_qk(data, kv)
        if arch == "gemma3" and name.endswith("norm.weight"):
            data = data + 1.0
        tname = types.get(name, matrix_type if data.ndim >= 2 else "F32")
        qtype = gguf.GGMLQuantizationType[tname]
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(gname, data)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(gname, data.astype(np.float16))
        else:
            w.add_tensor(gname, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
