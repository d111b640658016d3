"""Gemma 4 text, dense (``gemma4_text`` and the text tower of ``gemma4`` checkpoints).

On top of Gemma 3's layout: plain-``w`` RMS norms (no ``1 +``), attention
scale 1 (q/k norms carry it), an unscaled RMS norm on v, a different head dim
(and KV head count) for global layers (256 sliding / 512 global in the real
models), global layers may use the key projection as values
(``attention_k_eq_v``), "proportional" partial RoPE on global layers (the
last pairs do not rotate), per-layer input embeddings (PLE) feeding a gated
residual branch in every layer, a per-layer output scalar, KV sharing (the
last ``num_kv_shared_layers`` layers read the cache of the last earlier layer
of their type), and final-logit soft-capping. MoE blocks are not supported.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

import mlx_native as mn

from ..errors import UnsupportedError
from ..formats.values import config_float, config_int
from ..formats.weights import Checkpoint
from .base import CausalLM, Linear, LoadOptions, Step, WeightSource, rope_freqs, rope_params
from .gemma3 import FULL, SLIDING, GeGLU


def _default_layer_types(n: int) -> list[str]:
    types = [SLIDING if (i + 1) % 6 else FULL for i in range(n)]
    types[-1] = FULL
    return types


@dataclasses.dataclass
class Gemma4Config:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    layer_types: list[str]
    head_dims: list[int]
    kv_heads: list[int]
    k_eq_v: list[bool]
    share: list[Optional[int]]  # layer -> producer layer whose cache it reads (None: owns its cache)
    rope: dict
    rms_norm_eps: float
    sliding_window: Optional[int]
    ple_dim: int
    final_logit_softcapping: Optional[float]
    tie_word_embeddings: bool
    max_position_embeddings: int

    @classmethod
    def from_hf(cls, cfg: dict) -> "Gemma4Config":
        where = "gemma4 config"
        if cfg.get("enable_moe_block"):
            raise UnsupportedError("gemma4: MoE blocks (enable_moe_block) are not supported; supported: dense "
                                   "Gemma 4 text models")
        if cfg.get("use_bidirectional_attention") == "all":
            raise UnsupportedError("gemma4: bidirectional attention is not supported; supported: causal text models")
        n = config_int(cfg, "num_hidden_layers", where)
        hidden = config_int(cfg, "hidden_size", where)
        heads = config_int(cfg, "num_attention_heads", where)
        types = list(cfg.get("layer_types") or _default_layer_types(n))
        head_dim = config_int(cfg, "head_dim", where, default=hidden // heads, most=2**16)
        kv = config_int(cfg, "num_key_value_heads", where, default=heads)
        k_eq_v_flag = bool(cfg.get("attention_k_eq_v", False))
        per_layer = cfg.get("per_layer_config")
        head_dims, kv_heads = [], []
        for i, t in enumerate(types):
            over = {}
            if isinstance(per_layer, dict):
                over = per_layer.get(str(i), per_layer.get(i, per_layer.get(t, {}))) or {}
            elif t == FULL:
                over = {"head_dim": config_int(cfg, "global_head_dim", where, default=512, most=2**16)}
                if k_eq_v_flag and cfg.get("num_global_key_value_heads") is not None:
                    over["num_key_value_heads"] = int(cfg["num_global_key_value_heads"])
            head_dims.append(int(over.get("head_dim", head_dim)))
            kv_heads.append(int(over.get("num_key_value_heads", kv)))
        n_shared = int(cfg.get("num_kv_shared_layers") or 0)
        share: list[Optional[int]] = [None] * n
        if n_shared:
            first = n - n_shared
            for i in range(first, n):
                producers = [j for j in range(first) if types[j] == types[i]]
                if not producers:
                    raise UnsupportedError(f"gemma4: shared layer {i} ({types[i]}) has no earlier layer of its type")
                share[i] = producers[-1]
        ple = int(cfg.get("hidden_size_per_layer_input") or 0)
        return cls(
            vocab_size=config_int(cfg, "vocab_size", where), hidden_size=hidden, num_layers=n, num_heads=heads,
            layer_types=types, head_dims=head_dims, kv_heads=kv_heads,
            k_eq_v=[k_eq_v_flag and t == FULL for t in types], share=share,
            rope={t: rope_params(cfg, t) for t in set(types)},
            rms_norm_eps=config_float(cfg, "rms_norm_eps", where, default=1e-6),
            sliding_window=cfg.get("sliding_window"), ple_dim=ple,
            final_logit_softcapping=cfg.get("final_logit_softcapping"),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
            max_position_embeddings=config_int(cfg, "max_position_embeddings", where, default=131072),
        )


class Gemma4Attention:
    def __init__(self, cfg: Gemma4Config, ws: WeightSource, prefix: str, i: int, device):
        self.cfg = cfg
        self.hq, self.hkv, self.d = cfg.num_heads, cfg.kv_heads[i], cfg.head_dims[i]
        self.shared = cfg.share[i] is not None
        self.k_eq_v = cfg.k_eq_v[i]
        hidden, d = cfg.hidden_size, self.d
        q = ws.linear(f"{prefix}.q_proj", (self.hq * d, hidden))
        self.q_norm = ws.vector(f"{prefix}.q_norm.weight", size=d)
        if self.shared:
            self.proj, self.parts = q, None
        else:
            k = ws.linear(f"{prefix}.k_proj", (self.hkv * d, hidden))
            self.k_norm = ws.vector(f"{prefix}.k_norm.weight", size=d)
            parts = [q, k] if self.k_eq_v else [q, k, ws.linear(f"{prefix}.v_proj", (self.hkv * d, hidden))]
            self.proj = Linear.fuse(parts)
            self.parts = None if self.proj is not None else parts
        self.o = ws.linear(f"{prefix}.o_proj", (hidden, self.hq * d))
        layer_type = cfg.layer_types[i]
        theta, scaling = cfg.rope[layer_type]
        self.theta = theta
        self.freqs, self.rope_scale = rope_freqs(self.d, self.d, theta, scaling, device)
        self.window = cfg.sliding_window if layer_type == SLIDING else None

    def __call__(self, x: torch.Tensor, step: Step, layer: int) -> torch.Tensor:
        cfg = self.cfg
        b, length, _ = x.shape
        hq, hkv, d = self.hq, self.hkv, self.d
        rope = dict(positions=step.positions, eps=cfg.rms_norm_eps, base=self.theta, freqs=self.freqs,
                    scale=self.rope_scale)
        if self.shared:
            q = mn.head_norm_rope(self.proj(x).unflatten(-1, (hq, d)), self.q_norm, **rope)
            k = v = None
        else:
            if self.proj is not None:
                y = self.proj(x)
                outs = [y[..., :hq * d], y[..., hq * d:(hq + hkv) * d]]
                if not self.k_eq_v:
                    outs.append(y[..., (hq + hkv) * d:])
            else:
                outs = [p(x) for p in self.parts]
            k_raw = outs[1].unflatten(-1, (hkv, d))
            v_raw = k_raw if self.k_eq_v else outs[2].unflatten(-1, (hkv, d))
            q, k = mn.head_norm_rope_qk(outs[0].unflatten(-1, (hq, d)), k_raw, self.q_norm, self.k_norm, **rope)
            v = mn.rms_norm(v_raw, None, cfg.rms_norm_eps).transpose(1, 2)
            k = k.transpose(1, 2)
        out = step.attend(layer, q.transpose(1, 2), k, v, scale=1.0, window=self.window)
        return self.o(out.transpose(1, 2).reshape(b, length, hq * d))


class Gemma4Model(CausalLM):
    arch = "gemma4"

    def __init__(self, ckpt: Checkpoint, opts: LoadOptions):
        cfg = Gemma4Config.from_hf(ckpt.config)
        ws = self._setup(cfg, ckpt, opts)
        hidden = cfg.hidden_size
        self.embed = ws.embedding("model.embed_tokens.weight", hidden)
        self.embed_scale = torch.tensor(cfg.hidden_size ** 0.5, dtype=opts.dtype).item()
        if cfg.ple_dim:
            ple_all = cfg.num_layers * cfg.ple_dim
            self.ple_embed = ws.embedding("model.embed_tokens_per_layer.weight", ple_all)
            self.ple_scale = torch.tensor(cfg.ple_dim ** 0.5, dtype=opts.dtype).item()
            self.ple_proj = ws.linear("model.per_layer_model_projection", (ple_all, hidden))
            self.ple_proj_scale = cfg.hidden_size ** -0.5
            self.ple_norm = ws.vector("model.per_layer_projection_norm.weight", size=cfg.ple_dim)
        self.layers = []
        for i in range(cfg.num_layers):
            p = f"model.layers.{i}"
            L = dict(
                input_norm=ws.vector(f"{p}.input_layernorm.weight", size=hidden),
                attn=Gemma4Attention(cfg, ws, f"{p}.self_attn", i, opts.device),
                post_attn_norm=ws.vector(f"{p}.post_attention_layernorm.weight", size=hidden),
                pre_ff_norm=ws.vector(f"{p}.pre_feedforward_layernorm.weight", size=hidden),
                mlp=GeGLU(ws, f"{p}.mlp", hidden),
                post_ff_norm=ws.vector(f"{p}.post_feedforward_layernorm.weight", size=hidden),
                scalar=(ws.vector(f"{p}.layer_scalar", opts.dtype) if ws.has(f"{p}.layer_scalar") else None),
            )
            if cfg.ple_dim:
                L.update(ple_gate=ws.linear(f"{p}.per_layer_input_gate", (cfg.ple_dim, hidden)),
                         ple_out=ws.linear(f"{p}.per_layer_projection", (hidden, cfg.ple_dim)),
                         ple_out_norm=ws.vector(f"{p}.post_per_layer_input_norm.weight", size=hidden))
            self.layers.append(L)
        self.norm = ws.vector("model.norm.weight", size=hidden)
        self.lm_head = (Linear(self.embed.weight) if cfg.tie_word_embeddings or not ws.has("lm_head.weight")
                        else ws.linear("lm_head", (None, hidden)))

    def layer_cache_shapes(self):
        c = self.config
        return [None if c.share[i] is not None else (c.kv_heads[i], c.head_dims[i]) for i in range(c.num_layers)]

    def layer_cache_share(self):
        return self.config.share

    def _ple(self, tokens: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """Per-layer inputs ``[B, L, n_layers, ple_dim]``."""
        cfg = self.config
        shape = (*tokens.shape, cfg.num_layers, cfg.ple_dim)
        tok = self.ple_embed(tokens).reshape(shape) * self.ple_scale
        proj = (self.ple_proj(h) * self.ple_proj_scale).reshape(shape)
        proj = mn.rms_norm(proj, self.ple_norm, cfg.rms_norm_eps)
        return (proj + tok) * (2.0 ** -0.5)

    def _hidden(self, tokens: torch.Tensor, step: Step) -> torch.Tensor:
        cfg = self.config
        eps = cfg.rms_norm_eps
        h = self.embed(tokens) * self.embed_scale
        ple = self._ple(tokens, h) if cfg.ple_dim else None
        for i, L in enumerate(self.layers):
            x = mn.rms_norm(h, L["input_norm"], eps)
            a = mn.rms_norm(L["attn"](x, step, i), L["post_attn_norm"], eps)
            x, h = mn.add_rms_norm(a, h, L["pre_ff_norm"], eps)
            h = h + mn.rms_norm(L["mlp"](x), L["post_ff_norm"], eps)
            if ple is not None:
                g = mn.gelu_mul(L["ple_gate"](h), ple[:, :, i], "tanh")
                h = h + mn.rms_norm(L["ple_out"](g), L["ple_out_norm"], eps)
            if L["scalar"] is not None:
                h = h * L["scalar"]
        return mn.rms_norm(h, self.norm, eps)

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(h)
        cap = self.config.final_logit_softcapping
        return mn.softcap(logits, cap) if cap else logits
