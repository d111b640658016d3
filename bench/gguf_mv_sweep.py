"""The streamed GGUF mat-vecs (ops/ggml/q4k_mv.py for Q4_K / Q5_K, q4_mv.py for Q4_0 / Q4_1, q8_mv.py for Q8_0,
q6k_mv.py for Q6_K; one row of Q4_K / Q5_K: the integer-dot q4k_idot.py, of Q4_0 / Q4_1: q4_idot.py) against the
word-level kernel they replace (``MLX_NATIVE_GGUF_MV=0``) on Llama-3-8B's shapes, one row of bf16 x, CUDA-graph
replay, weights rotating through >= 120 MB; plus each kernel's launch knobs (the module constants of :data:`GRIDS`,
every combination).

    python bench/gguf_mv_sweep.py [--out FILE.json] [--types Q4_K,Q4_0,Q4_1,Q5_K,Q8_0,Q6_K] [--shapes 4096x14336,...]
                                  [--rows 1,2,3,4] [--grid KNOB=V,V;...] [--row-grid KNOB=V,V;...]

Q4_0 / Q4_1 / Q5_K / Q6_K one-row knobs are the integer-dot kernels' (``q4_idot.py``, ``q4k_idot.py``,
``q6k_idot.py``: Q6_K matrices under its ``MIN_VALUES`` weights run ``q6k_mv.py`` whatever the knobs);
``MLX_NATIVE_GGML_IDOT=0`` times the fp32 streamed kernels they replaced. ``--rows``: rows of x; from 2 the multi-row
variants (``q4k_idot_rows.py`` for Q4_K / Q5_K, ``q6k_idot.py``'s ``MR`` rows for Q6_K, the ``MR`` rows of
``q4_mv.py``, ``q8_mv.py``; ``MLX_NATIVE_GGML_IDOT=0``: Q5_K's ``MR`` rows of ``q4k_mv.py``, Q6_K's of
``q6k_mv.py``) and their knobs (:data:`ROW_GRIDS`), against the route with the streamed kernels off
(``MLX_NATIVE_GGUF_MV=0``).
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
from mlx_native.ops.ggml import formats, q4_idot, q4_mv, q4k_idot, q4k_idot_rows, q4k_mv, q6k_idot, q8_mv  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [(4096, 4096), (4096, 1024), (4096, 14336), (14336, 4096), (4096, 128256)]  # (K, N)
_Q4 = (q4_idot, dict(Q4I_BN=(4, 8, 16), Q4I_WPL=(2, 4), Q4I_MAX_WARPS=(2, 4, 8)))
GRIDS = {  # type -> (module, {constant: values})
    "Q4_K": (q4k_mv, dict(Q4K_BN=(8, 16), PROGRAMS_PER_SM=(1, 2))),
    "Q4_0": _Q4, "Q4_1": _Q4,
    "Q5_K": (q4k_idot, dict(IDOT_BN=(4, 8), PREFETCH_MIN_STEPS=(4, 64))),
    "Q8_0": (q8_mv, dict(Q8_BN=(8, 16), PROGRAMS_PER_SM=(1, 2), Q8_FENCE=(True, False), Q8_WPL=(1, 2))),
    "Q6_K": (q6k_idot, dict(IDOT_BN=(16, 32), IDOT_SMALL_BN=(8, 16), PROGRAMS_PER_SM=(8, 16))),
}
ROW_GRIDS = {  # type -> (module, {constant: values}) of the multi-row variants
    "Q4_K": (q4k_idot_rows, dict(IDOT_ROWS_BN=(4, 8), PROGRAMS_PER_SM=(1, 2))),
    "Q4_0": (q4_mv, dict()), "Q4_1": (q4_mv, dict()),
    "Q6_K": (q6k_idot, dict(ROWS_BN=(8, 16), ROWS_PROGRAMS_PER_SM=(4, 8))),
    "Q8_0": (q8_mv, dict(Q8_BN=(4, 8))),
    "Q5_K": (q4k_idot_rows, dict(IDOT_ROWS_BN=(4, 8), IDOT_ROWS_SMALL_BN=(4, 8))),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--types", default="Q4_K,Q4_0,Q4_1")
    ap.add_argument("--shapes", default="", help="KxN,KxN,... (default: SHAPES)")
    ap.add_argument("--rows", default="1", help="rows of x, comma-separated")
    ap.add_argument("--grid", help="one-row knobs instead of GRIDS' for every type run, e.g. "
                                   "'Q4I_BN=4,8;Q4I_MAX_WARPS=2,8'")
    ap.add_argument("--row-grid", help="multi-row knobs instead of ROW_GRIDS', e.g. 'ROWS_BN=16;ROWS_PROGRAMS_PER_SM=4'")
    args = ap.parse_args()
    for text, grids in ((args.grid, GRIDS), (args.row_grid, ROW_GRIDS)):
        if text:
            knobs = {c: tuple(int(v) for v in vals.split(",")) for c, vals in (g.split("=") for g in text.split(";"))}
            for name in args.types.split(","):
                grids[name] = (grids[name][0], knobs)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    copy = common.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.3f} TB/s", flush=True)
    rows = []
    for name, m in itertools.product(args.types.split(","), [int(v) for v in args.rows.split(",")]):
        mod, grid = GRIDS[name] if m == 1 else ROW_GRIDS[name]
        default = {c: getattr(mod, c) for c in grid}
        for k, n in shapes:
            nbytes = n * formats.row_bytes(formats.BY_NAME[name], k)
            raws = [gguf_raw(name, n, k) for _ in range(max(2, min(16, 120_000_000 // nbytes)))]
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), r) for r in raws]
            ref = sets[0][0].double() @ mn.ggml_dequantize(raws[0], name, (n, k)).double().T
            scale = ref.abs().max().item()

            def call(x, raw, name=name, n=n, k=k):
                return mn.ggml_matmul(x, raw, name, (n, k))

            def timed(label, sets, **extra):
                plans.clear_all()
                err = (call(*sets[0]).double() - ref).abs().max().item() / scale
                t = common.time_graph(call, sets, 20)
                rows.append(dict(type=name, k=k, n=n, m=m, variant=label, us=t, rel_err=err, weight_bytes=nbytes,
                                 **extra))
                print(f"{name} M{m} K{k:6d} N{n:7d} {label:56s} {t:8.2f} us {nbytes / t * 1e6 / copy * 100:5.1f}% copy "
                      f"err {err:.1e}", flush=True)
                return t

            env.settings = dataclasses.replace(env.settings, gguf_mv=False)
            t_old = timed("streamed kernels off (MLX_NATIVE_GGUF_MV=0)", sets)
            env.settings = dataclasses.replace(env.settings, gguf_mv=True, ggml_idot=False)
            if name in ("Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K"):
                timed("integer-dot kernels off (MLX_NATIVE_GGML_IDOT=0)", sets)
            env.settings = dataclasses.replace(env.settings, ggml_idot=True)
            for values in itertools.product(*grid.values()):
                knobs = dict(zip(grid, values))
                for c, v in knobs.items():
                    setattr(mod, c, v)
                tag = " (default)" if knobs == default else ""
                try:
                    t = timed("streamed " + " ".join(f"{c}={v}" for c, v in knobs.items()) + tag, sets, **knobs)
                except Exception as exc:  # noqa: BLE001
                    print(f"{name} K{k} N{n} {knobs}: {exc!r}"[:300], flush=True)
                    continue
                print(f"    x{t_old / t:.2f} the route without the streamed kernels", flush=True)
            for c, v in default.items():
                setattr(mod, c, v)
            del sets, raws
            torch.cuda.empty_cache()
    plans.clear_all()
    if args.out:
        common.save_json(args.out, dict(copy_bandwidth=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
