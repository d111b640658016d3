"""Launch constants of the word-level GGUF mat-vec (ops/quant/gemv.py) on SmolLM2-135M's shapes
(Q4_1, hidden 576, intermediate 1536, 49152-row head), one row of bf16 x, CUDA-graph replay, weights
rotating through >= 120 MB so they come from DRAM as in a decode step.

These matrices are 0.2-2 MB: a call is latency, not bandwidth. The sweep varies the row tile (BN),
the K split target (programs per SM; 0 = never split) and the words per step.

    python bench/gemv_small_sweep.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import gemv  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

DT = torch.bfloat16
# (K, N): q/k/v fused, o, gate/up fused, down, head
SHAPES = [(576, 960), (576, 576), (576, 3072), (1536, 576), (576, 49152)]
GRID = list(itertools.product((4, 8, 16), (0, 1, 2, 4), (64, 128)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--type", default="Q4_1")
    args = ap.parse_args()
    defaults = (gemv.GEMV_BN, gemv.PROGRAMS_PER_SM, gemv.GEMV_WORDS)
    rows = []
    for k, n in SHAPES:
        raws = [gguf_raw(args.type, n, k) for _ in range(max(2, min(64, 120_000_000 // (n * k * 5 // 8))))]
        sets = [(torch.randn(1, k, device="cuda", dtype=DT), r) for r in raws]
        ref = mn.ggml_dequantize(raws[0], args.type, (n, k)).double() @ sets[0][0][0].double()
        scale = ref.abs().max().item()

        def call(x, raw):
            return mn.ggml_matmul(x, raw, args.type, (n, k))

        best = None
        for bn, pps, words in GRID:
            gemv.GEMV_BN, gemv.PROGRAMS_PER_SM, gemv.GEMV_WORDS = bn, pps, words
            plans.clear_all()
            err = (call(*sets[0]).double()[0] - ref).abs().max().item() / scale
            t = common.time_graph(call, sets, 20)
            tag = " (default)" if (bn, pps, words) == defaults else ""
            rows.append(dict(k=k, n=n, type=args.type, bn=bn, programs_per_sm=pps, words=words, us=t, rel_err=err))
            print(f"K{k:5d} N{n:6d} BN{bn:3d} pps{pps} words{words:4d}  {t:7.2f} us  err {err:.1e}{tag}", flush=True)
            if best is None or t < best[0]:
                best = (t, bn, pps, words)
        print(f"BEST K{k} N{n}: {best[0]:.2f} us BN{best[1]} pps{best[2]} words{best[3]}", flush=True)
        del sets, raws
    gemv.GEMV_BN, gemv.PROGRAMS_PER_SM, gemv.GEMV_WORDS = defaults
    plans.clear_all()
    if args.out:
        common.save_json(args.out, dict(rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
