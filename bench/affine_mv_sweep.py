"""Launch constants of the streamed affine mat-vec (ops/quant/affine_mv.py) against the current decode
path (``mn.quantized_matmul``: mmv / word-level kernel), torch's int4 kernel and cuBLAS bf16, on MLX
4-bit g64 weights and one row of bf16 x, CUDA-graph replay. Enough weight sets rotate that they do not
sit in L2 (>= 120 MB per pass).

    python bench/affine_mv_sweep.py [--out FILE.json] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant.affine_mv import affine_mv_kernel  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096), (4096, 128256), (576, 576), (576, 1536), (1536, 576),
          (2048, 6144)]
GS = 64


def launcher(n, k, bn, wps, prefetch, warps, pps, sms):
    """A callable ``f(x, w, s, b)`` for one configuration, or None if the shape does not fit it."""
    words = k // 8
    if words % wps:
        return None
    steps = words // wps
    tiles = triton.cdiv(n, bn)
    split = 1
    for d in range(1, steps + 1):  # smallest divisor of steps reaching pps programs per SM
        if steps % d == 0:
            split = d
            if tiles * d >= pps * sms:
                break
    per = steps // split * wps
    cnt = torch.zeros(tiles, dtype=torch.int32, device="cuda")

    def f(x, w, s, b):
        out = torch.empty(n, dtype=DT, device="cuda")
        part = torch.empty(split, n, dtype=torch.float32, device="cuda") if split > 1 else out
        affine_mv_kernel[(tiles, split)](x, w, s, b, out, part, cnt, n, k, per, 0x4B000000, STRIDE_W=k // 8,
                                         STRIDE_S=k // GS, BN=bn, WPS=wps, GS=GS, EVEN_N=n % bn == 0,
                                         PREFETCH=prefetch, SPLIT_K=split > 1, FUSE=split > 1, num_warps=warps,
                                         num_stages=1)
        return out
    return f, split


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", help="K x N pairs to run, e.g. 14336x4096,4096x4096 (default: all)")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    copy = common.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.3f} TB/s", flush=True)
    rows = []
    grid = list(itertools.product((8, 16, 32), (64, 128, 256), (1,), (4,), (1, 2, 4)))
    grid += [(16, 128, 0, 4, p) for p in (1, 2, 4)] + list(itertools.product((8, 16, 32), (64, 128, 256), (1,), (8,), (2,)))
    if args.quick:
        grid = [g for g in grid if g[1] == 128 and g[3] == 4 and g[2] == 1 and g[4] == 2] + [(16, 64, 1, 4, 2)]
    for k, n in shapes:
        wbytes = affine_bytes(n, k, GS)
        nsets = max(2, min(16, -(-120_000_000 // wbytes)))
        sets = []
        for _ in range(nsets):
            w, s, b = affine_weight(n, k, GS)
            sets.append((torch.randn(1, k, device="cuda", dtype=DT), w.view(torch.int32), s, b))
        w64 = mn.dequantize(sets[0][1].view(torch.uint32), sets[0][2], sets[0][3], GS, 4).double()
        ref = (w64 @ sets[0][0][0].double()).float()
        del w64
        scale = ref.abs().max().item()

        def base(x, w, s, b):
            return mn.quantized_matmul(x, w.view(torch.uint32), s, b, transpose=True, group_size=GS, bits=4)
        env.settings = dataclasses.replace(env.settings, affine_mv=False)
        plans.clear_all()
        t_base = common.time_graph(base, sets, 20)
        env.settings = dataclasses.replace(env.settings, affine_mv=True)
        plans.clear_all()
        t_route = common.time_graph(base, sets, 20)
        y_route = base(*sets[0]).float()[0]
        err_route = (y_route - ref).abs().max().item() / scale
        rows.append(dict(k=k, n=n, impl="quantized_matmul, MLX_NATIVE_AFFINE_MV=0 (mmv / word-level)", us=t_base,
                         weight_bytes=wbytes))
        rows.append(dict(k=k, n=n, impl="quantized_matmul (default route: affine_mv)", us=t_route, weight_bytes=wbytes,
                         rel_err=err_route))
        print(f"K{k:6d} N{n:7d} previous {t_base:8.2f} us ({wbytes / t_base * 1e6 / copy * 100:5.1f}% copy)  "
              f"route {t_route:8.2f} us ({wbytes / t_route * 1e6 / copy * 100:5.1f}% copy, x{t_base / t_route:5.2f}, "
              f"err {err_route:.1e})", flush=True)
        dense = [(x, torch.randn(n, k, device="cuda", dtype=DT)) for x, *_ in sets[:max(2, min(nsets, 4))]]
        t_cublas = common.time_graph(lambda x, wd: x @ wd.T, dense, 20)
        rows.append(dict(k=k, n=n, impl="cuBLAS bf16", us=t_cublas, weight_bytes=2 * n * k))
        print(f"K{k:6d} N{n:7d} cuBLAS bf16 {t_cublas:8.2f} us", flush=True)
        del dense
        best = None
        for bn, wps, pf, warps, pps in grid:
            made = launcher(n, k, bn, wps, pf, warps, pps, sms)
            if made is None:
                continue
            f, split = made
            try:
                y = f(*sets[0]).float()
                err = (y - ref).abs().max().item() / scale
                t = common.time_graph(f, sets, 20)
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"  BN{bn} WPS{wps} pf{pf} w{warps} pps{pps}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            rows.append(dict(k=k, n=n, impl="affine_mv", bn=bn, wps=wps, prefetch=pf, warps=warps, pps=pps,
                             split=split, us=t, rel_err=err, weight_bytes=wbytes))
            if best is None or t < best[0]:
                best = (t, bn, wps, pf, warps, pps, split)
            print(f"  BN{bn:3d} WPS{wps:4d} pf{pf} w{warps} pps{pps} split{split:3d}  {t:8.2f} us  "
                  f"{wbytes / t * 1e6 / copy * 100:5.1f}% copy  x{t_base / t:5.2f}  err {err:.1e}", flush=True)
        if best:
            t = best[0]
            print(f"BEST K{k} N{n}: {t:.2f} us ({wbytes / t * 1e6 / copy * 100:.1f}% copy, {t_base / t:.2f}x current, "
                  f"{t_cublas / t:.2f}x cuBLAS, route {t_route / t:.2f}x this) config BN{best[1]} WPS{best[2]} pf{best[3]} w{best[4]} pps{best[5]} "
                  f"split{best[6]}", flush=True)
        del sets
        torch.cuda.empty_cache()
    if args.out:
        common.save_json(args.out, dict(copy_bandwidth=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
