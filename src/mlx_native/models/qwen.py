"""Qwen2 / Qwen2.5 (q/k/v bias), Qwen3 (per-head q/k RMS norm, no bias) and Qwen3-MoE models.

All are the Llama decoder with these switches: Qwen2's biases are read from
the checkpoint; Qwen3 runs q/k through ``head_norm_rope_qk`` (both norms and
RoPE in one kernel); Qwen3-MoE is Qwen3 with sparse FFN layers (``moe.SparseMoE``:
``num_experts`` experts, ``num_experts_per_tok`` chosen per token).
"""

from __future__ import annotations

from ..formats.values import config_int
from ..formats.weights import Checkpoint
from .base import LoadOptions, WeightSource
from .llama import LlamaConfig, LlamaMLP, LlamaModel
from .moe import SparseMoE, load_experts


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


class Qwen3MoeModel(LlamaModel):
    """Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): layer ``i`` is sparse unless listed in ``mlp_only_layers``,
    every ``decoder_sparse_step``-th layer (Hugging Face's rule); the others have a dense SwiGLU MLP."""

    arch = "qwen3_moe"

    def __init__(self, ckpt: Checkpoint, opts: LoadOptions):
        cfg = ckpt.config
        where = f"{self.arch} config"
        self.num_experts = config_int(cfg, "num_experts", where, default=None) or config_int(
            cfg, "num_local_experts", where)
        self.top_k = config_int(cfg, "num_experts_per_tok", where, most=self.num_experts)
        self.moe_inter = config_int(cfg, "moe_intermediate_size", where)
        self.sparse_step = config_int(cfg, "decoder_sparse_step", where, default=1)
        self.dense_layers = set(cfg.get("mlp_only_layers") or [])
        self.renormalize = bool(cfg.get("norm_topk_prob", True))
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window", False) else None
        # intermediate_size sizes only the dense layers, which read it from their tensors (0 in all-sparse GGUFs)
        super().__init__(ckpt, opts, LlamaConfig.from_hf(dict(cfg, intermediate_size=cfg.get("intermediate_size") or 1),
                                                         self.arch, qk_norm=True, sliding_window=window))

    def _mlp(self, cfg: LlamaConfig, ws: WeightSource, prefix: str, layer: int):
        if layer in self.dense_layers or (layer + 1) % self.sparse_step:
            return LlamaMLP(cfg, ws, prefix)
        hidden = cfg.hidden_size
        router = ws.linear(f"{prefix}.gate", (self.num_experts, hidden))
        experts = load_experts(ws, prefix, self.num_experts, hidden, self.moe_inter)
        return SparseMoE(router, experts, self.top_k, self.renormalize)
