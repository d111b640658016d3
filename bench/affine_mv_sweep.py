"""Launch constants of the streamed affine mat-vecs (ops/quant/affine_mv.py, and with ``--kernel idot`` the
integer-dot ops/quant/affine_idot.py) against the routes of ``mn.quantized_matmul`` (default; integer-dot
off; both streamed kernels off: mmv / word-level kernel) and cuBLAS bf16, on MLX 4-bit g64 weights and one
row of bf16 x, CUDA-graph replay. Enough weight sets rotate that they do not sit in L2 (>= 120 MB per pass).

With ``--kernel q4k_idot`` / ``q4k_mv`` the same for GGUF Q4_K weights: the launch constants of the integer-dot
ops/ggml/q4k_idot.py (row tile, warps, register prefetch, programs per SM) or of the streamed
ops/ggml/q4k_mv.py (row tile, programs per SM) against the routes of ``mn.ggml_matmul`` (default; integer-dot
off: q4k_mv; both off: word-level kernel).

With ``--rows M1,M2,...`` (instead of ``--kernel``): the multi-row integer-dot kernel (ops/quant/affine_idot_rows.py)
for those rows of x, its grid of row tile / warps / prefetch / programs per SM, against ``mn.quantized_matmul``'s
default route, its route with the integer-dot kernels off (the tensor-core ``mmv.py``) and the default route's
one-row time (the target: within 1.3x of it); this sets ``IDOT_ROWS_MAX`` and the tile. Shapes with K not a
multiple of 1024 are skipped.

    python bench/affine_mv_sweep.py [--out FILE.json] [--quick] [--kernel mv|idot|q4k_idot|q4k_mv|none]
        [--shapes KxN,...] [--rows M1,M2,...]
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
from quant import affine_bytes, affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats, q4k_mv  # noqa: E402
from mlx_native.ops.ggml.q4k_idot import Q4kIdotLaunch  # noqa: E402
from mlx_native.ops.quant.affine_idot import AffineIdotLaunch  # noqa: E402
from mlx_native.ops.quant.affine_idot_rows import AffineIdotRowsLaunch  # noqa: E402
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


def idot_launcher(n, k, bn, warps, prefetch, pps):
    """(``f(x, w, s, b)``, split) of the integer-dot kernel in one configuration, or None if it does not fit."""
    if k // 8 < 128 * warps:
        return None
    plan = AffineIdotLaunch(n, k, GS, DT, torch.device("cuda"), bn=bn, warps=warps, programs_per_sm=pps,
                            prefetch=bool(prefetch))
    return plan, plan.split


IDOT_GRID = [(bn, w, pf, 1) for bn in (4, 8, 16) for w in (1, 2) for pf in (0, 1)]  # (BN, warps, prefetch, pps)
IDOT_GRID += [(4, 2, 1, 3), (8, 1, 0, 3), (8, 2, 0, 3), (16, 1, 0, 3), (16, 4, 1, 1), (8, 4, 0, 1)]
IDOT_GRID += [(2, 2, 0, 1), (2, 4, 0, 1), (4, 4, 0, 1), (4, 4, 1, 1), (4, 2, 0, 2), (4, 2, 1, 2), (2, 2, 1, 1)]


# (BN, warps, prefetch, pps) of the Q4_K integer-dot kernel; 1-warp steps are 8 super-blocks (K = 14336: 7 steps),
# 2-warp ones 16 (K = 4096: one step, so prefetch only reloads it and runs only with a K split)
Q4K_IDOT_GRID = [(bn, w, pf, 1) for bn in (2, 4, 8, 16) for w in (1, 2) for pf in (0, 1)]
Q4K_IDOT_GRID += [(4, 1, 0, 2), (8, 1, 0, 2), (8, 2, 0, 2), (8, 1, 1, 2), (16, 1, 0, 2)]
Q4K_MV_GRID = [(bn, pps) for bn in (8, 16) for pps in (1, 2)]  # (BN, pps) of q4k_mv


def q4k_idot_launcher(n, k, bn, warps, prefetch, pps):
    """(``f(x, raw)``, split) of the Q4_K integer-dot kernel in one configuration, or None if it does not fit."""
    if k // 256 < 8 * warps:  # under one step (a partial last step follows the whole ones)
        return None
    plan = Q4kIdotLaunch(n, k, DT, torch.device("cuda"), bn=bn, warps=warps, programs_per_sm=pps,
                         prefetch=bool(prefetch))
    return plan, plan.split


def q4k_mv_launcher(n, k, bn, pps):
    """(``f(x, raw)``, split) of q4k_mv with ``bn`` rows per program and K split up to ``pps`` programs per SM."""
    saved = q4k_mv.Q4K_BN, q4k_mv.PROGRAMS_PER_SM
    q4k_mv.Q4K_BN, q4k_mv.PROGRAMS_PER_SM = bn, pps
    try:
        plan = q4k_mv.Q4kMvLaunch(n, k, DT, torch.device("cuda"))
    finally:
        q4k_mv.Q4K_BN, q4k_mv.PROGRAMS_PER_SM = saved
    return plan, plan.split


def ptx_counts(plan, *args):
    """Counts in the PTX of ``plan``'s kernel after one call: dp2a, shared-memory accesses and barriers (a layout
    conversion in the loop would show here), global loads."""
    plan(*args)
    ptx = next(iter(plan.launch.compiled.values())).asm["ptx"]
    return {op: ptx.count(op) for op in ("dp2a", "prmt", "ld.shared", "st.shared", "bar.sync", "ld.global")}


def idot_code_check(k, n):
    """Counts in the PTX of the default integer-dot plan at ``k x n``: dp2a (expect 4 per word of a thread),
    shared-memory accesses and barriers (a layout conversion in the loop would show here)."""
    w, s, b = affine_weight(n, k, GS)
    counts = ptx_counts(AffineIdotLaunch(n, k, GS, DT, torch.device("cuda")),
                        torch.randn(1, k, device="cuda", dtype=DT), w.view(torch.int32), s, b)
    print(f"PTX of the integer-dot kernel at K{k} N{n}: {counts}", flush=True)
    return counts


def rows_code_check(m, k, n):
    """As :func:`idot_code_check` for the default multi-row plan with ``m`` rows of x (dp2a: 4 per word of a thread
    and row of x; ld.shared / bar.sync in the loop would be a layout conversion)."""
    w, s, b = affine_weight(n, k, GS)
    counts = ptx_counts(AffineIdotRowsLaunch(m, n, k, GS, DT, k, torch.device("cuda")),
                        torch.randn(m, k, device="cuda", dtype=DT), w.view(torch.int32), s, b)
    print(f"PTX of the multi-row integer-dot kernel, M{m} K{k} N{n}: {counts}", flush=True)
    return counts


def q4k_idot_code_check(k, n):
    """As :func:`idot_code_check` for the default Q4_K integer-dot plan (dp2a: 32 per chunk and row of a thread)."""
    counts = ptx_counts(Q4kIdotLaunch(n, k, DT, torch.device("cuda")), torch.randn(1, k, device="cuda", dtype=DT),
                        gguf_raw("Q4_K", n, k))
    print(f"PTX of the Q4_K integer-dot kernel at K{k} N{n}: {counts}", flush=True)
    return counts


# (BN, warps, prefetch, pps) of the multi-row integer-dot kernel (16-row tiles spill from 3 rows of x, offline SASS)
ROWS_GRID = [(bn, w, pf, 1) for bn in (4, 8, 16) for w in (1, 2) for pf in (0, 1)]
ROWS_GRID += [(4, 2, 0, 2), (8, 2, 0, 2), (8, 1, 0, 2)]


def time_variant(label, build, sets, ref, scale):
    """``(us, relative error, split)`` of the launch ``build()`` makes (``(fn, split)``, or None: skipped), or None
    after printing why it could not be built or run."""
    try:
        made = build()
        if made is None:
            return None
        f, split = made
        err = (f(*sets[0]).float() - ref).abs().max().item() / scale
        return common.time_graph(f, sets, 20), err, split
    except Exception as exc:  # noqa: BLE001 - report and go on
        print(f"  {label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return None


def rows_launcher(m, n, k, bn, warps, prefetch, pps):
    """(``f(x, w, s, b)``, split) of the multi-row integer-dot kernel for ``m`` contiguous rows of x in one
    configuration, or None if the shape does not fit it."""
    if (k // 8) % (128 * warps):
        return None
    plan = AffineIdotRowsLaunch(m, n, k, GS, DT, k, torch.device("cuda"), bn=bn, warps=warps, programs_per_sm=pps,
                                prefetch=bool(prefetch))
    return plan, plan.split


def rows_sweep(shapes, ms, copy, quick, rows):
    """``--rows``: per shape, the default route at one row, then per ``m`` the routes and the kernel's grid;
    appends result dicts to ``rows``."""
    default_settings = env.settings
    grid = [g for g in ROWS_GRID if g[3] == 1 and not g[2]] if quick else ROWS_GRID
    for k, n in shapes:
        if k % 1024:
            print(f"K{k} N{n}: K not a multiple of 1024, skipped", flush=True)
            continue
        wbytes = affine_bytes(n, k, GS)
        nsets = max(2, min(16, -(-120_000_000 // wbytes)))
        weights = [affine_weight(n, k, GS) for _ in range(nsets)]
        w64 = mn.dequantize(*weights[0], GS, 4).double()

        def base(x, w, s, b):
            return mn.quantized_matmul(x, w.view(torch.uint32), s, b, transpose=True, group_size=GS, bits=4)
        env.settings = default_settings
        plans.clear_all()
        t_one = common.time_graph(base, [(torch.randn(1, k, device="cuda", dtype=DT), w.view(torch.int32), s, b)
                                         for w, s, b in weights], 20)
        rows.append(dict(k=k, n=n, m=1, impl="quantized_matmul (default route)", us=t_one, weight_bytes=wbytes))
        print(f"K{k:6d} N{n:7d} M 1 default route {t_one:8.2f} us ({wbytes / t_one * 1e6 / copy * 100:5.1f}% copy)",
              flush=True)
        for m in ms:
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), w.view(torch.int32), s, b) for w, s, b in weights]
            ref = (sets[0][0].double() @ w64.T).float()
            scale = ref.abs().max().item()
            times = {}
            for label, overrides in (("quantized_matmul, MLX_NATIVE_AFFINE_IDOT=0 (mmv)", dict(affine_idot=False)),
                                     ("quantized_matmul (default route)", {})):
                env.settings = dataclasses.replace(default_settings, **overrides)
                plans.clear_all()
                t = times[label] = common.time_graph(base, sets, 20)
                err = (base(*sets[0]).float() - ref).abs().max().item() / scale
                rows.append(dict(k=k, n=n, m=m, impl=label, us=t, weight_bytes=wbytes, rel_err=err))
                print(f"K{k:6d} N{n:7d} M{m:2d} {label:50s} {t:8.2f} us ({t / t_one:5.2f}x M=1, err {err:.1e})",
                      flush=True)
            env.settings = default_settings
            plans.clear_all()
            t_mmv, t_route = times.values()
            best = None
            for bn, warps, pf, pps in grid:
                cfg = dict(kernel="affine_idot_rows", bn=bn, warps=warps, prefetch=pf, pps=pps)
                label = " ".join(f"{key}={val}" for key, val in cfg.items() if key != "kernel")
                timed = time_variant(label, lambda: rows_launcher(m, n, k, bn, warps, pf, pps), sets, ref, scale)
                if timed is None:
                    continue
                t, err, split = timed
                rows.append(dict(cfg, k=k, n=n, m=m, impl=cfg["kernel"], split=split, us=t, rel_err=err,
                                 weight_bytes=wbytes))
                if best is None or t < best[0]:
                    best = (t, label, split)
                print(f"  {label:40s} split{split:3d}  {t:8.2f} us  {t / t_one:5.2f}x M=1  x{t_mmv / t:5.2f} mmv  "
                      f"err {err:.1e}", flush=True)
            if best:
                t = best[0]
                print(f"BEST K{k} N{n} M{m}: {t:.2f} us ({t / t_one:.2f}x the one-row route, {t_mmv / t:.2f}x mmv, "
                      f"default route {t_route / t:.2f}x this) {best[1]} split{best[2]}", flush=True)
            del sets
        del weights, w64
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", help="K x N pairs to run, e.g. 14336x4096,4096x4096 (default: all)")
    ap.add_argument("--kernel", choices=("mv", "idot", "q4k_idot", "q4k_mv", "none"), default="mv",
                    help="which kernel's grid to sweep (q4k_*: on GGUF Q4_K weights; none: only the affine routes "
                         "and cuBLAS)")
    ap.add_argument("--rows", help="rows of x for the multi-row integer-dot kernel, e.g. 2,3,4,8 (instead of "
                                   "--kernel)")
    ap.add_argument("--grid", help="--rows, --kernel idot / q4k_idot: the (BN, warps, prefetch, programs per SM) sets "
                                   "to run instead of the built-in grid, e.g. 4,2,0,1;8,4,0,1")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    if args.kernel.startswith("q4k"):
        shapes = [(k, n) for k, n in shapes if k % 256 == 0]  # whole Q4_K super-blocks
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    copy = common.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.3f} TB/s", flush=True)
    rows = []
    grid = [tuple(int(v) for v in g.split(",")) for g in args.grid.split(";")] if args.grid else None
    if args.rows:
        if grid:
            ROWS_GRID[:] = grid
        ms = [int(v) for v in args.rows.split(",")]
        for m in ms:
            rows_code_check(m, 4096, 14336)
        rows_sweep(shapes, ms, copy, args.quick, rows)
        if args.out:
            common.save_json(args.out, dict(copy_bandwidth=copy, rows=rows))
        return 0
    if grid:
        IDOT_GRID[:] = Q4K_IDOT_GRID[:] = grid
    if args.kernel == "idot":
        idot_code_check(4096, 14336)
        variants = [(dict(kernel="affine_idot", bn=bn, warps=w, prefetch=pf, pps=pps),
                     lambda n, k, bn=bn, w=w, pf=pf, pps=pps: idot_launcher(n, k, bn, w, pf, pps))
                    for bn, w, pf, pps in IDOT_GRID]
    elif args.kernel == "q4k_idot":
        q4k_idot_code_check(4096, 14336)
        grid = [g for g in Q4K_IDOT_GRID if g[3] == 1 and not g[2]] if args.quick else Q4K_IDOT_GRID
        variants = [(dict(kernel="q4k_idot", bn=bn, warps=w, prefetch=pf, pps=pps),
                     lambda n, k, bn=bn, w=w, pf=pf, pps=pps: q4k_idot_launcher(n, k, bn, w, pf, pps))
                    for bn, w, pf, pps in grid]
    elif args.kernel == "q4k_mv":
        variants = [(dict(kernel="q4k_mv", bn=bn, pps=pps), lambda n, k, bn=bn, pps=pps: q4k_mv_launcher(n, k, bn, pps))
                    for bn, pps in Q4K_MV_GRID]
    elif args.kernel == "none":
        variants = []
    else:
        grid = list(itertools.product((8, 16, 32), (64, 128, 256), (1,), (4,), (1, 2, 4)))
        grid += [(16, 128, 0, 4, p) for p in (1, 2, 4)]
        grid += list(itertools.product((8, 16, 32), (64, 128, 256), (1,), (8,), (2,)))
        if args.quick:
            grid = [g for g in grid if g[1] == 128 and g[3] == 4 and g[2] == 1 and g[4] == 2] + [(16, 64, 1, 4, 2)]
        variants = [(dict(kernel="affine_mv", bn=bn, wps=wps, prefetch=pf, warps=w, pps=pps),
                     lambda n, k, bn=bn, wps=wps, pf=pf, w=w, pps=pps: launcher(n, k, bn, wps, pf, w, pps, sms))
                    for bn, wps, pf, w, pps in grid]
    gguf = args.kernel.startswith("q4k")
    if gguf:
        routes = [("ggml_matmul, MLX_NATIVE_GGUF_MV=0 (word-level)", dict(gguf_mv=False)),
                  ("ggml_matmul, MLX_NATIVE_GGML_IDOT=0 (q4k_mv)", dict(gguf_mv=True, ggml_idot=False)),
                  ("ggml_matmul (default route)", dict(gguf_mv=True, ggml_idot=True))]
    else:
        routes = [("quantized_matmul, MLX_NATIVE_AFFINE_MV=0 (mmv / word-level)", dict(affine_mv=False)),
                  ("quantized_matmul, MLX_NATIVE_AFFINE_IDOT=0 (affine_mv)", dict(affine_mv=True, affine_idot=False)),
                  ("quantized_matmul (default route)", dict(affine_mv=True, affine_idot=True))]
    default_settings = env.settings
    for k, n in shapes:
        wbytes = n * formats.row_bytes(formats.BY_NAME["Q4_K"], k) if gguf else affine_bytes(n, k, GS)
        nsets = max(2, min(16, -(-120_000_000 // wbytes)))
        sets = []
        for _ in range(nsets):
            x = torch.randn(1, k, device="cuda", dtype=DT)
            if gguf:
                sets.append((x, gguf_raw("Q4_K", n, k)))
            else:
                w, s, b = affine_weight(n, k, GS)
                sets.append((x, w.view(torch.int32), s, b))
        if gguf:
            w64 = mn.ggml_dequantize(sets[0][1], "Q4_K", (n, k)).double()
        else:
            w64 = mn.dequantize(sets[0][1].view(torch.uint32), sets[0][2], sets[0][3], GS, 4).double()
        ref = (w64 @ sets[0][0][0].double()).float()
        del w64
        scale = ref.abs().max().item()

        def base(x, w, *sb):
            if gguf:
                return mn.ggml_matmul(x, w, "Q4_K", (n, k))
            return mn.quantized_matmul(x, w.view(torch.uint32), *sb, transpose=True, group_size=GS, bits=4)
        times = {}
        for label, overrides in routes:
            env.settings = dataclasses.replace(default_settings, **overrides)
            plans.clear_all()
            t = times[label] = common.time_graph(base, sets, 20)
            err = (base(*sets[0]).float()[0] - ref).abs().max().item() / scale
            rows.append(dict(k=k, n=n, impl=label, us=t, weight_bytes=wbytes, rel_err=err))
            print(f"K{k:6d} N{n:7d} {label:60s} {t:8.2f} us ({wbytes / t * 1e6 / copy * 100:5.1f}% copy, "
                  f"err {err:.1e})", flush=True)
        env.settings = default_settings
        plans.clear_all()
        t_base, t_off, t_route = (times[label] for label, _ in routes)
        dense = [(x, torch.randn(n, k, device="cuda", dtype=DT)) for x, *_ in sets[:max(2, min(nsets, 4))]]
        t_cublas = common.time_graph(lambda x, wd: x @ wd.T, dense, 20)
        rows.append(dict(k=k, n=n, impl="cuBLAS bf16", us=t_cublas, weight_bytes=2 * n * k))
        print(f"K{k:6d} N{n:7d} cuBLAS bf16 {t_cublas:8.2f} us", flush=True)
        del dense
        best = None
        for cfg, make in variants:
            label = " ".join(f"{key}={val}" for key, val in cfg.items() if key != "kernel")
            timed = time_variant(label, lambda: make(n, k), sets, ref, scale)
            if timed is None:
                continue
            t, err, split = timed
            rows.append(dict(cfg, k=k, n=n, impl=cfg["kernel"], split=split, us=t, rel_err=err, weight_bytes=wbytes))
            if best is None or t < best[0]:
                best = (t, label, split)
            print(f"  {label:40s} split{split:3d}  {t:8.2f} us  {wbytes / t * 1e6 / copy * 100:5.1f}% copy  "
                  f"x{t_base / t:5.2f}  err {err:.1e}", flush=True)
        if best:
            t = best[0]
            print(f"BEST K{k} N{n}: {t:.2f} us ({wbytes / t * 1e6 / copy * 100:.1f}% copy, "
                  f"{t_base / t:.2f}x {'word-level' if gguf else 'mmv'} route, {t_cublas / t:.2f}x cuBLAS, integer-dot "
                  f"off {t_off / t:.2f}x this, default route {t_route / t:.2f}x this) {best[1]} split{best[2]}",
                  flush=True)
        del sets
        torch.cuda.empty_cache()
    if args.out:
        common.save_json(args.out, dict(copy_bandwidth=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
