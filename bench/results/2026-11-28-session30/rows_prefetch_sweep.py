"""Session 30: where the 2-4-row integer-dot kernels' register prefetch pays (``affine_idot_rows`` for MLX g64,
``q4k_idot_rows`` for Q4_K; branch pinned-rows, prefetch taken at the next step's top). Each shape at 2 and 4 rows,
prefetch forced off and on (the modules' ``PREFETCH_BELOW_ROWS_PER_SM`` of run 2's tree; the rules it led to have
other names), two alternated rounds, best kept.

    python bench/results/2026-11-28-session30/rows_prefetch_sweep.py OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import mmv_sweep  # noqa: E402
from quant import decode_call  # noqa: E402

from mlx_native.ops.ggml import q4k_idot_rows  # noqa: E402
from mlx_native.ops.quant import affine_idot_rows  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

AFFINE = [(4096, 512), (4096, 1024), (4096, 2048), (4096, 4096), (4096, 6144), (2048, 2048), (2048, 8192),
          (14336, 1024), (14336, 2048)]
Q4K = AFFINE + [(4096, 8192), (4096, 11008), (4096, 14336), (14336, 4096)]

if __name__ == "__main__":
    rows = []
    for fmt, shapes in (("affine", AFFINE), ("Q4_K", Q4K)):
        for (k, n) in shapes:
            _, fn, make = decode_call(fmt, n, k)
            ws = [make() for _ in range(4)]
            for m in (2, 4):
                sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), *w) for w in ws]
                best = {}
                for below in (0, 10**6, 0, 10**6):
                    affine_idot_rows.PREFETCH_BELOW_ROWS_PER_SM = q4k_idot_rows.PREFETCH_BELOW_ROWS_PER_SM = below
                    plans.clear_all()
                    t = mmv_sweep._time(fn, sets)
                    best[below > 0] = min(best.get(below > 0, 1e9), t)
                rows.append(dict(fmt=fmt, m=m, k=k, n=n, off=best[False], on=best[True]))
                print(f"{fmt:6s} M{m} K{k:<6d} N{n:<6d} off {best[False]:7.2f} on {best[True]:7.2f} us "
                      f"on/off {best[True] / best[False]:.3f}", flush=True)
            del ws
            torch.cuda.empty_cache()
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
