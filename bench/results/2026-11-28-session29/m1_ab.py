"""Session 29 (branch idot-prefetch-words): one row of x, the default route of MLX g64 / Q4_0 / Q4_K on the issue's
shapes and 11008 x 4096, us and % of copy; run once per package (PYTHONPATH), alternated: the register prefetch
loops of affine_idot / q4_idot / q4k_idot with their tiles taken at the top of the next step.

    python bench/results/2026-11-28-session29/m1_ab.py OUT.json
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
from mlx_native.ops.ggml import formats  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096), (11008, 4096)]

if __name__ == "__main__":
    copy_bw = common.copy_bandwidth()
    rows = []
    for fmt in ("affine", "Q4_0", "Q4_K"):
        for k, n in SHAPES:
            if fmt == "affine":
                wbytes, fn = affine_bytes(n, k), (lambda x, wq, s, b: mn.quantized_matmul(x, wq, s, b))
                make = lambda: affine_weight(n, k)  # noqa: E731
            else:
                wbytes = n * formats.row_bytes(formats.BY_NAME[fmt], k)
                fn = lambda x, raw, fmt=fmt, n=n, k=k: mn.ggml_matmul(x, raw, fmt, (n, k))  # noqa: E731
                make = lambda fmt=fmt, n=n, k=k: (gguf_raw(fmt, n, k),)  # noqa: E731
            sets = [(torch.randn(1, k, device="cuda", dtype=torch.bfloat16), *make())
                    for _ in range(max(2, min(8, int(256e6 // wbytes))))]
            plans.clear_all()
            t = mmv_sweep._time(fn, sets)
            rows.append(dict(fmt=fmt, k=k, n=n, us=t, frac_copy=wbytes / (t * 1e-6) / copy_bw))
            print(f"{fmt:6s} K{k:<6d} N{n:<6d} {t:8.2f} us {100 * rows[-1]['frac_copy']:5.1f}% copy", flush=True)
            torch.cuda.empty_cache()
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
