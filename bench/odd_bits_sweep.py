"""The streamed one-row mat-vec of MLX affine 3/5/6-bit weights (ops/quant/affine_mv_odd.py): its launch knobs (rows
per thread, units per step, programs per SM) against the route without it (``MLX_NATIVE_AFFINE_MV=0``) and bf16
cuBLAS on the dequantized weight, one row of bf16 x, g64, CUDA-graph replay, weights rotating through >= 120 MB.

    python bench/odd_bits_sweep.py [--out FILE.json] [--bits 3,5,6] [--shapes 4096x14336,14336x4096] [--routes]

``--routes``: the default route and the route without the kernel only (no knob grid, no cuBLAS).
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
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import affine_mv_odd  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
GRID = dict(rt=(2, 4, 8), max_t=(16, 32), programs_per_sm=(1, 2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--bits", default="3,5,6")
    ap.add_argument("--shapes", default="4096x14336,14336x4096")
    ap.add_argument("--routes", action="store_true", help="the default route and the route without the kernel only")
    args = ap.parse_args()
    copy = common.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.3f} TB/s", flush=True)
    rows = []
    for bits, shape in itertools.product([int(b) for b in args.bits.split(",")], args.shapes.split(",")):
        k, n = (int(v) for v in shape.split("x"))
        nbytes = affine_bytes(n, k, 64, bits)
        ws = [affine_weight(n, k, 64, bits) for _ in range(max(2, min(12, 120_000_000 // nbytes)))]
        sets = [(torch.randn(1, k, device="cuda", dtype=DT), *w) for w in ws]

        def call(x, wq, s, b, bits=bits):
            return mn.quantized_matmul(x, wq, s, b, True, 64, bits)

        ref = call(*sets[0]).float()

        def timed(label, fn, **extra):
            plans.clear_all()
            err = (fn(*sets[0]).float() - ref).abs().max().item() / ref.abs().max().item()
            t = common.time_graph(fn, sets, 20)
            rows.append(dict(bits=bits, k=k, n=n, variant=label, us=t, rel_err=err, weight_bytes=nbytes, **extra))
            print(f"{bits}b K{k:6d} N{n:6d} {label:44s} {t:8.2f} us {nbytes / t * 1e6 / copy * 100:5.1f}% copy "
                  f"err {err:.1e}", flush=True)

        env.settings = dataclasses.replace(env.settings, affine_mv=False)
        timed("MLX_NATIVE_AFFINE_MV=0", call)
        env.settings = dataclasses.replace(env.settings, affine_mv=True)
        timed("default", call)
        if args.routes:
            continue
        for values in itertools.product(*GRID.values()):
            knobs = dict(zip(GRID, values))
            try:
                plan = affine_mv_odd.AffineOddMvLaunch(n, k, 64, bits, DT, torch.device("cuda"), **knobs)
            except Exception as exc:  # noqa: BLE001 - a knob the row cannot take
                print(f"{bits}b K{k} N{n} {knobs}: {exc!r}"[:200], flush=True)
                continue
            timed(" ".join(f"{a}={v}" for a, v in knobs.items()), lambda x, wq, s, b, plan=plan: plan(x, wq, s, b),
                  **knobs)
        wd = [mn.dequantize(*w, 64, bits) for w in ws[:4]]
        t = common.time_graph(lambda x, w: x @ w.T, [(sets[0][0], w) for w in wd], 20)
        print(f"{bits}b K{k:6d} N{n:6d} {'cuBLAS bf16 (dequantized weight)':44s} {t:8.2f} us", flush=True)
        rows.append(dict(bits=bits, k=k, n=n, variant="cuBLAS bf16", us=t, weight_bytes=nbytes))
        torch.cuda.empty_cache()
    if args.out:
        common.save_json(args.out, dict(copy_bandwidth=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
