"""Quantized prefill through chunked dequantization + cuBLAS (``qmm.ChunkedPrefill``): chunk sizes against cuBLAS
bf16 on the dequantized weight (developer tool).

Each row times, eagerly (CUDA events, two input sets rotated), for MLX affine 4-bit g64, Q4_0 and Q4_K:
cuBLAS ``x @ W.T`` on the bf16 weight, our default (``qmm.CHUNK_BYTES``) and smaller chunks. Session 16 run 2 also
timed the dequantization of chunk i + 1 on a side stream while chunk i multiplied (lost 0-30%: removed).

    python bench/prefill_chunk_sweep.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import DT, PREFILL, affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import qmm  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

DEFAULTS = dict(CHUNK_BYTES=qmm.CHUNK_BYTES)
VARIANTS = {  # name -> qmm settings changed from DEFAULTS
    "default": {},
    "32 MB chunks": dict(CHUNK_BYTES=32 << 20),
    "64 MB chunks": dict(CHUNK_BYTES=64 << 20),
}


def set_variant(**changes) -> None:
    for name, value in {**DEFAULTS, **changes}.items():
        setattr(qmm, name, value)
    plans.clear_all()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "prefill_chunk_sweep.json"))
    a = ap.parse_args()
    rows = []
    for m, k, n in PREFILL:
        for fmt in ("affine", "Q4_0", "Q4_K"):
            sets = []
            for _ in range(2):
                x = torch.randn(m, k, device="cuda", dtype=DT)
                w = affine_weight(n, k) if fmt == "affine" else gguf_raw(fmt, n, k)
                sets.append((x, w))
            if fmt == "affine":
                ours = lambda x, w: mn.quantized_matmul(x, *w)  # noqa: E731
                dense = [mn.dequantize(*w) for _, w in sets]
            else:
                ours = lambda x, raw, fmt=fmt: mn.ggml_matmul(x, raw, fmt, (n, k))  # noqa: E731
                dense = [mn.ggml_dequantize(raw, fmt, (n, k), dtype=DT) for _, raw in sets]
            flops = 2 * m * n * k
            t_cublas = common.time_eager(lambda x, wd: x @ wd.T, [(x, wd) for (x, _), wd in zip(sets, dense)])
            del dense
            for name, changes in VARIANTS.items():
                set_variant(**changes)
                t = common.time_eager(ours, sets)
                row = dict(m=m, k=k, n=n, fmt=fmt, impl=name, us=t, cublas_us=t_cublas, vs_cublas=t_cublas / t,
                           tflops=flops / t / 1e6)
                rows.append(row)
                print(f"M{m:<5d} K{k:<6d} N{n:<6d} {fmt:7s} {name:22s} {t:9.2f} us  {row['tflops']:6.0f} TF  "
                      f"cuBLAS {t_cublas:9.2f} us  {row['vs_cublas']:.3f}x", flush=True)
            set_variant()
            del sets
            torch.cuda.empty_cache()
    common.save_sweep(a.out, rows, lambda r: (r["m"], r["k"], r["n"], r["fmt"], r["impl"]))


if __name__ == "__main__":
    main()
