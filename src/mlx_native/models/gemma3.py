"""Gemma 3 text (``gemma3_text``, and the text tower of ``gemma3`` checkpoints).

Differences from Llama: GeGLU MLP (tanh GELU), ``(1 + w)`` RMS norms (the
+1 is already folded into GGUF weights), four norms per layer (sandwich),
per-head q/k RMS norm (one ``head_norm_rope_qk`` launch with RoPE), sliding-
window layers interleaved with global ones (each type with its own RoPE base;
the global one may be linearly scaled), attention scale
``query_pre_attn_scalar ** -0.5``, embeddings scaled by ``sqrt(hidden)``
(rounded to the activation dtype, as the reference does), optional attention
final-logit soft-capping. ``attn_logit_softcapping`` (a Gemma 2 field some
Gemma 3 configs carry) is ignored, as transformers' and mlx-lm's Gemma 3 do.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

import mlx_native as mn

from ..formats.values import config_float, config_int
from ..formats.weights import Checkpoint
from .base import (CausalLM, GatedMLP, Linear, LoadOptions, Step, WeightSource, config_get, rope_freqs,
                   rope_params)

SLIDING, FULL = "sliding_attention", "full_attention"


def layer_types(cfg: dict, n_layers: int, default_pattern: int = 6) -> list[str]:
    types = cfg.get("layer_types")
    if types:
        return list(types)
    pattern = int(config_get(cfg, "sliding_window_pattern", "_sliding_window_pattern", default=default_pattern))
    return [SLIDING if (i + 1) % pattern else FULL for i in range(n_layers)]


@dataclasses.dataclass
class Gemma3Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    query_pre_attn_scalar: float
    sliding_window: Optional[int]
    layer_types: list[str]
    rope: dict  # layer type -> (theta, scaling dict or None)
    final_logit_softcapping: Optional[float]
    norm_offset: float
    tie_word_embeddings: bool
    max_position_embeddings: int

    @classmethod
    def from_hf(cls, cfg: dict) -> "Gemma3Config":
        where = "gemma3 config"
        hidden = config_int(cfg, "hidden_size", where)
        heads = config_int(cfg, "num_attention_heads", where)
        head_dim = config_int(cfg, "head_dim", where, default=hidden // heads, most=2**16)
        n_layers = config_int(cfg, "num_hidden_layers", where)
        if isinstance(cfg.get("rope_parameters"), dict) and FULL in cfg["rope_parameters"]:
            rope = {t: rope_params(cfg, t) for t in (SLIDING, FULL)}
        else:  # legacy: rope_theta + rope_scaling for global layers, rope_local_base_freq for local ones
            rope = {FULL: rope_params(cfg), SLIDING: (float(config_get(cfg, "rope_local_base_freq", default=10000.0)),
                                                       None)}
        return cls(
            vocab_size=config_int(cfg, "vocab_size", where),
            hidden_size=hidden,
            intermediate_size=config_int(cfg, "intermediate_size", where),
            num_layers=n_layers,
            num_heads=heads,
            num_kv_heads=config_int(cfg, "num_key_value_heads", where, default=heads),
            head_dim=head_dim,
            rms_norm_eps=config_float(cfg, "rms_norm_eps", where, default=1e-6),
            query_pre_attn_scalar=config_float(cfg, "query_pre_attn_scalar", where, default=head_dim),
            sliding_window=cfg.get("sliding_window"),
            layer_types=layer_types(cfg, n_layers),
            rope=rope,
            final_logit_softcapping=cfg.get("final_logit_softcapping"),
            norm_offset=float(cfg.get("_mlx_native_norm_offset", 1.0)),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
            max_position_embeddings=config_int(cfg, "max_position_embeddings", where, default=131072),
        )


class Gemma3Attention:
    def __init__(self, cfg: Gemma3Config, ws: WeightSource, prefix: str, layer_type: str, device):
        self.cfg = cfg
        self.hq, self.hkv, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        hidden = cfg.hidden_size
        q, k, v = (ws.linear(f"{prefix}.{n}_proj", (heads * self.d, hidden))
                   for n, heads in (("q", self.hq), ("k", self.hkv), ("v", self.hkv)))
        self.qkv = Linear.fuse([q, k, v])
        self.parts = None if self.qkv is not None else (q, k, v)
        self.o = ws.linear(f"{prefix}.o_proj", (hidden, self.hq * self.d))
        self.q_norm = ws.vector(f"{prefix}.q_norm.weight", size=self.d)
        self.k_norm = ws.vector(f"{prefix}.k_norm.weight", size=self.d)
        theta, scaling = cfg.rope[layer_type]
        self.theta = theta
        self.freqs, self.rope_scale = rope_freqs(self.d, self.d, theta, scaling, device)
        self.window = cfg.sliding_window if layer_type == SLIDING else None
        self.scale = cfg.query_pre_attn_scalar ** -0.5

    def __call__(self, x: torch.Tensor, step: Step, layer: int) -> torch.Tensor:
        cfg = self.cfg
        b, length, _ = x.shape
        hq, hkv, d = self.hq, self.hkv, self.d
        if self.qkv is not None:
            qkv = self.qkv(x)
            q, k, v = qkv[..., :hq * d], qkv[..., hq * d:(hq + hkv) * d], qkv[..., (hq + hkv) * d:]
        else:
            q, k, v = (p(x) for p in self.parts)
        q, k = mn.head_norm_rope_qk(q.unflatten(-1, (hq, d)), k.unflatten(-1, (hkv, d)), self.q_norm, self.k_norm,
                                    positions=step.positions, eps=cfg.rms_norm_eps, base=self.theta,
                                    freqs=self.freqs, scale=self.rope_scale, weight_offset=cfg.norm_offset)
        v = v.unflatten(-1, (hkv, d))
        out = step.attend(layer, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=self.scale,
                          window=self.window)
        return self.o(out.transpose(1, 2).reshape(b, length, hq * d))


def GeGLU(ws: WeightSource, prefix: str, hidden: int) -> GatedMLP:
    """Gemma's MLP on ``hidden`` features: ``down(gelu_tanh(gate(x)) * up(x))``."""
    return GatedMLP(*ws.gated_mlp(prefix, hidden), "gelu_tanh", ws.opts.fused_mlp_decode, ws.opts.dtype)


