"""Launch constants of the word-level GGUF mat-vec (ops/quant/gemv.py) on SmolLM2-135M's shapes
(Q4_1, hidden 576, intermediate 1536, 49152-row head), one row of bf16 x, CUDA-graph replay, weights
rotating through >= 120 MB so they come from DRAM as in a decode step.

These matrices are 0.2-2 MB: a call is latency, not bandwidth. ``--grid`` varies the row tile (BN),
the K split target (programs per SM; 0 = never split) and the words per step; the default compares the
current tile/split rule against the previous one (16-row tiles, K split from any K) on SmolLM2's shapes
and on the Llama-3-8B GGUF shapes the rule also reaches.

    python bench/gemv_small_sweep.py [--out FILE.json] [--grid]
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
# (type, K, N): SmolLM2's q/k/v fused, o, gate/up fused, down, tied Q8_0 head; Llama-3-8B's layers
SMALL = [("Q4_1", 576, 960), ("Q4_1", 576, 576), ("Q4_1", 576, 3072), ("Q4_1", 1536, 576), ("Q4_1", 576, 49152)]
ROUTE = SMALL + [("Q8_0", 576, 49152)] + [(t, k, n) for t in ("Q4_K", "Q4_0")
                                         for k, n in ((4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096))]
GRID = list(itertools.product((4, 8, 16), (0, 1, 2, 4), (64, 128)))
PREVIOUS = dict(GEMV_BNS=(16,), SPLIT_MIN_K=0)  # the rule before session 5


def configure(**constants):
    for name, value in constants.items():
        setattr(gemv, name, value)
    plans.clear_all()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--grid", action="store_true")
    args = ap.parse_args()
    current = {name: getattr(gemv, name) for name in ("GEMV_BNS", "SPLIT_MIN_K", "PROGRAMS_PER_SM", "GEMV_WORDS")}
    if args.grid:
        variants = [(f"BN{bn} pps{pps} words{words}", dict(GEMV_BNS=(bn,), SPLIT_MIN_K=0, PROGRAMS_PER_SM=pps,
                                                            GEMV_WORDS=words)) for bn, pps, words in GRID]
    else:
        variants = [("previous rule", dict(current, **PREVIOUS)), ("current rule", current)]
    rows = []
    for qtype, k, n in (SMALL if args.grid else ROUTE):
        raws = [gguf_raw(qtype, n, k) for _ in range(max(2, min(64, 120_000_000 // (n * k * 5 // 8))))]
        sets = [(torch.randn(1, k, device="cuda", dtype=DT), r) for r in raws]
        ref = mn.ggml_dequantize(raws[0], qtype, (n, k)).double() @ sets[0][0][0].double()
        scale = ref.abs().max().item()

        def call(x, raw):
            return mn.ggml_matmul(x, raw, qtype, (n, k))

        times = {}
        for label, constants in variants:
            configure(**constants)
            err = (call(*sets[0]).double()[0] - ref).abs().max().item() / scale
            t = common.time_graph(call, sets, 20)
            times[label] = t
            rows.append(dict(type=qtype, k=k, n=n, variant=label, us=t, rel_err=err))
            print(f"{qtype} K{k:6d} N{n:6d} {label:24s} {t:7.2f} us  err {err:.1e}", flush=True)
        best = min(times, key=times.get)
        print(f"BEST {qtype} K{k} N{n}: {best} {times[best]:.2f} us", flush=True)
        del sets, raws
    configure(**current)
    if args.out:
        common.save_json(args.out, dict(rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
