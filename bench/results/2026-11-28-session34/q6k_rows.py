"""Q6_K at 2-16 rows of x (session 34 run 9): the default route (the tiled decode kernel, now on the structured Q6_K
tile) against one-row calls repeated and dequantize + cuBLAS, 4096 x 14336 and 14336 x 4096, bf16, graph replay."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402
from quant import gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402

for k, n in ((4096, 14336), (14336, 4096)):
    raw = gguf_raw("Q6_K", n, k)
    w = mn.ggml_dequantize(raw, "Q6_K", (n, k), dtype=torch.bfloat16)
    for m in (1, 2, 4, 8, 16):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        want = x @ w.T
        got = mn.ggml_matmul(x, raw, "Q6_K", (n, k))
        err = common.rel_err(got, want)
        t = common.time_any(lambda x, r: mn.ggml_matmul(x, r, "Q6_K", (n, k)), [(x, raw)])
        t1 = common.time_any(lambda x, r: [mn.ggml_matmul(x[i:i + 1], r, "Q6_K", (n, k)) for i in range(m)], [(x, raw)])
        tc = common.time_any(lambda x, r: x @ mn.ggml_dequantize(r, "Q6_K", (n, k), dtype=torch.bfloat16).T, [(x, raw)])
        print(f"K{k} N{n} M{m:<3d} default {t:8.2f} us  one-row calls x M {t1:8.2f}  dequantize + cuBLAS {tc:8.2f}  "
              f"err {err:.1e}", flush=True)
