"""Llama family: Llama 2/3 (incl. llama3 rope scaling), SmolLM2, Mistral; the
decoder the Qwen models reuse (see qwen.py).

Per layer: RMS norm -> fused q/k/v projection -> RoPE (one call for q and k,
or per-head RMS norm + RoPE for q/k-norm models) -> KV cache write ->
flash attention -> o projection -> residual add fused into the next RMS norm
-> fused gate/up projection -> SwiGLU -> down projection.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

import mlx_native as mn

from ..formats.values import config_float, config_int
from ..formats.weights import Checkpoint
from .base import CausalLM, GatedMLP, Linear, LoadOptions, Step, WeightSource, rope_freqs, rope_params


@dataclasses.dataclass
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None
    rope_dims: Optional[int] = None
    rope_traditional: bool = False
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    sliding_window: Optional[int] = None
    max_position_embeddings: int = 4096

    @classmethod
    def from_hf(cls, cfg: dict, arch: str, **overrides) -> "LlamaConfig":
        where = f"{arch} config"
        hidden = config_int(cfg, "hidden_size", where)
        heads = config_int(cfg, "num_attention_heads", where)
        head_dim = config_int(cfg, "head_dim", where, default=hidden // heads, most=2**16)
        theta, scaling = rope_params(cfg)
        partial = config_float(cfg, "partial_rotary_factor", where, default=1.0)
        if scaling is not None and "partial_rotary_factor" in scaling:
            partial = float(scaling["partial_rotary_factor"])
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
        kw = dict(
            vocab_size=config_int(cfg, "vocab_size", where),
            hidden_size=hidden,
            intermediate_size=config_int(cfg, "intermediate_size", where),
            num_layers=config_int(cfg, "num_hidden_layers", where),
            num_heads=heads,
            num_kv_heads=config_int(cfg, "num_key_value_heads", where, default=heads),
            head_dim=head_dim,
            rms_norm_eps=config_float(cfg, "rms_norm_eps", where, default=1e-6),
            rope_theta=theta,
            rope_scaling=scaling,
            rope_dims=int(head_dim * partial),
            rope_traditional=bool(cfg.get("_mlx_native_rope_traditional", False)),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=bool(cfg.get("attention_bias", False)),
            mlp_bias=bool(cfg.get("mlp_bias", False)),
            sliding_window=int(window) if window else None,
            max_position_embeddings=config_int(cfg, "max_position_embeddings", where, default=4096),
        )
        kw.update(overrides)
        return cls(**kw)


class LlamaAttention:
    def __init__(self, cfg: LlamaConfig, ws: WeightSource, prefix: str, rope_freqs_t, rope_scale):
        self.cfg = cfg
        self.hq, self.hkv, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        hidden = cfg.hidden_size
        q, k, v = (ws.linear(f"{prefix}.{n}_proj", (heads * self.d, hidden))
                   for n, heads in (("q", self.hq), ("k", self.hkv), ("v", self.hkv)))
        self.qkv = Linear.fuse([q, k, v])
        self.q, self.k, self.v = (None, None, None) if self.qkv is not None else (q, k, v)
        self.o = ws.linear(f"{prefix}.o_proj", (hidden, self.hq * self.d))
        self.q_norm = ws.vector(f"{prefix}.q_norm.weight", size=self.d) if cfg.qk_norm else None
        self.k_norm = ws.vector(f"{prefix}.k_norm.weight", size=self.d) if cfg.qk_norm else None
        self.freqs, self.rope_scale = rope_freqs_t, rope_scale
        self.rope = mn.RopeSpec(cfg.rope_dims, base=cfg.rope_theta, traditional=cfg.rope_traditional,
                                scale=rope_scale, freqs=rope_freqs_t)
        self.scale = self.d ** -0.5

    def takes_handoff(self, dtype: torch.dtype) -> bool:
        """Its q/k/v projections run a one-row :class:`NormHandoff` in their launches."""
        return all(p.takes_handoff(dtype) for p in ((self.qkv,) if self.qkv is not None else (self.q, self.k, self.v)))

    def core(self, x: torch.Tensor, step: Step, layer: int) -> torch.Tensor:
        """The attention output ``[B, L, Hq * D]``, before the o projection (``self.o``: the model runs it
        with the residual add and norm after it)."""
        cfg = self.cfg
        b, length, _ = x.shape
        hq, hkv, d = self.hq, self.hkv, self.d
        rope_kw = dict(traditional=cfg.rope_traditional, base=cfg.rope_theta, scale=self.rope_scale,
                       freqs=self.freqs)
        pos = step.positions  # [B, L]
        if self.qkv is not None:
            qkv = self.qkv(x)
            q_lin, k_lin = qkv[..., : hq * d], qkv[..., hq * d:(hq + hkv) * d]
            v = qkv[..., (hq + hkv) * d:]
        else:
            q_lin, k_lin, v = self.q(x), self.k(x), self.v(x)
        v = v.unflatten(-1, (hkv, d)).transpose(1, 2)
        if cfg.qk_norm:
            q, k = mn.head_norm_rope_qk(q_lin.unflatten(-1, (hq, d)), k_lin.unflatten(-1, (hkv, d)), self.q_norm,
                                        self.k_norm, positions=pos, eps=cfg.rms_norm_eps, dims=cfg.rope_dims,
                                        **rope_kw)
            out = step.attend(layer, q.transpose(1, 2), k.transpose(1, 2), v, scale=self.scale,
                              window=cfg.sliding_window)
        else:  # RoPE where the step puts it (in the decode attention kernel itself)
            out = step.attend(layer, q_lin.unflatten(-1, (hq, d)).transpose(1, 2),
                              k_lin.unflatten(-1, (hkv, d)).transpose(1, 2), v, scale=self.scale,
                              window=cfg.sliding_window, rope=self.rope)
        return out.transpose(1, 2).reshape(b, length, hq * d)


def LlamaMLP(cfg: LlamaConfig, ws: WeightSource, prefix: str) -> GatedMLP:
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""
    return GatedMLP(*ws.gated_mlp(prefix, cfg.hidden_size), "silu", ws.opts.fused_mlp_decode, ws.opts.dtype)


class LlamaModel(CausalLM):
    """Llama-family decoder (pre-norm, SwiGLU, RoPE, GQA)."""

    arch = "llama"

    def __init__(self, ckpt: Checkpoint, opts: LoadOptions, config: Optional[LlamaConfig] = None):
        cfg = config or LlamaConfig.from_hf(ckpt.config, self.arch)
        ws = self._setup(cfg, ckpt, opts)
        factors = ws.vector("rope_freqs.weight", size=cfg.rope_dims // 2) if ws.has("rope_freqs.weight") else None
        freqs, rope_scale = rope_freqs(cfg.head_dim, cfg.rope_dims, cfg.rope_theta, cfg.rope_scaling, opts.device,
                                       factors)
        hidden = cfg.hidden_size
        self.embed = ws.embedding("model.embed_tokens.weight", hidden)
        self.layers = []
        for i in range(cfg.num_layers):
            p = f"model.layers.{i}"
            self.layers.append((
                ws.vector(f"{p}.input_layernorm.weight", size=hidden),
                LlamaAttention(cfg, ws, f"{p}.self_attn", freqs, rope_scale),
                ws.vector(f"{p}.post_attention_layernorm.weight", size=hidden),
                self._mlp(cfg, ws, f"{p}.mlp", i),
            ))
        # whether the projection before each norm hands it to the projections after it (Linear.matmul_add_rms_norm)
        self.handoff = [(opts.norm_handoff and attn.takes_handoff(opts.dtype),
                         opts.norm_handoff and mlp.takes_handoff(opts.dtype)) for _, attn, _, mlp in self.layers]
        self.norm = ws.vector("model.norm.weight", size=hidden)
        if cfg.tie_word_embeddings or not ws.has("lm_head.weight"):
            self.lm_head = Linear(self.embed.weight)
        else:
            self.lm_head = ws.linear("lm_head", (None, hidden))

    def _mlp(self, cfg: LlamaConfig, ws: WeightSource, prefix: str, layer: int):
        """The FFN of ``layer``: an object with ``hidden(x)``, ``down.matmul_add_rms_norm`` and ``takes_handoff``
        (:class:`GatedMLP`; Qwen3-MoE's sparse layers override this)."""
        return LlamaMLP(cfg, ws, prefix)

    def layer_cache_shapes(self):
        return [(self.config.num_kv_heads, self.config.head_dim)] * self.config.num_layers

    def _hidden(self, tokens: torch.Tensor, step: Step) -> torch.Tensor:
        eps = self.config.rms_norm_eps
        h = self.embed(tokens)
        prev = None  # the previous layer's MLP and its down projection's input
        # each residual add + norm goes with the projection before it and (handoff) the one after it
        # (Linear.matmul_add_rms_norm); the last one feeds the head
        for i, (attn_norm, attn, mlp_norm, mlp) in enumerate(self.layers):
            attn_takes, mlp_takes = self.handoff[i]
            if prev is None:
                x = mn.rms_norm(h, attn_norm, eps)
            else:
                x, h = prev[0].down.matmul_add_rms_norm(prev[1], h, attn_norm, eps, handoff=attn_takes)
            x, h = attn.o.matmul_add_rms_norm(attn.core(x, step, i), h, mlp_norm, eps, handoff=mlp_takes)
            prev = (mlp, mlp.hidden(x))
        x, _ = prev[0].down.matmul_add_rms_norm(prev[1], h, self.norm, eps)
        return x
