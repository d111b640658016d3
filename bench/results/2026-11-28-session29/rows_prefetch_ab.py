"""Session 29, prepared for the next GPU session (branch pinned-rows, not run): the 2-row integer-dot kernels
(``quant/affine_idot_rows.py``, ``ggml/q4k_idot_rows.py``) with their register prefetch taken at the top of the next
step (``kernels.loads.pinned``; MLX scales as int32 words), prefetch forced on against off, on the shapes those
kernels take at 2 rows (MLX g64 below 2^25 weights, Q4_K everywhere). Run on the branch and on main for the A/B.

    python bench/results/2026-11-28-session29/rows_prefetch_ab.py OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
import mmv_sweep  # noqa: E402
from quant import affine_bytes, affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats, q4k_idot_rows  # noqa: E402
from mlx_native.ops.quant import affine_idot_rows  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

CASES = [("affine", 4096, 4096), ("affine", 2048, 8192), ("affine", 4096, 1024), ("Q4_K", 4096, 4096),
         ("Q4_K", 4096, 14336), ("Q4_K", 14336, 4096)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = []
    for fmt, k, n in CASES:
        if fmt == "affine":
            wbytes, fn = affine_bytes(n, k), (lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b))
            make = lambda: affine_weight(n, k)  # noqa: E731
        else:
            wbytes = n * formats.row_bytes(formats.BY_NAME[fmt], k)
            fn = lambda x, raw, n=n, k=k: mn.ggml_matmul(x, raw, "Q4_K", (n, k))  # noqa: E731
            make = lambda n=n, k=k: (gguf_raw("Q4_K", n, k),)  # noqa: E731
        sets = [(torch.randn(2, k, device="cuda", dtype=torch.bfloat16), *make())
                for _ in range(max(2, min(8, int(256e6 // wbytes))))]
        want = None
        for below in (0, 10**6, 0, 10**6):
            affine_idot_rows.PREFETCH_BELOW_ROWS_PER_SM = q4k_idot_rows.PREFETCH_BELOW_ROWS_PER_SM = below
            plans.clear_all()
            t = mmv_sweep._time(fn, sets)
            out = fn(*sets[0]).float()
            want = out if want is None else want
            err = ((out - want).abs().max() / want.abs().max()).item()
            rows.append(dict(fmt=fmt, k=k, n=n, prefetch=below > 0, us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw))
            print(f"{fmt:6s} K{k:<6d} N{n:<6d} M2 prefetch={below > 0!s:5s} {t:8.2f} us"
                  f"{'  MISMATCH ' + str(err) if err > 1e-2 else ''}", flush=True)
        torch.cuda.empty_cache()
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
