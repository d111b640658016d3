"""Next session's A/B of branch mmv-q41-packed (packed Q4_1 tiles on the tensor-core decode kernel, routed from
mmv.Q41_MIN_ROWS rows of >= 2^25 weights) against main, one process. Run from the branch with main's package as
snap/mlx_native_main (`git archive main src | tar -x -C /tmp/a && cp -r /tmp/a/src/mlx_native snap/mlx_native_main`).
Rows: Q4_1 at 5-16 rows, the branch forced onto the kernel (MLX_NATIVE_MMV=on, streamed kernels off) and on its
default route, against main's default route; graph replay, 4 rotating weight sets, 4 interleaved rounds."""
import dataclasses
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as new
import mlx_native_main as main
from quant import gguf_raw

DT = torch.bfloat16


def forced(pkg, on):
    pkg.runtime.env.reload_settings()
    if on:
        pkg.runtime.env.settings = dataclasses.replace(pkg.runtime.env.settings, mmv="on", gguf_mv=False)
    pkg.runtime.plans.clear_all()


for k, n in [(4096, 14336), (14336, 4096), (4096, 4096), (2048, 8192)]:
    for m in (5, 6, 8, 12, 16):
        sets = [(torch.randn(m, k, device="cuda", dtype=DT), gguf_raw("Q4_1", n, k)) for _ in range(4)]
        forced(new, True)
        forced(main, False)
        fns = {"branch forced": lambda x, raw: new.ggml_matmul(x, raw, "Q4_1", (n, k)),
               "main": lambda x, raw: main.ggml_matmul(x, raw, "Q4_1", (n, k))}
        ref = fns["main"](*sets[0]).float()
        rel = ((fns["branch forced"](*sets[0]).float() - ref).abs().max() / ref.abs().max()).item()
        best = common.time_graph_rounds(fns, sets, 4)
        forced(new, False)
        best["branch default"] = common.time_graph_rounds(
            {"d": lambda x, raw: new.ggml_matmul(x, raw, "Q4_1", (n, k))}, sets, 4)["d"]
        print(f"Q4_1 K{k} N{n} M{m}: " + ", ".join(f"{kk} {v:.2f}" for kk, v in best.items())
              + f" us; main / forced {best['main'] / best['branch forced']:.3f}; rel diff {rel:.2e}", flush=True)
