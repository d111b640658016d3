"""Session 29: is the packed tensor-core mat-vec (2-16 rows) slowed by unequal programs per SM? ``mmv_kernel``
(tiles x 2 K splits) on MLX g64 K = 4096 with N giving 3, 3.39 (N = 14336), 4 and 5 programs per SM of 132, and the
equal-shares kernel at N = 14336 (3-5 programs per SM); us and % of copy on weight bytes.

    python bench/results/2026-11-28-session29/balance_probe.py OUT.json
"""
import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import mmv_shares  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    env.settings = dataclasses.replace(env.settings, mmv="on", affine_idot=False, affine_mv=False)
    rows = []
    k = 4096
    for m in (2, 16):
        for n, variants in [(12672, [None]), (14336, [None, 3, 4, 5]), (16896, [None]), (21120, [None])]:
            wbytes = affine_bytes(n, k)
            sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), *affine_weight(n, k)) for _ in range(6)]
            fn = lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b)  # noqa: E731
            for per_sm in variants:
                mmv_shares.SHARES = per_sm is not None
                mmv_shares.SHARES_PER_SM = per_sm or 4
                plans.clear_all()
                t = mmv_sweep._time(fn, sets)
                row = dict(m=m, k=k, n=n, shares_per_sm=per_sm, us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw)
                rows.append(row)
                print(f"M{m:<3d} K{k} N{n:<6d} {'shares ' + str(per_sm) if per_sm else 'tiles x splits':16s} "
                      f"{t:8.2f} us {100 * row['frac_copy']:5.1f}% copy", flush=True)
            torch.cuda.empty_cache()
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
