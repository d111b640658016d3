"""A/B: GGUF Q4_0 / Q4_1 rows on the tensor-core decode kernel with packed tiles (this tree, forced: mmv on,
streamed multi-row kernels off) against main's default route (snap/mlx_native_main: q4_mv's multi-row kernel at
2-4 rows, the general qmm kernel from 5), same process, CUDA-graph replay, 4 rotating weight sets, 4 interleaved
rounds, best of each; max |diff| relative to the output's max."""
import dataclasses
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as mn
import mlx_native_main as old
from quant import gguf_raw

DT = torch.bfloat16
mn.runtime.env.settings = dataclasses.replace(mn.runtime.env.settings, mmv="on", gguf_mv=False)
for fmt in ("Q4_0", "Q4_1"):
    for k, n in [(4096, 14336), (14336, 4096), (4096, 4096)]:
        for m in (2, 3, 4, 5, 8, 16):
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), gguf_raw(fmt, n, k)) for _ in range(4)]
            fns = {"new": lambda x, raw: mn.ggml_matmul(x, raw, fmt, (n, k)),
                   "main": lambda x, raw: old.ggml_matmul(x, raw, fmt, (n, k))}
            a, b = (f(*sets[0]).float() for f in fns.values())
            rel = ((a - b).abs().max() / b.abs().max()).item()
            best = common.time_graph_rounds(fns, sets, 4)
            print(f"{fmt} K{k} N{n} M{m}: new {best['new']:.2f}, main {best['main']:.2f} us; "
                  f"main/new {best['main'] / best['new']:.3f}, rel diff {rel:.2e}", flush=True)
