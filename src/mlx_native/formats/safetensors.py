"""MLX and Hugging Face checkpoints: a directory with ``config.json`` and ``*.safetensors``.

* Hugging Face: plain float tensors (fp32/fp16/bf16).
* MLX (mlx-lm layout): the same names; a linear or embedding quantized with
  ``mx.quantize`` stores ``<name>.weight`` (uint32), ``<name>.scales`` and
  ``<name>.biases``. ``config.json`` has a ``quantization`` block
  (``{"group_size": 64, "bits": 4, "<module path>": {...} | false}``) whose
  per-module entries override the defaults.

The header of every file is validated before anything is mapped: a truncated
or corrupt file raises :class:`~mlx_native.errors.FormatError` naming the
tensor or the offset.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import torch

from ..errors import FormatError, UnsupportedError
from ..ops.quant.ref import SUPPORTED_BITS, SUPPORTED_GROUP_SIZES
from .weights import AffineWeight, Checkpoint, DenseWeight

_DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "U32": 4, "I32": 4, "I64": 8, "U8": 1, "I8": 1, "F64": 8, "BOOL": 1,
           "U16": 2, "I16": 2, "U64": 8}


def validate_file(path: str) -> dict[str, Any]:
    """Parse and check a safetensors header; returns it.

    Raises:
        FormatError: bad header length or JSON (with the offset), or a tensor
            whose byte range is inconsistent with its shape or lies past the end.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise FormatError(f"{path}: truncated safetensors file: {size} bytes, the header length needs 8")
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            raise FormatError(f"{path}: truncated or corrupt safetensors header: offset 0 says the header has {n} "
                              f"bytes but the file has {size}")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        pos = getattr(exc, "pos", getattr(exc, "start", 0))
        raise FormatError(f"{path}: corrupt safetensors header: invalid JSON at offset {8 + pos}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: corrupt safetensors header at offset 8: not a JSON object")
    data_size = size - 8 - n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise FormatError(f"{path}: tensor {name}: malformed header entry {info!r}") from None
        if dtype not in _DTYPES:
            raise UnsupportedError(f"{path}: tensor {name} has dtype {dtype}; supported: {', '.join(_DTYPES)}")
        numel = 1
        for s in shape:
            numel *= int(s)
        if end - start != numel * _DTYPES[dtype] or start < 0:
            raise FormatError(f"{path}: tensor {name}: data offsets [{start}, {end}) do not hold {dtype} {shape}")
        if end > data_size:
            raise FormatError(f"{path}: tensor {name}: data at offsets [{8 + n + start}, {8 + n + end}) runs past "
                              f"the end of the file ({size} bytes): truncated file")
    return header


def _read_config(path: str) -> dict[str, Any]:
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
        raise FormatError(f"{path}: no config.json (a checkpoint directory needs config.json and *.safetensors)")
    try:
        with open(cfg_path) as f:
            cfg = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{cfg_path}: invalid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise FormatError(f"{cfg_path}: a {type(cfg).__name__}, not a JSON object")
    return cfg


def _unwrap_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Multimodal wrappers (Gemma 3/4 ``text_config``) -> the text model's config."""
    text = cfg.get("text_config")
    if isinstance(text, dict) and cfg.get("model_type") in ("gemma3", "gemma4"):
        merged = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config", "audio_config")}
        merged.update(text)
        merged["model_type"] = cfg["model_type"] + "_text"
        return merged
    return cfg


def _strip_prefix(name: str) -> str | None:
    """Normalize names of wrapped checkpoints; None for towers we do not load (vision, audio)."""
    for prefix in ("language_model.model.", "model.language_model."):
        if name.startswith(prefix):
            return "model." + name[len(prefix):]
    if name.startswith("language_model.lm_head."):
        return name[len("language_model."):]
    if name.startswith(("vision_tower.", "multi_modal_projector.", "model.vision_tower.", "audio_tower.",
                        "model.audio_tower.", "model.embed_vision.", "model.embed_audio.", "embed_vision.",
                        "embed_audio.", "model.multi_modal_projector.")):
        return None
    return name


