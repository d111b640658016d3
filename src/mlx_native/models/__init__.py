"""Model architectures, one file each, built only from mlx-native ops.

    model = build_model(checkpoint, LoadOptions(device, dtype, keep_quantized))
"""

from __future__ import annotations

from ..errors import UnsupportedError
from ..formats.weights import Checkpoint
from .base import CausalLM, LoadOptions, ModelCache

_ARCHS = {
    "llama": ("llama", "LlamaModel"),
    "mistral": ("llama", "LlamaModel"),
    "qwen2": ("qwen", "Qwen2Model"),
    "qwen3": ("qwen", "Qwen3Model"),
    "qwen3_moe": ("qwen", "Qwen3MoeModel"),
    "gemma3": ("gemma3", "Gemma3Model"),
    "gemma3_text": ("gemma3", "Gemma3Model"),
    "gemma4": ("gemma4", "Gemma4Model"),
    "gemma4_text": ("gemma4", "Gemma4Model"),
}
SUPPORTED = ("llama (Llama 2/3, SmolLM2)", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma3 / gemma3_text",
             "gemma4 / gemma4_text (dense)")


def model_class(model_type: str):
    import importlib

    if model_type not in _ARCHS:
        raise UnsupportedError(f"architecture {model_type!r} is not supported; supported: {', '.join(SUPPORTED)}")
    module, name = _ARCHS[model_type]
    return getattr(importlib.import_module(f".{module}", __name__), name)


def build_model(ckpt: Checkpoint, opts: LoadOptions) -> CausalLM:
    """Instantiate the architecture named by ``ckpt.config['model_type']``.

    Raises:
        UnsupportedError: unknown architecture (the message lists the supported ones)
            or an unsupported feature of a known one.
        FormatError: a tensor the architecture needs is missing.
    """
    model_type = ckpt.config.get("model_type")
    if model_type is None:
        archs = ckpt.config.get("architectures") or []
        guess = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
                 "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe", "Gemma3ForCausalLM": "gemma3_text"}
        model_type = next((guess[a] for a in archs if a in guess), None)
    return model_class(model_type)(ckpt, opts)


__all__ = ["CausalLM", "LoadOptions", "ModelCache", "build_model", "model_class", "SUPPORTED"]
