"""17-1024 rows of x on 4-bit weights: the tensor-core decode kernel (``ops/quant/mmv.py``, x tiles of the rows padded
to a power of two) against the general tiled kernel (``qmm_kernel``), chunked dequantize + cuBLAS and bf16 cuBLAS.
(Session 32 runs 6-7 also timed fused prefill tiles, ``quant/affine_mm.py`` of commit 6e4ea25, with this script as of
that commit; a copy of the kernel is in bench/results/2026-11-28-session32/affine_mm.py.)

    python bench/mid_rows_sweep.py [--formats affine,Q4_K,Q4_0] [--rows 17,24,32,48,64] [--routes chunked,mmv]
                                   [--out FILE.json]

For each format (``affine``: MLX g64 4-bit, ``affineB``: B bits; GGUF type names), K x N of Llama-3-8B's projections
and rows of x: the default route, chunked dequantize + cuBLAS from 17 rows (``qmm.PREFILL_CUBLAS_MIN_M``; the
mid-rows mmv route off), the mmv kernel up to 128 rows with 64-feature tiles of 4 warps and with 128-feature tiles
of 8 warps, and the bf16 cuBLAS matmul of the same shape; CUDA-graph replay, weights
rotated past L2; each output checked against the first route's. ``--routes`` keeps the routes whose names start with
one of its words (``chunked``, ``mmv``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import affine_bytes, affine_weight, decode_call  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import mmv, qmm  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096)]
FORMATS = {"affine": mmv.AFFINE.value, "Q4_0": mmv.Q4_0.value, "Q4_1": mmv.Q4_1.value, "Q4_K": mmv.Q4_K.value}
MMV_ROWS = [(mmv, "MID_ROWS_MAX", dict.fromkeys(FORMATS.values(), 128)), (qmm, "PREFILL_CUBLAS_MIN_M", 129)]
# knob sets (module, name, value) of each route after the first
ROUTES = {
    "chunked dequantize + cuBLAS": lambda fmt: [(qmm, "PREFILL_CUBLAS_MIN_M", 17), (mmv, "MID_ROWS_MAX", {})],
    "mmv bn64 w4": lambda fmt: MMV_ROWS + [(mmv, "MID_WIDE", {})],
    "mmv bn128 w8": lambda fmt: MMV_ROWS + [(mmv, "MID_WIDE", {FORMATS[fmt]: (2, 128)})],
}


def _call(fmt: str, n: int, k: int):
    """:func:`quant.decode_call`, with ``affineB`` for MLX g64 weights of B bits."""
    if fmt.startswith("affine") and fmt != "affine":
        bits = int(fmt[len("affine"):])
        return (affine_bytes(n, k, bits=bits), lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b, bits=bits),
                lambda: affine_weight(n, k, bits=bits))
    return decode_call(fmt, n, k)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="affine,Q4_K,Q4_0")
    ap.add_argument("--rows", default="17,24,32,48,64")
    ap.add_argument("--routes", default="chunked,mmv")
    ap.add_argument("--out")
    args = ap.parse_args()
    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows = []
    routes = {name: knobs for name, knobs in ROUTES.items() if name.startswith(tuple(args.routes.split(",")))}
    for fmt, (k, n), m in itertools.product(args.formats.split(","), SHAPES, [int(r) for r in args.rows.split(",")]):
        wbytes, fn, make = _call(fmt, n, k)
        sets = [(torch.randn(m, k, device="cuda", dtype=DT), *make())
                for _ in range(max(2, min(8, math.ceil(256e6 / wbytes))))]

        def measure(label):
            plans.clear_all()
            t = common.time_any(fn, sets)
            out = fn(*sets[0])
            row = dict(fmt=fmt, k=k, n=n, m=m, label=label, us=t, tflops=2 * m * n * k / (t * 1e-6) / 1e12)
            rows.append(row)
            print(f"{fmt:6s} K{k:<6d} N{n:<6d} M{m:<3d} {label:30s} {t:8.2f} us {row['tflops']:6.1f} TFLOP/s",
                  flush=True)
            return out

        want = measure("default route")
        for label, knobs_of in routes.items():
            knobs = knobs_of(fmt)
            if knobs is None:
                continue
            saved = [(mod, name, getattr(mod, name)) for mod, name, _ in knobs]
            for mod, name, value in knobs:
                setattr(mod, name, value)
            try:
                got = measure(label)
                err = common.rel_err(got, want)
                rows[-1]["rel_err_vs_previous"] = err
                if err > 2e-2:
                    print(f"  MISMATCH rel err {err:.3e}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"{fmt} K{k} N{n} M{m} {label}: {exc!r}"[:400], flush=True)
            for mod, name, value in saved:
                setattr(mod, name, value)
        t = common.time_any(lambda x, w: x @ w.T, [(s[0], torch.randn(n, k, device="cuda", dtype=DT)) for s in sets[:4]])
        rows.append(dict(fmt=fmt, k=k, n=n, m=m, label="cuBLAS bf16", us=t, tflops=2 * m * n * k / (t * 1e-6) / 1e12))
        print(f"{fmt:6s} K{k:<6d} N{n:<6d} M{m:<3d} {'cuBLAS bf16':30s} {t:8.2f} us", flush=True)
        torch.cuda.empty_cache()
    if args.out:
        json.dump(dict(copy_bandwidth_Bps=copy_bw, rows=rows), open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