class Gemma3Model(CausalLM):
    arch = "gemma3"

    def __init__(self, ckpt: Checkpoint, opts: LoadOptions):
        cfg = Gemma3Config.from_hf(ckpt.config)
        ws = self._setup(cfg, ckpt, opts)
        hidden = cfg.hidden_size
        self.embed = ws.embedding("model.embed_tokens.weight", hidden)
        self.embed_scale = torch.tensor(cfg.hidden_size ** 0.5, dtype=opts.dtype).item()
        self.layers = []
        for i in range(cfg.num_layers):
            p = f"model.layers.{i}"
            self.layers.append(dict(
                input_norm=ws.vector(f"{p}.input_layernorm.weight", size=hidden),
                attn=Gemma3Attention(cfg, ws, f"{p}.self_attn", cfg.layer_types[i], opts.device),
                post_attn_norm=ws.vector(f"{p}.post_attention_layernorm.weight", size=hidden),
                pre_ff_norm=ws.vector(f"{p}.pre_feedforward_layernorm.weight", size=hidden),
                mlp=GeGLU(ws, f"{p}.mlp", hidden),
                post_ff_norm=ws.vector(f"{p}.post_feedforward_layernorm.weight", size=hidden),
            ))
        self.norm = ws.vector("model.norm.weight", size=hidden)
        self.lm_head = (Linear(self.embed.weight) if cfg.tie_word_embeddings or not ws.has("lm_head.weight")
                        else ws.linear("lm_head", (None, hidden)))

    def layer_cache_shapes(self):
        return [(self.config.num_kv_heads, self.config.head_dim)] * self.config.num_layers

    def _hidden(self, tokens: torch.Tensor, step: Step) -> torch.Tensor:
        cfg = self.config
        eps, off = cfg.rms_norm_eps, cfg.norm_offset
        h = self.embed(tokens) * self.embed_scale
        prev = None
        for i, L in enumerate(self.layers):
            if prev is None:
                x = mn.rms_norm(h, L["input_norm"], eps, weight_offset=off)
            else:
                x, h = mn.add_rms_norm(prev, h, L["input_norm"], eps, weight_offset=off)
            a = mn.rms_norm(L["attn"](x, step, i), L["post_attn_norm"], eps, weight_offset=off)
            x, h = mn.add_rms_norm(a, h, L["pre_ff_norm"], eps, weight_offset=off)
            prev = mn.rms_norm(L["mlp"](x), L["post_ff_norm"], eps, weight_offset=off)
        x, _ = mn.add_rms_norm(prev, h, self.norm, eps, weight_offset=off)
        return x

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(h)
        cap = self.config.final_logit_softcapping
        return mn.softcap(logits, cap) if cap else logits
