"""Session 30: the default route of the formats and rows the branch ``pinned-rows`` changes (q4_mv: Q4_0 / Q4_1 at
2-4 rows; q8_mv: Q8_0 one row; q4k_mv: Q5_K one row; affine_idot_rows / q4k_idot_rows: MLX g64 / Q4_K at 2 rows),
us and % of copy, with a checksum of the first output (seeded inputs) to compare packages. Run once per package
(PYTHONPATH), alternated.

    python bench/results/2026-11-28-session30/routes_ab.py OUT.json [FMT:M,...]

The optional second argument keeps only the cases of those formats and rows (e.g. ``Q4_1:2``; session 31).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402
from quant import decode_call  # noqa: E402

from mlx_native.runtime import plans  # noqa: E402

SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096)]
CASES = ([(f, m, k, n) for f in ("Q4_0", "Q4_1") for m in (2, 3, 4) for k, n in SHAPES]
         + [(f, 1, k, n) for f in ("Q8_0", "Q5_K") for k, n in SHAPES]
         + [("affine", 2, k, n) for k, n in ((4096, 4096), (2048, 8192), (4096, 1024), (4096, 2048), (14336, 2048))]
         + [("Q4_K", 2, k, n) for k, n in SHAPES + [(4096, 2048), (14336, 1024), (2048, 8192)]])

if __name__ == "__main__":
    if len(sys.argv) > 2:
        keep = {(f, int(m)) for f, m in (c.split(":") for c in sys.argv[2].split(","))}
        CASES = [c for c in CASES if (c[0], c[1]) in keep]
    copy_bw = common.copy_bandwidth()
    rows = []
    for fmt, m, k, n in CASES:
        torch.manual_seed(0)
        wbytes, fn, make = decode_call(fmt, n, k)
        sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), *make())
                for _ in range(max(2, min(8, int(256e6 // wbytes))))]
        plans.clear_all()
        out = fn(*sets[0]).float()
        t = mmv_sweep._time(fn, sets)
        rows.append(dict(fmt=fmt, m=m, k=k, n=n, us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw,
                         checksum=out.abs().sum().item(), finite=bool(out.isfinite().all())))
        print(f"{fmt:6s} M{m} K{k:<6d} N{n:<6d} {t:8.2f} us {100 * rows[-1]['frac_copy']:5.1f}% copy "
              f"sum {rows[-1]['checksum']:.6g}", flush=True)
        del sets
        torch.cuda.empty_cache()
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
