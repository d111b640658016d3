"""Qwen2 / Qwen2.5 (q/k/v bias) and Qwen3 (per-head q/k RMS norm, no bias) dense models.

Both are the Llama decoder with these switches: Qwen2's biases are read from
the checkpoint; Qwen3 runs q/k through ``head_norm_rope`` (norm + RoPE in one
kernel per tensor).
"""

from __future__ import annotations

from ..formats.weights import Checkpoint
from .base import LoadOptions
from .llama import LlamaConfig, LlamaModel


class Qwen2Model(LlamaModel):
    arch = "qwen2"

    def __init__(self, ckpt: Checkpoint, opts: LoadOptions):
        cfg = ckpt.config
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window", False) else None
        super().__init__(ckpt, opts, LlamaConfig.from_hf(cfg, self.arch, sliding_window=window))


class Qwen3Model(LlamaModel):
    arch = "qwen3"

    def __init__(self, ckpt: Checkpoint, opts: LoadOptions):
        cfg = ckpt.config
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window", False) else None
        super().__init__(ckpt, opts, LlamaConfig.from_hf(cfg, self.arch, qk_norm=True, sliding_window=window))
