"""Word-level mat-vec (ops/quant/gemv.py) launch constants on small decode matrices (SmolLM2-135M:
hidden 576, intermediate 1536; Q4_1 and Q8_0 GGUF blocks), one row of bf16 x, CUDA-graph replay.

    python bench/gemv_sweep.py [--out FILE.json]

Varies GEMV_WORDS (words per row per K step), PROGRAMS_PER_SM (0: never split K) and FUSED_SPLITK.
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
from mlx_native.ops.quant import gemv, qmm  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

SHAPES = [(576, 960), (576, 576), (576, 1536), (1536, 576)]  # (K, N): qkv, o, gate (or up), down
FORMATS = ["Q4_1", "Q8_0"]
WORDS = [16, 32, 64, 128]
PPS = [0, 4]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    saved = (gemv.GEMV_WORDS, gemv.PROGRAMS_PER_SM, qmm.FUSED_SPLITK)
    for fmt, (k, n) in itertools.product(FORMATS, SHAPES):
        sets = [(torch.randn(1, k, device="cuda", dtype=torch.bfloat16), gguf_raw(fmt, n, k)) for _ in range(3)]

        def fn(x, raw, fmt=fmt, n=n, k=k):
            return mn.ggml_matmul(x, raw, fmt, (n, k))

        ref = None
        for words, pps, fused in itertools.product(WORDS, PPS, (True, False)):
            if pps == 0 and not fused:
                continue
            gemv.GEMV_WORDS, gemv.PROGRAMS_PER_SM, qmm.FUSED_SPLITK = words, pps, fused
            plans.clear_all()
            y = fn(*sets[0])
            ref = y if ref is None else ref
            err = ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            t = common.time_graph(fn, sets, 20)
            rows.append(dict(fmt=fmt, k=k, n=n, words=words, programs_per_sm=pps, fused=fused, us=t, rel_err=err))
            print(f"{fmt} K{k:5d} N{n:5d} words {words:3d} pps {pps} fused {int(fused)}  {t:6.2f} us  err {err:.1e}",
                  flush=True)
    gemv.GEMV_WORDS, gemv.PROGRAMS_PER_SM, qmm.FUSED_SPLITK = saved
    if args.out:
        common.save_json(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
