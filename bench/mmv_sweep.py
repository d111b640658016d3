"""Sweep of the tensor-core decode kernel (ops/quant/mmv.py) against the word-level mat-vec and cuBLAS.

    python bench/mmv_sweep.py [--out FILE.json] [--quick]
    python bench/mmv_sweep.py --prescale [--formats affine,Q4_0,Q4_K] [--out FILE.json]
    python bench/mmv_sweep.py --packed [--formats affine,Q4_K] [--rows 2,4,8,16] [--out FILE.json]

Default: MLX affine 4-bit g64 weights, K x N in the issue's shapes, M in {1, 2, 8, 16}: times every
(tile, pipeline stages, programs per SM) variant in CUDA-graph replay, the previous default path
(MLX_NATIVE_MMV off: the word-level kernel at M=1, the general tensor-core kernel for 2-16), and the
bf16 cuBLAS matmul on the dequantized weight. Checks each variant's output against the previous path.

``--prescale``: the kernel forced on (``MLX_NATIVE_MMV=on``, the streamed and integer-dot rows kernels off) for M
in {1, 2, 4, 8, 16}, group scales applied after the dot of raw codes or to the tile before it
(``PRESCALE_MIN_ROWS``), by tile and stages; the default route of the same call in the same run; outputs checked
against the default route.

``--packed``: forced on the same way for the given rows, packed tiles (``PACKED``) by tile, warps, codes per step
(MLX), stages and programs per SM; the default route and bf16 cuBLAS in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import mmv  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096)]
VARIANTS = [dict(MMV_BN=bn, MMV_STAGES=st, MMV_STAGES_ROWS=st, PROGRAMS_PER_SM=pp)
            for bn, st, pp in itertools.product((64, 128), (2, 3, 4), (1, 2, 4))]
PRESCALE_VARIANTS = [dict(PRESCALE_MIN_ROWS=pre, MMV_BN=bn, MMV_STAGES=st, MMV_STAGES_ROWS=st)
                     for pre, bn, st in itertools.product((1, 17), (64, 128), (2, 3))]


def _weights(n, k, count):
    out = []
    for _ in range(count):
        w = torch.randn(n, k, device="cuda", dtype=DT) * 0.02
        out.append(mn.quantize(w, 64, 4))
    return out


def _knob_sweep(copy_bw: float, formats: list[str], ms, variants_of, cublas: bool) -> list[dict]:
    """Rows of the ``--prescale`` / ``--packed`` sweeps: for each format (``affine``: MLX g64, or a GGUF type name),
    shape and rows of x, the default route, then the kernel forced on (``MLX_NATIVE_MMV=on``, the streamed one-row
    and integer-dot rows kernels off) with each knob set of ``variants_of(fmt)``, outputs checked against the
    default route; with ``cublas`` the bf16 cuBLAS matmul of the same shape (weights rotating like ours)."""
    from quant import decode_call  # noqa: E402

    from mlx_native.ops.ggml import q4k_idot_rows

    rows = []
    defaults = {name: getattr(mmv, name) for fmt in formats for var in variants_of(fmt) for name in var}
    base = env.settings
    for fmt, (k, n), m in itertools.product(formats, SHAPES, ms):
        wbytes, fn, make = decode_call(fmt, n, k)
        sets = [(torch.randn(m, k, device="cuda", dtype=DT), *make())
                for _ in range(max(2, min(8, math.ceil(256e6 / wbytes))))]

        def measure(label, **extra):
            plans.clear_all()
            t = common.time_any(fn, sets)
            out = fn(*sets[0])
            row = dict(fmt=fmt, k=k, n=n, m=m, label=label, us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw, **extra)
            rows.append(row)
            print(f"{fmt:6s} K{k:<6d} N{n:<6d} M{m:<3d} {label:78s} {t:8.2f} us {100 * row['frac_copy']:5.1f}% copy",
                  flush=True)
            return out

        env.settings = base
        want = measure("default route")
        env.settings = dataclasses.replace(base, mmv="on", affine_idot=False, affine_mv=False, gguf_mv=False)
        rows_max, q4k_idot_rows.IDOT_ROWS_MAX = q4k_idot_rows.IDOT_ROWS_MAX, 1
        for var in variants_of(fmt):
            for name, value in var.items():
                setattr(mmv, name, value)
            try:
                got = measure("mmv " + " ".join(f"{a}={b}" for a, b in var.items()), **var)
            except Exception as exc:  # noqa: BLE001
                print(f"{fmt} K{k} N{n} M{m} {var}: {exc!r}"[:400], flush=True)
                continue
            err = common.rel_err(got, want)
            rows[-1]["rel_err_vs_default"] = err
            if err > 2e-2:
                print(f"  MISMATCH rel err {err:.3e}", flush=True)
        for name, value in defaults.items():
            setattr(mmv, name, value)
        env.settings, q4k_idot_rows.IDOT_ROWS_MAX = base, rows_max
        if cublas:
            t = common.time_any(lambda x, w: x @ w.T, [(s[0], torch.randn(n, k, device="cuda", dtype=DT)) for s in sets[:4]])
            rows.append(dict(fmt=fmt, k=k, n=n, m=m, label="cuBLAS bf16", us=t,
                             frac_copy=wbytes / (t * 1e-6) / copy_bw))
            print(f"{fmt:6s} K{k:<6d} N{n:<6d} M{m:<3d} {'cuBLAS bf16':78s} {t:8.2f} us", flush=True)
        torch.cuda.empty_cache()
    return rows


PACKED_KNOBS = ("PACKED", "MMV_BN_ROWS", "MMV_WARPS_ROWS", "MMV_STEP_ROWS", "MMV_STAGES_ROWS", "PROGRAMS_PER_SM")
PACKED_VARIANTS = [dict(zip(PACKED_KNOBS, v)) for v in (
    (True, 64, 4, 128, 3, 2), (True, 64, 4, 128, 2, 2), (True, 64, 4, 128, 4, 2), (True, 64, 4, 128, 3, 1),
    (True, 64, 4, 128, 3, 4), (True, 64, 4, 256, 3, 2), (True, 64, 4, 256, 2, 2), (True, 64, 8, 128, 3, 2),
    (True, 32, 2, 128, 3, 2), (True, 128, 8, 128, 3, 2), (True, 128, 4, 128, 3, 2))]
Q4K_KNOBS = ("MMV_BN_ROWS", "MMV_WARPS_ROWS", "MMV_STAGES_ROWS", "PROGRAMS_PER_SM")
Q4K_VARIANTS = [dict(zip(Q4K_KNOBS, v)) for v in (
    (64, 4, 3, 2), (64, 4, 2, 2), (64, 4, 4, 2), (64, 4, 3, 1), (64, 4, 3, 4), (64, 8, 3, 2), (32, 2, 3, 2),
    (128, 8, 3, 2))]


Q41_KNOBS = ("Q41_WIDE", "MMV_BN_ROWS", "MMV_WARPS_ROWS", "MMV_STAGES_ROWS", "PROGRAMS_PER_SM")
Q41_VARIANTS = [dict(zip(Q41_KNOBS, v)) for v in (
    (True, 64, 4, 3, 2), (False, 64, 4, 3, 2), (True, 64, 4, 3, 1), (True, 64, 4, 4, 2), (True, 128, 8, 3, 2))]


def _packed_variants(fmt: str) -> list[dict]:
    """``--packed`` knob sets: tile, warps, codes per step (MLX), stages and programs per SM around the defaults
    (session 21, after x tiles were loaded in code order; sessions 19-20 swept ``PACKED`` off and on); Q4_1 also
    its 8-block steps off (session 28)."""
    return PACKED_VARIANTS if fmt == "affine" else Q41_VARIANTS if fmt == "Q4_1" else Q4K_VARIANTS


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true", help="only the default variant")
    ap.add_argument("--prescale", action="store_true", help="the prescaled-tile sweep (module docstring)")
    ap.add_argument("--formats", default="affine,Q4_0,Q4_K", help="--prescale / --packed: affine and/or GGUF types")
    ap.add_argument("--packed", action="store_true", help="the packed tiles' sweep (module docstring)")
    ap.add_argument("--rows", default="2,4,8,16", help="--packed: rows of x")
    args = ap.parse_args()
    copy_bw = common.copy_bandwidth()
    if args.packed:
        print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
        rows = _knob_sweep(copy_bw, args.formats.split(","), [int(r) for r in args.rows.split(",")], _packed_variants,
                           True)
        if args.out:
            json.dump(dict(copy_bandwidth_Bps=copy_bw, rows=rows), open(args.out, "w"), indent=1)
        return 0
    if args.prescale:
        print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
        rows = _knob_sweep(copy_bw, args.formats.split(","), (1, 2, 4, 8, 16), lambda fmt: PRESCALE_VARIANTS, False)
        if args.out:
            json.dump(dict(copy_bandwidth_Bps=copy_bw, rows=rows), open(args.out, "w"), indent=1)
        return 0
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows = []
    defaults = {name: getattr(mmv, name) for name in VARIANTS[0]}
    for (k, n), m in itertools.product(SHAPES, (1, 2, 8, 16)):
        variants = [defaults] if args.quick or m in (2, 8) else VARIANTS
        wbytes = n * k // 2 + 2 * 2 * n * (k // 64)
        count = max(2, min(12, math.ceil(256e6 / wbytes)))
        ws = _weights(n, k, count)
        sets = [(torch.randn(m, k, device="cuda", dtype=DT), *w) for w in ws]
        fn = lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b)  # noqa: E731

        def measure(label, sets=sets, **extra):
            plans.clear_all()
            t = common.time_any(fn, sets)
            out = fn(*sets[0])
            row = dict(k=k, n=n, m=m, label=label, us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw, **extra)
            rows.append(row)
            print(f"K{k:<6d} N{n:<6d} M{m:<3d} {label:48s} {t:8.2f} us {100 * row['frac_copy']:5.1f}% copy",
                  flush=True)
            return out

        env.settings = dataclasses.replace(env.settings, mmv="off")
        want = measure("previous path (MLX_NATIVE_MMV=0)")
        env.settings = dataclasses.replace(env.settings, mmv="auto")
        for var in variants:
            for name, value in var.items():
                setattr(mmv, name, value)
            try:
                got = measure("mmv " + " ".join(f"{a}={b}" for a, b in var.items()), **var)
            except Exception as exc:  # noqa: BLE001
                print(f"K{k} N{n} M{m} {var}: {exc!r}"[:400], flush=True)
                continue
            err = common.rel_err(got, want)
            rows[-1]["rel_err_vs_previous"] = err
            if err > 2e-2:
                print(f"  MISMATCH rel err {err:.3e}", flush=True)
        for name, value in defaults.items():
            setattr(mmv, name, value)
        wd = [mn.dequantize(*w) for w in ws[:4]]
        t = common.time_any(lambda x, w: x @ w.T, [(sets[0][0], w) for w in wd])
        rows.append(dict(k=k, n=n, m=m, label="cuBLAS bf16", us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw))
        print(f"K{k:<6d} N{n:<6d} M{m:<3d} {'cuBLAS bf16 (dequantized weight)':48s} {t:8.2f} us", flush=True)
        torch.cuda.empty_cache()
    if args.out:
        json.dump(dict(copy_bandwidth_Bps=copy_bw, rows=rows), open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