def load_safetensors_dir(path: str) -> Checkpoint:
    """Load an MLX or Hugging Face checkpoint directory (memory-mapped).

    Raises:
        FormatError: missing config.json / safetensors, bad headers, quantized
            tensors without scales/biases.
        UnsupportedError: a quantization mode other than MLX affine.
    """
    from safetensors import safe_open

    raw_cfg = _read_config(path)
    cfg = _unwrap_config(raw_cfg)
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files:
        raise FormatError(f"{path}: no *.safetensors files")
    tensors: dict[str, torch.Tensor] = {}
    metadata: dict[str, Any] = {}
    for fname in files:
        fpath = os.path.join(path, fname)
        header = validate_file(fpath)
        metadata.update(header.get("__metadata__") or {})
        try:
            with safe_open(fpath, framework="pt") as f:
                for name in f.keys():
                    new = _strip_prefix(name)
                    if new is not None:
                        tensors[new] = f.get_tensor(name)
        except FormatError:
            raise
        except Exception as exc:  # noqa: BLE001 - safetensors' own errors become FormatError
            raise FormatError(f"{fpath}: cannot read safetensors data: {exc}") from exc

    quant = raw_cfg.get("quantization") or raw_cfg.get("quantization_config")
    if quant is not None and not isinstance(quant, dict):
        raise FormatError(f"{path}: config.json's quantization block is {quant!r}, not an object")
    is_mlx = quant is not None and "group_size" in quant or any(n.endswith(".scales") for n in tensors)
    if quant is not None and "group_size" not in quant:
        method = quant.get("quant_method", quant.get("mode", "?"))
        raise UnsupportedError(f"{path}: quantization {method!r} is not supported; supported: MLX affine "
                               f"(config 'quantization' with group_size and bits), or unquantized fp32/fp16/bf16")
    if quant is not None and quant.get("mode", "affine") != "affine":
        raise UnsupportedError(f"{path}: MLX quantization mode {quant['mode']!r} is not supported; supported: affine")
    weights = {}
    for name, t in tensors.items():
        if name.endswith((".scales", ".biases")):
            continue
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module is not None and f"{module}.scales" in tensors:
            if f"{module}.biases" not in tensors:
                raise FormatError(f"{path}: tensor {module}.scales has no {module}.biases (MLX affine needs both)")
            group_size, bits = _quant_params(quant or {}, module, path)
            if t.dtype != torch.uint32 and t.dtype != torch.int32:
                raise FormatError(f"{path}: quantized tensor {name} has dtype {t.dtype}, expected uint32")
            scales, biases = tensors[f"{module}.scales"], tensors[f"{module}.biases"]
            packed = t.view(torch.uint32) if t.dtype == torch.int32 else t
            if t.dim() < 2 or scales.shape != biases.shape or tuple(scales.shape[:-1]) != tuple(t.shape[:-1]):
                raise FormatError(f"{path}: tensor {name} {tuple(t.shape)} with scales {tuple(scales.shape)} and "
                                  f"biases {tuple(biases.shape)}: MLX affine needs scales and biases of one shape, "
                                  f"their rows those of the packed weight")
            if not (scales.is_floating_point() and biases.is_floating_point()):
                raise FormatError(f"{path}: tensor {module}: scales {scales.dtype} / biases {biases.dtype}, "
                                  f"expected floats")
            if scales.shape[-1] * group_size != packed.shape[-1] * 32 // bits:
                raise FormatError(f"{path}: tensor {name}: {packed.shape[-1] * 32 // bits} columns at {bits} bits "
                                  f"do not match {scales.shape[-1]} groups of {group_size}")
            weights[name] = AffineWeight(packed, scales, biases, group_size, bits)
        else:
            if not t.is_floating_point():
                raise FormatError(f"{path}: tensor {name} has dtype {t.dtype} and no scales (not a float weight)")
            weights[name] = DenseWeight(t)
    cfg = dict(cfg)
    return Checkpoint(path=path, format="mlx" if is_mlx else "hf", config=cfg, weights=weights, metadata=metadata,
                      tokenizer={"dir": path})


def _quant_params(quant: dict[str, Any], module: str, path: str) -> tuple[int, int]:
    override = None
    for key in (module, module.replace("model.", "", 1), "language_model." + module):
        if key in quant:
            override = quant[key]
            break
    if isinstance(override, dict):
        group_size, bits = override.get("group_size", quant.get("group_size", 64)), override.get("bits",
                                                                                                quant.get("bits", 4))
    elif "group_size" not in quant:
        raise FormatError(f"{path}: tensor {module} is quantized but config.json has no quantization block")
    else:
        group_size, bits = quant["group_size"], quant.get("bits")
    for name, value, supported in (("group_size", group_size, SUPPORTED_GROUP_SIZES), ("bits", bits, SUPPORTED_BITS)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise FormatError(f"{path}: tensor {module}: quantization {name} = {value!r} is not an integer")
        if value not in supported:
            raise UnsupportedError(f"{path}: tensor {module}: MLX affine {name} = {value} is not supported; "
                                   f"supported: {', '.join(map(str, supported))}")
    return group_size, bits
