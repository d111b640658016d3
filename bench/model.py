"""End-to-end model benchmarks (batch-1 prefill and decode), the main job's numbers.

    python bench/model.py --out DIR [--gguf SmolLM2-135M-Instruct.Q4_1.gguf] [--reps 5]

Rows, measured in the same process:
  * SmolLM2-135M (the real GGUF with --gguf, else a GGUF of the same shapes and
    tensor types -- Q4_1 matrices, Q8_0 embedding, F32 norms -- with random
    blocks): pp512 and tg128 tokens/s for
      - mlx-native (quantized kernels on the raw blocks, bf16 activations,
        CUDA-graph decode step with on-device argmax),
      - Hugging Face transformers eager (the same GGUF, dequantized to bf16 by
        transformers, DynamicCache, greedy),
      - plain PyTorch + static KV cache + torch.compile(mode="reduce-overhead",
        fullgraph=True) decode (bench/gptfast_baseline.py; dense bf16 weights).
  * Llama-3-8B-shaped model, a few layers, random 4-bit weights (MLX affine
    4-bit g64, GGUF Q4_K and Q4_0): tg tokens/s as a fraction of the bandwidth floor
    (bytes of weights + KV read per token / measured device copy bandwidth).
    ``--arch llama2-7b`` takes Llama-2-7B's shapes instead (intermediate 11008,
    32 KV heads, 32000-vocab head); ``--arch qwen3-30b-a3b`` Qwen3-30B-A3B's (MoE:
    the floor counts the 8 chosen experts of each layer, a bf16 router).

Writes DIR/model_results.json and DIR/model_results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import gptfast_baseline  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.cli import bench_model  # noqa: E402
from mlx_native.formats.gguf import write_gguf  # noqa: E402
from mlx_native.formats import load_checkpoint  # noqa: E402
from mlx_native.formats.weights import AffineWeight, Checkpoint, DenseWeight, GGMLWeight  # noqa: E402
from mlx_native.models import LoadOptions, build_model  # noqa: E402
from mlx_native.ops.ggml import formats  # noqa: E402

SMOLLM2 = dict(model_type="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, head_dim=64, rms_norm_eps=1e-5, rope_theta=100000.0,
               max_position_embeddings=8192, tie_word_embeddings=True)
LLAMA8B = dict(model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
               num_attention_heads=32, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-5, rope_theta=500000.0,
               max_position_embeddings=8192, tie_word_embeddings=False)
LLAMA2_7B = dict(LLAMA8B, vocab_size=32000, intermediate_size=11008, num_key_value_heads=32, rope_theta=10000.0,
                 max_position_embeddings=4096)
# Qwen3-30B-A3B: 48 layers of 128 experts (8 a token, intermediate 768) behind GQA 32:4 attention
QWEN3_30B_A3B = dict(model_type="qwen3_moe", vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                     num_attention_heads=32, num_key_value_heads=4, head_dim=128, rms_norm_eps=1e-6,
                     rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=False, num_experts=128,
                     num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True)
ARCHS = {"llama3-8b": ("Llama-3-8B", LLAMA8B), "llama2-7b": ("Llama-2-7B", LLAMA2_7B),
         "qwen3-30b-a3b": ("Qwen3-30B-A3B", QWEN3_30B_A3B)}


def stats(xs):
    return {"mean": statistics.mean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0, "reps": xs}


# ---------------------------------------------------------------------------- synthetic weights

def _random_blocks(rows: int, cols: int, type_name: str, rng) -> np.ndarray:
    """Valid random GGML blocks (finite scales) as uint8 [rows, row_bytes]."""
    import gguf

    qtype = gguf.GGMLQuantizationType[type_name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block
    out = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    scale = lambda n, s: (rng.standard_normal(n).astype(np.float32) * s).astype(np.float16).view(np.uint8)  # noqa
    if type_name == "Q4_1":  # d, m (fp16) + 16 bytes of nibbles
        out[:, 0:2] = scale(nb, 0.004).reshape(nb, 2)
        out[:, 2:4] = scale(nb, 0.02).reshape(nb, 2)
    elif type_name == "Q4_0":  # d (fp16) + 16 bytes of nibbles
        out[:, 0:2] = scale(nb, 0.004).reshape(nb, 2)
    elif type_name == "Q8_0":  # d (fp16) + 32 int8
        out[:, 0:2] = scale(nb, 0.0005).reshape(nb, 2)
    elif type_name in ("Q4_K", "Q5_K"):  # d, dmin (fp16) + 12 bytes of 6-bit scales + (Q5_K: 32 bytes of fifth bits)
        out[:, 0:2] = scale(nb, 0.0003).reshape(nb, 2)  # + 128 bytes of nibbles
        out[:, 2:4] = scale(nb, 0.0003).reshape(nb, 2)
    elif type_name == "Q6_K":  # 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales, d (fp16)
        out[:, 208:210] = scale(nb, 0.0001).reshape(nb, 2)
    else:
        raise ValueError(type_name)
    return out.reshape(rows, -1)


def synthetic_smollm2_gguf(path: str) -> str:
    rng = np.random.default_rng(0)
    c = SMOLLM2
    h, i, kvd = c["hidden_size"], c["intermediate_size"], c["num_key_value_heads"] * c["head_dim"]
    tensors, types = {}, {}

    def mat(name, rows, cols, t="Q4_1"):
        tensors[name] = _random_blocks(rows, cols, t, rng)
        types[name] = t

    mat("model.embed_tokens.weight", c["vocab_size"], h, "Q8_0")
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        tensors[f"{p}.input_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
        tensors[f"{p}.post_attention_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
        mat(f"{p}.self_attn.q_proj.weight", h, h)
        mat(f"{p}.self_attn.k_proj.weight", kvd, h)
        mat(f"{p}.self_attn.v_proj.weight", kvd, h)
        mat(f"{p}.self_attn.o_proj.weight", h, h)
        mat(f"{p}.mlp.gate_proj.weight", i, h)
        mat(f"{p}.mlp.up_proj.weight", i, h)
        mat(f"{p}.mlp.down_proj.weight", h, i)
    tensors["model.norm.weight"] = np.ones(h, np.float32)
    tok = {"tokens": [f"<t{j}>" for j in range(c["vocab_size"])], "model": "gpt2", "merges": [], "bos": 1, "eos": 2}
    return write_gguf(path, c, tensors, types=types, tokenizer=tok)


def llama8b_checkpoint(n_layers: int, kind: str, device, config: dict = LLAMA8B) -> Checkpoint:
    """An 8B-shaped checkpoint (or ``config``'s shapes; Qwen3-MoE: q/k norms, a bf16 router and experts stacked
    ``[E, out, in]`` in every layer) with random 4-bit weights, built on the device."""
    c = dict(config, num_hidden_layers=n_layers)
    h, inter, kvd = c["hidden_size"], c["intermediate_size"], c["num_key_value_heads"] * c["head_dim"]
    g = torch.Generator(device=device).manual_seed(0)
    rng = np.random.default_rng(0)

    def mat(rows, cols, experts=1):
        lead = (experts, rows) if experts > 1 else (rows,)
        if kind == "mlx-affine-4bit-g64":
            w = torch.randint(0, 2**31 - 1, (*lead, cols // 8), generator=g, device=device, dtype=torch.int32)
            s = (torch.rand(*lead, cols // 64, generator=g, device=device) * 0.002 + 0.001).to(torch.bfloat16)
            b = (-8 * s.float()).to(torch.bfloat16)
            return AffineWeight(w.view(torch.uint32), s, b, 64, 4)
        name = kind.removeprefix("gguf-")
        raw = torch.from_numpy(_random_blocks(experts * rows, cols, name, rng)).to(device)
        return GGMLWeight(raw, formats.BY_NAME[name].id, name, (*lead, cols))

    def ones(n):
        return DenseWeight(torch.ones(n, device=device))

    w = {"model.embed_tokens.weight": mat(c["vocab_size"], h), "lm_head.weight": mat(c["vocab_size"], h),
         "model.norm.weight": ones(h)}
    experts = c.get("num_experts")
    for layer in range(n_layers):
        p = f"model.layers.{layer}"
        w[f"{p}.input_layernorm.weight"] = ones(h)
        w[f"{p}.post_attention_layernorm.weight"] = ones(h)
        mats = {"self_attn.q_proj": (c["num_attention_heads"] * c["head_dim"], h), "self_attn.k_proj": (kvd, h),
                "self_attn.v_proj": (kvd, h), "self_attn.o_proj": (h, c["num_attention_heads"] * c["head_dim"])}
        if experts:
            w[f"{p}.self_attn.q_norm.weight"] = w[f"{p}.self_attn.k_norm.weight"] = ones(c["head_dim"])
            w[f"{p}.mlp.gate.weight"] = DenseWeight(
                (torch.randn(experts, h, generator=g, device=device) * 0.02).to(torch.bfloat16))
            mi = c["moe_intermediate_size"]
            for n, (r, cl) in {"gate_proj": (mi, h), "up_proj": (mi, h), "down_proj": (h, mi)}.items():
                w[f"{p}.mlp.experts.{n}.weight"] = mat(r, cl, experts)
        else:
            mats.update({"mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h), "mlp.down_proj": (h, inter)})
        for n, (r, cl) in mats.items():
            w[f"{p}.{n}.weight"] = mat(r, cl)
    return Checkpoint(path=f"<random {kind}>", format="synthetic", config=c, weights=w, metadata={}, tokenizer={})


def bytes_per_token(ckpt: Checkpoint) -> int:
    """Weight bytes one decode token reads: all but the embedding table (one row of it), and of each layer's
    experts the ``num_experts_per_tok`` chosen ones."""
    c = ckpt.config
    total = 0
    for name, w in ckpt.weights.items():
        if name == "model.embed_tokens.weight":
            total += w.nbytes // c["vocab_size"]
        elif ".mlp.experts." in name:
            total += w.nbytes * c["num_experts_per_tok"] // c["num_experts"]
        else:
            total += w.nbytes
    return total


# ---------------------------------------------------------------------------- profile

def profile_decode(model, steps: int = 5) -> dict:
    """Kernels of one eager decode step (forward + argmax): count, GPU time, the top ones."""
    from torch.profiler import ProfilerActivity, profile

    from mlx_native.generate import SamplingSettings, _Decoder

    dec = _Decoder(model, 256, SamplingSettings(), use_graph=False)
    with torch.inference_mode():
        for _ in range(3):
            dec.step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                dec.step()
            torch.cuda.synchronize()
    kernels = []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0.0)
        if t and e.count:
            kernels.append((e.key[:90], e.count / steps, t / steps))
    kernels.sort(key=lambda k: -k[2])
    return {"kernels_per_step": sum(k[1] for k in kernels), "kernel_us_per_step": sum(k[2] for k in kernels),
            "top": kernels[:14]}


def print_profile(label: str, prof: dict) -> None:
    print(f"[model] profile {label}: {prof['kernels_per_step']:.0f} kernels, {prof['kernel_us_per_step']:.0f} us of "
          f"kernel time per decode step", flush=True)
    for name, n, us in prof["top"]:
        print(f"[model]     {us:8.1f} us  x{n:5.1f}  {name}", flush=True)


# ---------------------------------------------------------------------------- peers

def hf_eager(gguf_path: str, n_prompt: int, n_gen: int, reps: int) -> dict:
    from transformers import AutoModelForCausalLM, DynamicCache

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(gguf_path), gguf_file=os.path.basename(gguf_path),
                                                 dtype=torch.bfloat16).cuda().eval()
    load_s = time.perf_counter() - t0
    V = model.config.vocab_size
    prompt = torch.randint(0, V, (1, n_prompt), device="cuda")
    out = {"load_s": load_s}
    with torch.no_grad():
        pp, tg = [], []
        for r in range(reps + 1):
            cache = DynamicCache()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = model(prompt, past_key_values=cache, use_cache=True).logits
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            tok = logits[:, -1:].argmax(-1)
            for _ in range(n_gen):
                logits = model(tok, past_key_values=cache, use_cache=True).logits
                tok = logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            if r:
                pp.append(n_prompt / (t1 - t0))
                tg.append(n_gen / (t2 - t1))
    out.update(pp=pp, tg=tg)
    del model
    torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------- rows

def smollm2_rows(gguf_path: str, synthetic: bool, args, rows: list, save=lambda: None) -> list[dict]:
    model, _ = mn.load(gguf_path, device="cuda")
    name = "SmolLM2-135M Q4_1" + (" (random blocks, real shapes)" if synthetic else "")
    res = {r["test"]: r for r in bench_model(model, args.n_prompt, args.n_gen, args.reps, prefill_graph=True)}
    rows.append(dict(model=name, impl="mlx-native", pp=stats(res[f"pp{args.n_prompt}"]["tps"]),
                     pp_graph=stats(res[f"pp{args.n_prompt} graph"]["tps"]), tg=stats(res[f"tg{args.n_gen}"]["tps"])))
    print(f"[model] {name} mlx-native: pp {rows[-1]['pp']['mean']:.0f} (replayed from a CUDA graph "
          f"{rows[-1]['pp_graph']['mean']:.0f}) tg {rows[-1]['tg']['mean']:.1f} tok/s", flush=True)
    if args.profile:
        rows[-1]["profile"] = profile_decode(model)
        print_profile("SmolLM2 mlx-native", rows[-1]["profile"])
    save()
    if args.fused_mlp:
        try:
            fused = build_model(load_checkpoint(gguf_path), LoadOptions(torch.device("cuda"), torch.bfloat16, True,
                                                                        fused_mlp_decode=True))
            res = {r["test"]: r for r in bench_model(fused, 0, args.n_gen, args.reps)}
            rows.append(dict(model=name, impl="mlx-native, fused gate/up+SiLU decode kernel",
                             tg=stats(res[f"tg{args.n_gen}"]["tps"])))
            print(f"[model] {name} mlx-native fused MLP: tg {rows[-1]['tg']['mean']:.1f} tok/s", flush=True)
            if args.profile:
                rows[-1]["profile"] = profile_decode(fused)
                print_profile("SmolLM2 fused MLP", rows[-1]["profile"])
            del fused
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            rows.append(dict(model=name, impl="mlx-native, fused MLP", error=repr(exc)[:300]))
        save()
    if not args.skip_compiled:
        try:
            agree = gptfast_baseline.check_agreement(model)
            r = gptfast_baseline.bench(model, args.n_prompt, args.n_gen, args.reps)
            rows.append(dict(model=name, impl="plain PyTorch + static cache + torch.compile(reduce-overhead)",
                             pp=stats(r["pp"]), tg=stats(r["tg"]), compile_s=r["compile_s"], **agree))
            print(f"[model] compiled baseline: pp {rows[-1]['pp']['mean']:.0f} tg {rows[-1]['tg']['mean']:.1f} "
                  f"tok/s (compile {r['compile_s']:.0f}s; against our decode steps: argmax agreement "
                  f"{agree['argmax_agreement']:.2f}, logit difference {agree['logit_rel_diff']:.1e})", flush=True)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            rows.append(dict(model=name, impl="plain PyTorch + torch.compile", error=repr(exc)[:300]))
    save()
    del model
    torch.cuda.empty_cache()
    if not args.skip_hf:
        try:
            r = hf_eager(gguf_path, args.n_prompt, args.hf_gen, max(1, min(args.reps, 2)))
            rows.append(dict(model=name, impl="transformers eager (bf16, DynamicCache)", pp=stats(r["pp"]),
                             tg=stats(r["tg"]), tg_tokens=args.hf_gen))
            print(f"[model] transformers eager: pp {rows[-1]['pp']['mean']:.0f} tg {rows[-1]['tg']['mean']:.1f} "
                  f"tok/s", flush=True)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            rows.append(dict(model=name, impl="transformers eager", error=repr(exc)[:300]))
    return rows


# (fused_decode_attention, norm_handoff) of the 8B-shaped rows: the default first, then what --fused-attn compares
FUSION_VARIANTS = ((True, True), (True, False), (False, True))


def llama8b_rows(args, copy_bw: float) -> list[dict]:
    rows = []
    arch, config = ARCHS[args.arch]
    variants = [(k, f, a) for k in args.kinds_8b.split(",")
                for f in ((None, False, True) if args.fused_mlp else (None,))
                for a in (FUSION_VARIANTS if args.fused_attn else FUSION_VARIANTS[:1])]
    for kind, fused, (attn, norm) in variants:
        try:
            ckpt = llama8b_checkpoint(args.layers_8b, kind, torch.device("cuda"), config)
            model = build_model(ckpt, LoadOptions(torch.device("cuda"), torch.bfloat16, keep_quantized=True,
                                                  fused_mlp_decode=fused, fused_decode_attention=attn,
                                                  norm_handoff=norm))
            depth = args.n_depth
            res = {r["test"]: r for r in bench_model(model, 0, args.n_gen, args.reps, n_depth=depth)}
            tps = res[f"tg{args.n_gen}" + (f" @ d{depth}" if depth else "")]["tps"]
            weight_bytes = bytes_per_token(ckpt)
            c = ckpt.config
            kv_bytes = (2 * c["num_hidden_layers"] * c["num_key_value_heads"] * c["head_dim"] * 2
                        * (depth + args.n_gen // 2))
            floor_s = (weight_bytes + kv_bytes) / copy_bw
            mean = statistics.mean(tps)
            rows.append(dict(model=f"{arch}-shaped, {args.layers_8b} layers + {config['vocab_size']}-vocab head, "
                                   f"random {kind}" + (f", tg after {depth} cached tokens" if depth else ""),
                             impl="mlx-native", tg=stats(tps), bytes_per_token=weight_bytes + kv_bytes,
                             floor_tps=1 / floor_s, frac_floor=mean * floor_s))
            label = {None: "", False: " unfused MLP", True: " fused MLP"}[fused]
            label += ("" if attn else " unfused attention") + ("" if norm else " norm launches")
            label += f" @ d{depth}" if depth else ""
            print(f"[model] {arch}-shaped {kind}{label}: tg {mean:.1f} tok/s, floor {1 / floor_s:.1f} tok/s "
                  f"({100 * mean * floor_s:.1f}% of the bandwidth floor)", flush=True)
            if fused is not None or (attn, norm) != FUSION_VARIANTS[0]:
                rows[-1]["impl"] = (f"mlx-native, LoadOptions(fused_mlp_decode={fused}, fused_decode_attention={attn}, "
                                    f"norm_handoff={norm})")
            if args.profile:
                rows[-1]["profile"] = profile_decode(model)
                print_profile(f"{arch}-shaped {kind}{label}", rows[-1]["profile"])
            del model, ckpt
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            rows.append(dict(model=f"{arch}-shaped {kind}", impl="mlx-native", error=repr(exc)[:300]))
    return rows


def markdown(env, copy_bw, rows, args) -> str:
    lines = [f"# Model benchmarks ({env.get('gpu')}, {env['date']})", "",
             f"torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}; device copy bandwidth "
             f"{copy_bw / 1e12:.2f} TB/s. Batch 1, tokens/s, mean ± std over {args.reps} reps after a warm-up "
             f"(transformers eager: {min(args.reps, 2)} reps, tg over {args.hf_gen} tokens).", "",
             "| model | implementation | pp512 t/s | tg t/s | notes |", "| --- | --- | ---: | ---: | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['impl']} | - | - | error: {r['error'][:120]} |")
            continue
        pp = f"{r['pp']['mean']:.0f} ± {r['pp']['std']:.0f}" if "pp" in r else "-"
        tg = f"{r['tg']['mean']:.1f} ± {r['tg']['std']:.1f}"
        notes = []
        if "pp_graph" in r:
            notes.append(f"pp{args.n_prompt} replayed from a CUDA graph (`mlx-native bench --prefill-graph`): "
                         f"{r['pp_graph']['mean']:.0f} ± {r['pp_graph']['std']:.0f} t/s")
        if "frac_floor" in r:
            notes.append(f"{100 * r['frac_floor']:.1f}% of the bandwidth floor ({r['floor_tps']:.0f} t/s, "
                         f"{r['bytes_per_token'] / 1e9:.3f} GB/token)")
        if "compile_s" in r:
            notes.append(f"compile {r['compile_s']:.0f} s; against our decode steps: argmax agreement "
                         f"{r['argmax_agreement']:.2f}, logit difference {r.get('logit_rel_diff', float('nan')):.1e}")
        lines.append(f"| {r['model']} | {r['impl']} | {pp} | {tg} | {'; '.join(notes)} |")
    ours = [r for r in rows if r.get("impl") == "mlx-native" and "pp" in r]
    comp = [r for r in rows if "compile_s" in r]
    hf = [r for r in rows if str(r.get("impl", "")).startswith("transformers") and "tg" in r]
    if ours and comp:
        lines += ["", f"SmolLM2 decode: mlx-native / compiled plain PyTorch = "
                      f"{ours[0]['tg']['mean'] / comp[0]['tg']['mean']:.2f}x"]
    if ours and comp and "pp_graph" in ours[0]:
        lines += [f"SmolLM2 prefill against plain PyTorch's (eager; its decode is the compiled one): mlx-native "
                  f"eager {ours[0]['pp']['mean'] / comp[0]['pp']['mean']:.2f}x, replayed from a CUDA graph "
                  f"{ours[0]['pp_graph']['mean'] / comp[0]['pp']['mean']:.2f}x"]
    if ours and hf:
        lines += [f"SmolLM2 decode: mlx-native / transformers eager = {ours[0]['tg']['mean'] / hf[0]['tg']['mean']:.1f}x"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--gguf", default=os.environ.get("MLX_NATIVE_SMOLLM2_GGUF"),
                   help="the real SmolLM2-135M-Instruct.Q4_1.gguf (default: a synthetic one of the same shapes)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--n-prompt", type=int, default=512)
    p.add_argument("--n-gen", type=int, default=128)
    p.add_argument("--hf-gen", type=int, default=32, help="decode tokens for transformers eager (slow)")
    p.add_argument("--layers-8b", type=int, default=4)
    p.add_argument("--n-depth", type=int, default=0,
                   help="8B-shaped rows: tokens in the cache before the tg test (llama-bench's -d)")
    p.add_argument("--kinds-8b", default="mlx-affine-4bit-g64,gguf-Q4_K,gguf-Q4_0",
                   help="weight formats of the 8B-shaped model (comma-separated)")
    p.add_argument("--skip-hf", action="store_true")
    p.add_argument("--skip-compiled", action="store_true")
    p.add_argument("--only", default="smollm2,llama8b")
    p.add_argument("--arch", default="llama3-8b", choices=sorted(ARCHS), help="shapes of the 8B-shaped rows")
    p.add_argument("--profile", action="store_true", help="kernel breakdown of one eager decode step")
    p.add_argument("--fused-attn", action="store_true",
                   help="8B-shaped models also with norm_handoff=False (norm launches) and with "
                        "fused_decode_attention=False (RoPE, cache write and attention as three launches)")
    p.add_argument("--fused-mlp", action="store_true",
                   help="also measure SmolLM2 with the fused gate/up+activation decode kernel, and the 8B rows with "
                        "fused_mlp_decode False and True besides the default")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    env = common.environment()
    copy_bw = common.copy_bandwidth()
    print(f"[model] {env.get('gpu')}: copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows: list[dict] = []

    def save() -> str:  # after every group of rows, so a time-out keeps what was measured
        md = markdown(env, copy_bw, rows, args)
        with open(os.path.join(args.out, "model_results.json"), "w") as f:
            json.dump({"environment": env, "copy_bandwidth_Bps": copy_bw, "args": vars(args), "rows": rows}, f,
                      indent=1, default=str)
        with open(os.path.join(args.out, "model_results.md"), "w") as f:
            f.write(md)
        return md

    only = set(args.only.split(","))
    if "llama8b" in only and "8b-first" in only:
        rows += llama8b_rows(args, copy_bw)
        save()
    if "smollm2" in only:
        synthetic = not args.gguf
        path = args.gguf or synthetic_smollm2_gguf(os.path.join(tempfile.mkdtemp(), "smollm2-shaped.gguf"))
        smollm2_rows(path, synthetic, args, rows, save)
    if "llama8b" in only and "8b-first" not in only:
        rows += llama8b_rows(args, copy_bw)
    print(save())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
