"""The pattern a Python user picks for speed: the model written in plain PyTorch with a
static KV cache and ``torch.compile(mode="reduce-overhead", fullgraph=True)`` on the
decode step (gpt-fast style: inductor kernels + CUDA graphs).

Llama-family only (SmolLM2, the 8B-shaped bench model). Weights come from an
mlx-native model (any format), dequantized once to dense bf16 (``F.linear``:
cuBLAS), so both sides compute the same function; attention is
``F.scaled_dot_product_attention`` over the static cache with a position mask.
Kept small and honest: no custom kernels, no weight quantization tricks.
"""

from __future__ import annotations

import time
import torch
import torch.nn.functional as F

import mlx_native as mn
from mlx_native.formats.weights import DenseWeight, GGMLWeight


def dense(weight, dtype=torch.bfloat16) -> torch.Tensor:
    """A Linear's weight of an mlx-native model as a dense ``[out, in]`` tensor."""
    if isinstance(weight, DenseWeight):
        return weight.data.to(dtype)
    if isinstance(weight, GGMLWeight):
        return mn.ggml_dequantize(weight.raw, weight.ggml_type, weight.shape, dtype=dtype)
    return mn.dequantize(weight.weight, weight.scales, weight.biases, weight.group_size, weight.bits).to(dtype)


class GPTFastLlama(torch.nn.Module):
    """Plain-PyTorch Llama with a static KV cache (batch 1)."""

    def __init__(self, model, max_seq: int, dtype=torch.bfloat16):
        super().__init__()
        cfg = model.config
        self.cfg = cfg
        self.hq, self.hkv, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.eps = cfg.rms_norm_eps
        dev = model.device
        self.tok_emb = dense(model.embed.weight, dtype)
        self.layers = []
        for attn_norm, attn, mlp_norm, mlp in model.layers:
            wqkv = dense(attn.qkv.weight, dtype) if attn.qkv is not None else torch.cat(
                [dense(p.weight, dtype) for p in (attn.q, attn.k, attn.v)])
            w13 = dense(mlp.gate_up.weight, dtype) if mlp.gate_up is not None else torch.cat(
                [dense(p.weight, dtype) for p in mlp.parts])
            self.layers.append(dict(attn_norm=attn_norm.to(dtype), mlp_norm=mlp_norm.to(dtype), wqkv=wqkv,
                                    wo=dense(attn.o.weight, dtype), w13=w13, w2=dense(mlp.down.weight, dtype)))
        self.norm = model.norm.to(dtype)
        self.out = dense(model.lm_head.weight, dtype)
        self.k_cache = [torch.zeros(1, self.hkv, max_seq, self.d, dtype=dtype, device=dev) for _ in self.layers]
        self.v_cache = [torch.zeros_like(k) for k in self.k_cache]
        # RoPE tables for the pair layout the weights use (GGUF Llama: adjacent pairs; else half split)
        self.traditional = cfg.rope_traditional
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.rope_dims, 2, dtype=torch.float64) / cfg.rope_dims))
        t = torch.arange(max_seq, dtype=torch.float64)
        ang = torch.outer(t, inv)
        self.cos = ang.cos().to(device=dev, dtype=torch.float32)
        self.sin = ang.sin().to(device=dev, dtype=torch.float32)
        self.mask = torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool, device=dev))
        self.max_seq = max_seq

    def _rms(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def _rope(self, x, pos):  # x [B, L, H, D]
        cos, sin = self.cos[pos][None, :, None, :], self.sin[pos][None, :, None, :]
        xf = x.float()
        if self.traditional:
            a, b = xf[..., 0::2], xf[..., 1::2]
            return torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2).to(x.dtype)
        half = x.shape[-1] // 2
        a, b = xf[..., :half], xf[..., half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1).to(x.dtype)

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """tokens [1, L], pos [L] int64 (positions); returns last-token logits [1, V]."""
        hq, hkv, d = self.hq, self.hkv, self.d
        x = self.tok_emb[tokens]
        bsz, length, _ = x.shape
        mask = self.mask[pos][None, None]  # [1, 1, L, S]
        for i, L in enumerate(self.layers):
            h = self._rms(x, L["attn_norm"])
            qkv = F.linear(h, L["wqkv"])
            q, k, v = qkv.split([hq * d, hkv * d, hkv * d], -1)
            q = self._rope(q.view(bsz, length, hq, d), pos).transpose(1, 2)
            k = self._rope(k.view(bsz, length, hkv, d), pos).transpose(1, 2)
            v = v.view(bsz, length, hkv, d).transpose(1, 2)
            self.k_cache[i].index_copy_(2, pos, k)
            self.v_cache[i].index_copy_(2, pos, v)
            o = F.scaled_dot_product_attention(q, self.k_cache[i], self.v_cache[i], attn_mask=mask, enable_gqa=True)
            x = x + F.linear(o.transpose(1, 2).reshape(bsz, length, hq * d), L["wo"])
            h = self._rms(x, L["mlp_norm"])
            g, u = F.linear(h, L["w13"]).chunk(2, -1)
            x = x + F.linear(F.silu(g) * u, L["w2"])
        return F.linear(self._rms(x[:, -1], self.norm), self.out)


