"""Decode attention where the split rule matters most, CUDA-graph replay: the model runner's short caches
(SmolLM2-135M: 9 query / 3 KV heads of 64; Llama-3-8B: 32 / 8 of 128; D=256 with 2 query heads per KV head),
a short sequence in a long cache, and the issue's ragged batch. For each: the plan's split count with
splits shortened to the sequence (``decode.SHORTEN_SPLITS``, the default) and without, forced counts
(``decode.SPLITS_OVERRIDE``) on the batch-1 cases, and PyTorch SDPA on the visible prefix (ragged: padded to
the longest, as SDPA needs).

    python bench/decode_small.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.attention import decode  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

DT = torch.bfloat16
# (label, batch, Hq, Hkv, D, capacity, kv lengths: an int, or "ragged" = uniform 1k..capacity)
CASES = [("SmolLM2", 1, 9, 3, 64, 1024, kv) for kv in (16, 200, 600)]
CASES += [("Llama-3-8B", 1, 32, 8, 128, 1024, kv) for kv in (16, 600, 1024)]
CASES += [("D256", 1, 16, 8, 256, 1024, 1024), ("Llama-3-8B", 1, 32, 8, 128, 32768, 600),
          ("Llama-3-8B", 8, 32, 8, 128, 32768, "ragged"), ("Llama-3-8B", 8, 32, 8, 128, 32768, 32768)]
FORCED = (1, 2, 4, 8, 16)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    gen = torch.Generator().manual_seed(0)
    for label, b, hq, hkv, d, cap, kv in CASES:
        nsets = max(2, min(8, 200_000_000 // (4 * b * hkv * cap * d)))
        sets = []
        for _ in range(nsets):
            q = torch.randn(b, hq, 1, d, device="cuda", dtype=DT)
            k, v = (torch.randn(b, hkv, cap, d, device="cuda", dtype=DT) for _ in range(2))
            lens = (torch.randint(1024, cap + 1, (b,), generator=gen) if kv == "ragged" else torch.full((b,), kv))
            sets.append((q, k, v, lens.to(device="cuda", dtype=torch.int32)))
        longest = int(max(int(s[3].max()) for s in sets))
        tag = f"{label} B{b} cap {cap} kv {kv}"

        def ours(q, k, v, lens):
            return mn.flash_attn_decode(q, k, v, lens)

        def sdpa(q, k, v, lens):
            mask = torch.arange(longest, device="cuda")[None, :] < lens[:, None]  # [B, L]: padded keys masked
            return torch.nn.functional.scaled_dot_product_attention(
                q, k[:, :, :longest], v[:, :, :longest], attn_mask=mask[:, None, None, :], enable_gqa=True)

        variants = [("plan", None, True), ("plan, no shortening", None, False)]
        if b == 1:
            variants += [(f"{s} splits", s, True) for s in FORCED]
        for name, splits, shorten in variants:
            decode.SPLITS_OVERRIDE, decode.SHORTEN_SPLITS = splits, shorten
            plans.clear_all()
            t = common.time_graph(ours, sets, 30)
            rows.append(dict(case=tag, impl="ours", variant=name, us=t))
            print(f"{tag:34s} ours {name:22s} {t:7.2f} us", flush=True)
        decode.SPLITS_OVERRIDE, decode.SHORTEN_SPLITS = None, True
        plans.clear_all()
        t = common.time_graph(sdpa, sets, 30)
        rows.append(dict(case=tag, impl="torch SDPA", us=t))
        print(f"{tag:34s} torch SDPA {'(padded)' if kv == 'ragged' else '':18s} {t:7.2f} us", flush=True)
        del sets
        torch.cuda.empty_cache()
    if args.out:
        common.save_json(args.out, dict(rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
