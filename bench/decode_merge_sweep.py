"""How split-KV decode merges its splits, timed on the decode rows of the attention bench (developer tool).

The merge is the fixed tail of a split decode: at batch 1 every split streams its share of the cache in about the
same time, and then the partials must be combined. Three ways are timed side by side (CUDA-graph replay, input sets
rotated so the cache does not sit in L2), with SDPA's cuDNN and flash backends on the same data:

* ``fused``: the last split of each (sequence, KV head) to arrive on an atomic counter merges, in the decode launch;
* ``pdl``: a second launch, one program per output row, launched as a programmatic dependent of the decode launch
  (it is resident before the splits end and waits in the kernel);
* ``launch``: the same second launch without PDL.

The default (``decode.merge_mode``'s choice) is timed too, at batch 1 also with other tile configs
(``(BLOCK_N, num_warps, num_stages)``), and the kernels of B1 kv8k are profiled.

    python bench/decode_merge_sweep.py [--out FILE.json] [--quick] [--shapes B1,B8] [--splits 16,32]
                                       [--tiles] [--configs "64,4,4 128,4,4"]

``--tiles``: the tile configs at every batch of D 128 (default: batch 1 only); ``--configs``: those configs instead
of ``CONFIGS``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from attention import PEERS, _sdpa  # noqa: E402
from moe_sweep import kernel_times  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.attention import decode as dec  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

BF16 = torch.bfloat16
MERGES = ("fused", "pdl", "launch")
# (batch, Hq, Hkv, kv, D, ragged)
SHAPES = [(1, 64, 8, 8192, 128, False), (1, 64, 8, 32768, 128, False), (1, 64, 8, 131072, 128, False),
          (8, 64, 8, 32768, 128, False), (8, 64, 8, 32768, 128, True), (1, 32, 8, 1024, 128, False),
          (1, 16, 8, 8192, 256, False), (1, 16, 8, 32768, 256, False), (8, 64, 8, 1024, 128, False),
          (8, 64, 8, 8192, 128, False), (32, 64, 8, 8192, 128, False), (1, 9, 3, 2048, 64, False),
          # Qwen3-30B-A3B's attention in the model runner's decode (a cache a little longer than the sequence)
          (1, 32, 4, 640, 128, False), (1, 32, 4, 2048, 128, False), (1, 32, 4, 4096, 128, False),
          (1, 32, 4, 8192, 128, False), (1, 32, 4, 32768, 128, False)]
CONFIGS = [(64, 4, 4), (64, 4, 3), (128, 4, 3), (64, 4, 2), (64, 8, 3)]


DEFAULT_TILE_CONFIG = dec.tile_config


def set_variant(merge=None, config=None, splits=None) -> None:
    """``merge``: None for the default rule (decode.merge_mode), else forced; ``config``: a forced
    ``(BLOCK_N, num_warps, num_stages)``, None for decode.tile_config's; ``splits``: a forced split count, None for
    decode.num_splits'."""
    dec.MERGE_OVERRIDE = merge
    dec.SPLITS_OVERRIDE = splits
    dec.tile_config = (lambda block_d, span, dtype, batch, name="", c=config: c) if config else DEFAULT_TILE_CONFIG
    plans.clear_all()


def make_sets(b, hq, hkv, kv, d, ragged):
    """Input sets rotated as the bench rotates them (``common.L2_ROTATE_BYTES`` of caches per pass, at most
    ``common.MAX_SETS`` sets), so the caches are read from DRAM."""
    per_set = 2 * b * hkv * kv * d * 2
    n = max(1, min(common.MAX_SETS, math.ceil(common.L2_ROTATE_BYTES / per_set)))
    gen = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(n):
        q = torch.randn(b, hq, 1, d, device="cuda", dtype=BF16)
        kc, vc = (torch.randn(b, hkv, kv, d, device="cuda", dtype=BF16) for _ in range(2))
        if ragged:
            lens = torch.randint(1024, kv + 1, (b,), device="cuda", generator=gen, dtype=torch.int32)
        else:
            lens = torch.full((b,), kv, dtype=torch.int32, device="cuda")
        sets.append((q, kc, vc, lens))
    return sets


def ours(q, kc, vc, lens):
    return mn.flash_attn_decode(q, kc, vc, lens)


def peer(name):
    run = _sdpa(PEERS[name])

    def call(q, kc, vc, lens):
        return run(q, kc, vc)
    return call


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "decode_merge_sweep.json"))
    ap.add_argument("--quick", action="store_true", help="default tiles only")
    ap.add_argument("--shapes", default="", help="keep the shapes whose name contains one of these (comma-separated)")
    ap.add_argument("--splits", default="", help="batch 1, D 128: also each tile config at these split counts")
    ap.add_argument("--tiles", action="store_true", help="tile configs at every batch of D 128, not only batch 1")
    ap.add_argument("--configs", default="", help="tile configs BLOCK_N,warps,stages (space-separated)")
    a = ap.parse_args()
    split_counts = [int(v) for v in a.splits.split(",") if v]
    configs = [tuple(map(int, c.split(","))) for c in a.configs.split()] or CONFIGS
    rows = []

    def emit(**row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    for b, hq, hkv, kv, d, ragged in SHAPES:
        shape = f"B{b} Hq{hq} Hkv{hkv} kv{kv} D{d}" + (" ragged" if ragged else "")
        if a.shapes and not any(w in shape for w in a.shapes.split(",")):
            continue
        sets = make_sets(b, hq, hkv, kv, d, ragged)
        nbytes = sum(2 * int(n.clamp(max=kv).sum()) * hkv * d * 2 for *_, n in sets) / len(sets)
        variants = [(None, None, None)] + [(m, None, None) for m in MERGES]
        if not a.quick and d == 128 and (b == 1 or a.tiles):
            variants += [(None, c, None) for c in configs]
            if b == 1:
                variants += [(None, c, n) for c in [None] + configs for n in split_counts]
        for _ in range(common.DECODE_ROUNDS):  # round-robin: each variant keeps its better median
            for name in ("sdpa cudnn", "sdpa flash"):
                if ragged:
                    continue
                t = common.time_graph(peer(name), sets)
                emit(shape=shape, impl=name, us=t, tbps=nbytes / t / 1e6 if t else None)
            for merge, config, splits in variants:
                set_variant(merge, config, splits)
                t = common.time_graph(ours, sets)
                emit(shape=shape, impl="ours", merge=merge or "default", config=config, splits=splits, us=t,
                     tbps=nbytes / t / 1e6 if t else None)
        if b == 1 and kv == 8192 and d == 128:
            for merge in MERGES:
                set_variant(merge)
                emit(shape=shape, impl="profile", merge=merge, kernels=kernel_times(ours, sets))
        del sets
        torch.cuda.empty_cache()
    set_variant()
    best = common.save_sweep(a.out, rows, lambda r: (r["shape"], r["impl"], r.get("merge"), str(r.get("config")),
                                                     str(r.get("splits"))))
    for key, t in sorted(best.items(), key=lambda kv: (kv[0][0], kv[1])):
        print(f"{key[0]:34s} {key[1]:10s} {str(key[2]):7s} cfg={key[3]:14s} splits={key[4]:5s} {t:8.2f} us")


if __name__ == "__main__":
    main()