def bench(model, n_prompt: int, n_gen: int, reps: int, compile_decode: bool = True) -> dict:
    """pp / tg tokens per second of the plain-PyTorch model (prefill eager, decode compiled)."""
    torch.manual_seed(0)
    dev = model.device
    g = GPTFastLlama(model, max(n_prompt, 1) + n_gen + 8)
    V = g.out.shape[0]

    @torch.no_grad()
    def decode_one(tok, pos):
        logits = g(tok, pos)
        return torch.argmax(logits, -1, keepdim=True)

    step = torch.compile(decode_one, mode="reduce-overhead", fullgraph=True) if compile_decode else decode_one
    prompt = torch.randint(0, V, (1, n_prompt), device=dev)
    out = {}
    with torch.no_grad():
        times = []
        for r in range(reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            g(prompt, torch.arange(n_prompt, device=dev))
            torch.cuda.synchronize()
            if r:
                times.append(time.perf_counter() - t0)
        out["pp"] = [n_prompt / t for t in times]
        t0 = time.perf_counter()
        tok = torch.randint(0, V, (1, 1), device=dev)
        for i in range(3):  # compile + CUDA-graph warm-up
            tok = step(tok, torch.tensor([n_prompt + i], device=dev)).clone()
        torch.cuda.synchronize()
        out["compile_s"] = time.perf_counter() - t0
        positions = [torch.tensor([n_prompt + i], device=dev) for i in range(n_gen)]
        times = []
        for r in range(reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(n_gen):
                tok = step(tok, positions[i]).clone()
            torch.cuda.synchronize()
            if r:
                times.append(time.perf_counter() - t0)
        out["tg"] = [n_gen / t for t in times]
    g = step = None  # drop the weights and the compiled graph before the next model
    torch.cuda.empty_cache()
    return out


def check_agreement(model, n: int = 24) -> dict:
    """Teacher-forced sanity check on random tokens: our decode steps (the path ``tg`` times, one row per step)
    against the baseline's logits at the same positions. Returns ``argmax_agreement`` and ``logit_rel_diff``
    (largest logit difference over the largest logit). Random weights give near-ties, so a few argmax flips are
    expected; the relative difference is the number to read."""
    dev = model.device
    g = GPTFastLlama(model, n + 8)
    gen = torch.Generator(device=dev).manual_seed(0)  # the same tokens every run: the numbers compare across runs
    toks = torch.randint(0, g.out.shape[0], (1, n), device=dev, generator=gen)
    with torch.no_grad():
        cache = model.new_cache(1, n)
        ours = torch.stack([model.forward(toks[:, i:i + 1], cache, start=0 if i == 0 else None)[0]
                            for i in range(n)]).float()
        theirs = torch.stack([g(toks[:, : i + 1], torch.arange(i + 1, device=dev))[0] for i in range(n)]).float()
    return dict(argmax_agreement=(ours.argmax(-1) == theirs.argmax(-1)).float().mean().item(),
                logit_rel_diff=((ours - theirs).abs().max() / theirs.abs().max()).item())
