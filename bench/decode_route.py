"""Which decode mat-vec kernel wins where: the tensor-core kernel (ops/quant/mmv.py) against the
word-level kernel (ops/quant/gemv.py, ``MLX_NATIVE_MMV=0``) for each 4-bit format and the shapes of
real models (SmolLM2-135M: hidden 576; Llama-3-8B: hidden 4096), M = 1 and 16, CUDA-graph replay.

    python bench/decode_route.py [--out FILE.json]

The routing rule in ``mmv.prefer`` comes from these rows.
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
from quant import affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [(576, 192), (576, 576), (576, 1536), (1536, 576), (576, 49152),  # SmolLM2 (K, N)
          (4096, 1024), (4096, 4096), (4096, 14336), (14336, 4096), (4096, 128256)]  # Llama-3-8B
FORMATS = ["affine_g64", "affine_g32", "Q4_0", "Q4_1", "Q4_K"]


def _case(fmt, k, n, m, sets=3):
    out = []
    for _ in range(sets):
        x = torch.randn(m, k, device="cuda", dtype=DT)
        if fmt.startswith("affine"):
            gs = int(fmt.split("_g")[1])
            w, s, b = affine_weight(n, k, gs)
            out.append((x, w, s, b, gs))
        else:
            out.append((x, gguf_raw(fmt, n, k)))
    if fmt.startswith("affine"):
        return out, lambda x, w, s, b, gs: mn.quantized_matmul(x, w, s, b, transpose=True, group_size=gs, bits=4)
    return out, lambda x, raw: mn.ggml_matmul(x, raw, fmt, (n, k))


def _with_mmv(flag: bool, fn, sets):
    env.settings = dataclasses.replace(env.settings, mmv="on" if flag else "off")
    plans.clear_all()
    try:
        ref = fn(*sets[0])
        t = common.time_graph(fn, sets, 20)
        return (t if t is not None else common.time_eager(fn, sets, 20)), ref
    finally:
        env.settings = dataclasses.replace(env.settings, mmv="auto")
        plans.clear_all()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for fmt, (k, n), m in itertools.product(FORMATS, SHAPES, (1, 16)):
        if fmt == "Q4_K" and k % 256 or fmt == "Q4_0" and k % 64:
            continue
        sets, fn = _case(fmt, k, n, m)
        t_mmv, y_mmv = _with_mmv(True, fn, sets)
        t_word, y_word = _with_mmv(False, fn, sets)
        err = ((y_mmv.float() - y_word.float()).abs().max() / y_word.float().abs().max().clamp_min(1e-6)).item()
        if fmt.startswith("affine"):
            wbytes = n * k // 2 + 4 * n * k // int(fmt.split("_g")[1])
        else:
            wbytes = n * formats.row_bytes(formats.BY_NAME[fmt], k)
        row = dict(fmt=fmt, k=k, n=n, m=m, mmv_us=t_mmv, word_us=t_word, weight_bytes=wbytes, rel_err=err)
        rows.append(row)
        print(f"{fmt:11s} K{k:6d} N{n:7d} M{m:3d}  mmv {t_mmv:8.2f} us  word {t_word:8.2f} us  "
              f"word/mmv {t_word / t_mmv:5.2f}  mmv {wbytes / t_mmv / 1e3:6.0f} GB/s  err {err:.1e}", flush=True)
    if args.out:
        common.save_json(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
