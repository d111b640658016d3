"""Session 29 (branch idot-prefetch-words): the one-row integer-dot MLX mat-vec (``quant/affine_idot.py``) with
its register prefetch forced on, the prefetched tiles taken at the top of the next step (``kernels.loads.pinned``)
and 16-bit scales / biases as int32 words (``PREFETCH_S_WORDS``) or not, against the default (no prefetch on these
shapes). MLX 4-bit g64, one row of bf16 x, CUDA-graph replay; outputs checked against the default.

    python bench/results/2026-11-28-session29/idot_prefetch_ab.py OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import affine_idot  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

SHAPES = [(14336, 4096), (4096, 14336), (4096, 4096), (11008, 4096), (14336, 1024), (5376, 4096)]
VARIANTS = [("default", 4, True), ("prefetch, 16-bit scales", 10**6, False), ("prefetch, scale words", 10**6, True)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = []
    for k, n in SHAPES:
        wbytes = affine_bytes(n, k)
        sets = [(torch.randn(1, k, device="cuda", dtype=torch.bfloat16), *affine_weight(n, k))
                for _ in range(max(2, min(8, int(256e6 // wbytes))))]
        fn = lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b)  # noqa: E731
        want = None
        for label, below, words in VARIANTS * 2:
            affine_idot.PREFETCH_BELOW_TILES_PER_SM, affine_idot.PREFETCH_S_WORDS = below, words
            plans.clear_all()
            t = mmv_sweep._time(fn, sets)
            out = fn(*sets[0]).float()
            want = out if want is None else want
            err = ((out - want).abs().max() / want.abs().max()).item()
            rows.append(dict(k=k, n=n, label=label, us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw, rel_err=err))
            print(f"K{k:<6d} N{n:<6d} {label:26s} {t:8.2f} us {100 * rows[-1]['frac_copy']:5.1f}% copy"
                  f"{'  MISMATCH ' + str(err) if err > 1e-2 else ''}", flush=True)
        affine_idot.PREFETCH_BELOW_TILES_PER_SM, affine_idot.PREFETCH_S_WORDS = 4, True
        torch.cuda.empty_cache()
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
