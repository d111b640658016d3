"""The streamed GGUF mat-vecs (ops/ggml/q4k_mv.py for Q4_K, ops/ggml/q4_mv.py for Q4_0 / Q4_1) against the
word-level kernel they replace (``MLX_NATIVE_GGUF_MV=0``) on Llama-3-8B's shapes, one row of bf16 x, CUDA-graph
replay, weights rotating through >= 120 MB; plus each kernel's row tile and K-split target.

    python bench/gguf_mv_sweep.py [--out FILE.json] [--types Q4_K,Q4_0,Q4_1]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats, q4_mv, q4k_mv  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [(4096, 4096), (4096, 6144), (4096, 14336), (4096, 28672), (14336, 4096), (4096, 128256)]
GRID = list(itertools.product((8, 16), (1, 2)))  # (rows per program, programs per SM)
KNOBS = {"Q4_K": (q4k_mv, "Q4K_BN"), "Q4_0": (q4_mv, "Q4_BN"), "Q4_1": (q4_mv, "Q4_BN")}  # rows of < 8192 columns


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--types", default="Q4_K,Q4_0,Q4_1")
    args = ap.parse_args()
    copy = common.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.3f} TB/s", flush=True)
    rows = []
    for name in args.types.split(","):
        mod, bn_name = KNOBS[name]
        default = (getattr(mod, bn_name), mod.PROGRAMS_PER_SM)
        for k, n in SHAPES:
            nbytes = n * formats.row_bytes(formats.BY_NAME[name], k)
            raws = [gguf_raw(name, n, k) for _ in range(max(2, min(16, 120_000_000 // nbytes)))]
            sets = [(torch.randn(1, k, device="cuda", dtype=DT), r) for r in raws]
            ref = mn.ggml_dequantize(raws[0], name, (n, k)).double() @ sets[0][0][0].double()
            scale = ref.abs().max().item()

            def call(x, raw, name=name, n=n, k=k):
                return mn.ggml_matmul(x, raw, name, (n, k))

            def timed(label, sets, **extra):
                plans.clear_all()
                err = (call(*sets[0]).double()[0] - ref).abs().max().item() / scale
                t = common.time_graph(call, sets, 20)
                rows.append(dict(type=name, k=k, n=n, variant=label, us=t, rel_err=err, weight_bytes=nbytes, **extra))
                print(f"{name} K{k:6d} N{n:7d} {label:34s} {t:8.2f} us {nbytes / t * 1e6 / copy * 100:5.1f}% copy "
                      f"err {err:.1e}", flush=True)
                return t

            env.settings = dataclasses.replace(env.settings, gguf_mv=False)
            t_old = timed("word-level (MLX_NATIVE_GGUF_MV=0)", sets)
            env.settings = dataclasses.replace(env.settings, gguf_mv=True)
            for bn, pps in GRID:
                setattr(mod, bn_name, bn)
                mod.PROGRAMS_PER_SM = pps
                tag = " (default)" if (bn, pps) == default else ""
                t = timed(f"streamed BN{bn} pps{pps}{tag}", sets, bn=bn, programs_per_sm=pps)
                print(f"    x{t_old / t:.2f} the word-level kernel", flush=True)
            setattr(mod, bn_name, default[0])
            mod.PROGRAMS_PER_SM = default[1]
            del sets, raws
            torch.cuda.empty_cache()
    plans.clear_all()
    if args.out:
        common.save_json(args.out, dict(copy_bandwidth=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
