"""Session 40: the tensor-core decode kernel of GGUF Q6_K / Q8_0 (``ops/ggml/block_mmv.py``, ``q6k_mmv.py`` in runs
2-3) at 3-16 rows of x against the route before it (``MLX_NATIVE_MMV=off``: the streamed kernels' rows at 2-4, 4-row
slices at 5-8 (Q8_0: 5), the tiled decode kernel above), ``ggml_matmul``'s route now, dequantize + cuBLAS bf16, and
one row; the register prefetch (p1 / p0) and programs per SM (2 / 4) swept
(run 2 swept cp.async stages of the first form, two super-blocks a step: 1 stage best, 3 spilled). CUDA-graph replay,
weights rotating past L2; us.

    python block_mmv_sweep.py [--fmt Q8_0] [--rows 2,4,5,8,12,16] [--shapes 4096x14336,...] [--variants 0]
"""
import argparse
import dataclasses
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
from quant import gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import block_mmv, formats  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
VARIANTS = [(True, 2), (False, 2), (True, 4), (False, 4)]  # (register prefetch, programs per SM)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="3,4,5,8,16")
    ap.add_argument("--shapes", default="4096x14336,14336x4096,4096x4096,4096x128256")
    ap.add_argument("--fmt", default="Q6_K")
    ap.add_argument("--variants", type=int, default=1, help="0: only the routes")
    a = ap.parse_args()
    copy = common.copy_bandwidth()
    print(f"copy {copy / 1e12:.2f} TB/s", flush=True)
    base_settings = env.settings
    for shape in a.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        t = formats.BY_NAME[a.fmt]
        wbytes = n * formats.row_bytes(t, k)
        raws = [gguf_raw(a.fmt, n, k) for _ in range(max(2, min(8, math.ceil(256e6 / wbytes))))]

        def route(x, raw):
            return mn.ggml_matmul(x, raw, a.fmt, (n, k))

        def cublas(x, raw):
            return x @ mn.ggml_dequantize(raw, a.fmt, (n, k), dtype=DT).T

        plans.clear_all()
        t1 = common.time_graph(route, [(torch.randn(1, k, device="cuda", dtype=DT), r) for r in raws])
        print(f"{a.fmt} K{k} N{n}: one row {t1:.2f} us ({wbytes / t1 * 1e6 / copy * 100:.1f}% of copy)", flush=True)
        for m in (int(v) for v in a.rows.split(",")):
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), r) for r in raws]
            env.settings = dataclasses.replace(base_settings, mmv="off")
            plans.clear_all()
            ref = route(*sets[0]).float()
            t_before = common.time_graph(route, sets)
            env.settings = base_settings
            plans.clear_all()
            now = route(*sets[0]).float()
            err = (now - ref).abs().max().item() / ref.abs().max().item()
            t_now = common.time_graph(route, sets)
            t_cub = common.time_graph(cublas, sets)
            row = (f"  M{m:<3d} before {t_before:7.2f}  now {t_now:7.2f} (x{t_before / t_now:4.2f}, err {err:.0e})  "
                   f"cuBLAS {t_cub:7.2f}")
            for prefetch, pps in VARIANTS if a.variants else ():
                plan = block_mmv.BlockMmvLaunch(t.id, m, n, k, DT, k, torch.device("cuda"), pps, prefetch)
                out = plan(*sets[0]).float()
                err = (out - ref).abs().max().item() / ref.abs().max().item()
                tv = common.time_graph(plan, sets)
                row += f"  p{int(prefetch)} {pps}/SM {tv:7.2f} (split {plan.split}, err {err:.0e})"
            print(row, flush=True)


if __name__ == "__main__":
    main()
