"""The attention of one decode step, CUDA-graph replay: RoPE of q and the new k, the cache write and the
attention as three launches (``rope_qk``, ``kv_cache_write``, ``flash_attn_decode``) against one
(``flash_attn_decode(k_new=, v_new=, rope=)``), and the attention alone (what the fusion adds to it).
Shapes of the model runner: SmolLM2-135M (9 query / 3 KV heads of 64) and Llama-3-8B (32 / 8 of 128) at
the cache lengths of a chat, batch 1 and 8.

    python bench/decode_step.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

import mlx_native as mn  # noqa: E402

DT = torch.bfloat16
# (label, batch, Hq, Hkv, D, capacity, cached tokens, rope base)
CASES = [("SmolLM2", 1, 9, 3, 64, 2048, kv, 100000.0) for kv in (16, 130, 600)]
CASES += [("Llama-3-8B", 1, 32, 8, 128, 4096, kv, 500000.0) for kv in (16, 130, 600, 4000)]
CASES += [("Llama-3-8B", 8, 32, 8, 128, 4096, 1000, 500000.0)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for label, b, hq, hkv, d, cap, kv, base in CASES:
        spec = mn.RopeSpec(d, base=base)
        sets = []
        for _ in range(4):
            qkv = torch.randn(b, 1, (hq + 2 * hkv) * d, device="cuda", dtype=DT)  # one fused projection output
            q = qkv[..., :hq * d].unflatten(-1, (hq, d)).transpose(1, 2)
            k = qkv[..., hq * d:(hq + hkv) * d].unflatten(-1, (hkv, d)).transpose(1, 2)
            v = qkv[..., (hq + hkv) * d:].unflatten(-1, (hkv, d)).transpose(1, 2)
            kc, vc = (torch.randn(b, hkv, cap, d, device="cuda", dtype=DT) for _ in range(2))
            lens = torch.full((b,), kv, device="cuda", dtype=torch.int32)
            sets.append((q, k, v, kc, vc, lens, lens + 1))
        tag = f"{label} B{b} kv {kv}"

        def separate(q, k, v, kc, vc, lens, next_lens):
            qr, kr = mn.rope_qk(q, k, d, base=base, positions=lens[:, None, None])
            mn.kv_cache_write(kc, vc, lens, kr, v, advance=False)
            return mn.flash_attn_decode(qr, kc, vc, next_lens)

        def fused(q, k, v, kc, vc, lens, next_lens):
            return mn.flash_attn_decode(q, kc, vc, lens, k_new=k, v_new=v, rope=spec)

        def attention_only(q, k, v, kc, vc, lens, next_lens):
            return mn.flash_attn_decode(q, kc, vc, next_lens)

        for name, fn in (("rope + write + attention", separate), ("fused", fused), ("attention only", attention_only)):
            t = common.time_graph(fn, sets, 50)
            rows.append(dict(case=tag, impl=name, us=t))
            print(f"{tag:26s} {name:26s} {t:7.2f} us", flush=True)
    if args.out:
        common.save_json(args.out, dict(rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
