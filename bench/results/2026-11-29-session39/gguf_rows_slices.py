"""GGUF Q6_K / Q8_0 / Q5_K matmuls of 5-16 rows of x (the tiled decode kernel today): against the same rows as
slices of at most 4 rows (each slice one launch of the streamed 2-4-row kernels) and against dequantize + cuBLAS
bf16 (the route from 17 rows). CUDA-graph replay, weights rotating past L2; us. Run 9: after the change, "now" is
the sliced route where ``ggml/kernel.SLICED_ROWS`` takes the rows.

    python gguf_rows_slices.py [M1,M2,...]
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
from quant import gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats  # noqa: E402

DT = torch.bfloat16
MS = tuple(int(v) for v in sys.argv[1].split(",")) if len(sys.argv) > 1 else (5, 8, 12, 16)  # rows of x
for fmt in ("Q6_K", "Q8_0", "Q5_K"):
    for k, n in ((4096, 14336), (14336, 4096), (4096, 4096)):
        wbytes = n * formats.row_bytes(formats.BY_NAME[fmt], k)
        raws = [gguf_raw(fmt, n, k) for _ in range(max(2, min(8, math.ceil(256e6 / wbytes))))]

        def whole(x, raw):
            return mn.ggml_matmul(x, raw, fmt, (n, k))

        def slices(x, raw):
            return torch.cat([mn.ggml_matmul(x[i:i + 4], raw, fmt, (n, k)) for i in range(0, x.shape[0], 4)])

        def cublas(x, raw):
            return x @ mn.ggml_dequantize(raw, fmt, (n, k), dtype=DT).T

        t1 = common.time_graph(whole, [(torch.randn(1, k, device="cuda", dtype=DT), r) for r in raws])
        for m in MS:
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), r) for r in raws]
            ref = whole(*sets[0]).float()
            err = (slices(*sets[0]).float() - ref).abs().max().item() / ref.abs().max().item()
            tw, ts, tc = (common.time_graph(f, sets) for f in (whole, slices, cublas))
            print(f"{fmt} K{k:<6d} N{n:<6d} M{m:<3d} now {tw:7.2f} us  4-row slices {ts:7.2f}  dequantize + cuBLAS "
                  f"{tc:7.2f}  (one row {t1:6.2f}; slices vs now err {err:.1e})", flush=True)
