"""Decode attention at the model runner's small shapes (SmolLM2-135M: 9 query / 3 KV heads of 64; Llama-3-8B:
32 / 8 of 128), batch 1, a cache of a few hundred positions, CUDA-graph replay: the split count chosen by the
plan against forced counts (``decode.SPLITS_OVERRIDE``), and PyTorch SDPA on the visible prefix.

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
SHAPES = [("SmolLM2", 9, 3, 64), ("Llama-3-8B", 32, 8, 128)]  # (label, Hq, Hkv, D)
CAPACITY = 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for label, hq, hkv, d in SHAPES:
        for kv in (16, 600):
            sets = []
            for _ in range(8):
                q = torch.randn(1, hq, 1, d, device="cuda", dtype=DT)
                k, v = (torch.randn(1, hkv, CAPACITY, d, device="cuda", dtype=DT) for _ in range(2))
                sets.append((q, k, v, torch.tensor([kv], dtype=torch.int32, device="cuda")))

            def ours(q, k, v, lens):
                return mn.flash_attn_decode(q, k, v, lens)

            def sdpa(q, k, v, lens):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k[:, :, :kv], v[:, :, :kv], enable_gqa=True)

            for splits in (None, 1, 2, 4, 8):
                decode.SPLITS_OVERRIDE = splits
                plans.clear_all()
                t = common.time_graph(ours, sets, 50)
                rows.append(dict(shape=label, kv=kv, impl="ours", splits=splits, us=t))
                print(f"{label:10s} kv {kv:4d} ours splits {str(splits or 'plan'):4s} {t:6.2f} us", flush=True)
            decode.SPLITS_OVERRIDE = None
            plans.clear_all()
            t = common.time_graph(sdpa, sets, 50)
            rows.append(dict(shape=label, kv=kv, impl="torch SDPA", us=t))
            print(f"{label:10s} kv {kv:4d} torch SDPA       {t:6.2f} us", flush=True)
    if args.out:
        common.save_json(args.out, dict(rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
