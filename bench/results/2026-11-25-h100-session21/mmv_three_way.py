"""Next session's A/B of the branches mmv-wavefronts and mmv-wavefronts-packed against main, one process.

Set up (from the repo root, on branch mmv-wavefronts-packed as the working tree):
    git archive main src | tar -x -C /tmp/a && cp -r /tmp/a/src/mlx_native snap/mlx_native_main
    git archive mmv-wavefronts src | tar -x -C /tmp/b && cp -r /tmp/b/src/mlx_native snap/mlx_native_wf
Rows: GGUF Q4_K on the default route (the tensor-core kernel at 3-16 rows), Q4_0 / Q4_1 with MLX_NATIVE_MMV=on
and the streamed multi-row kernels off in every tree, main's default Q4_0 route beside them, MLX g64 as a
control; graph replay, 4 rotating weight sets, 4 interleaved rounds, best of each; outputs against main's."""
import dataclasses
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as packed
import mlx_native_main as main
import mlx_native_wf as wf
from quant import gguf_raw

DT = torch.bfloat16
TREES = {"packed": packed, "wf": wf, "main": main}


def mmv_on(on):
    for pkg in TREES.values():
        pkg.runtime.env.reload_settings()
        if on:
            pkg.runtime.env.settings = dataclasses.replace(pkg.runtime.env.settings, mmv="on", gguf_mv=False)
        pkg.runtime.plans.clear_all()


def row(label, sets, call):
    fns = {name: (lambda *a, pkg=pkg: call(pkg, *a)) for name, pkg in TREES.items()}
    ref = fns["main"](*sets[0]).float()
    diff = max(((f(*sets[0]).float() - ref).abs().max() / ref.abs().max()).item() for f in fns.values())
    best = common.time_graph_rounds(fns, sets, 4)
    print(f"{label}: " + ", ".join(f"{k} {v:.2f}" for k, v in best.items())
          + f" us; main/wf {best['main'] / best['wf']:.3f}, main/packed {best['main'] / best['packed']:.3f}, "
          f"max rel diff {diff:.2e}", flush=True)


for k, n in [(4096, 14336), (14336, 4096), (4096, 4096)]:
    for fmt, rows_, forced in (("Q4_K", (3, 8, 16), False), ("Q4_0", (4, 8, 16), True), ("Q4_1", (8, 16), True)):
        for m in rows_:
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), gguf_raw(fmt, n, k)) for _ in range(4)]
            mmv_on(forced)
            row(f"{fmt} K{k} N{n} M{m}{' (mmv on)' if forced else ''}", sets,
                lambda pkg, x, raw: pkg.ggml_matmul(x, raw, fmt, (n, k)))
            if forced:
                mmv_on(False)
                t = common.time_graph_rounds({"default": lambda x, raw: main.ggml_matmul(x, raw, fmt, (n, k))}, sets, 4)
                print(f"{fmt} K{k} N{n} M{m}: main's default route {t['default']:.2f} us", flush=True)
    mmv_on(False)
    sets = []
    for _ in range(4):
        w = torch.randn(n, k, device="cuda", dtype=DT) * 0.02
        sets.append((torch.randn(8, k, device="cuda", dtype=DT), *main.quantize(w, 64, 4)))
    row(f"MLX g64 K{k} N{n} M8 (control)", sets, lambda pkg, x, w, s, b: pkg.quantized_matmul(x, w, s, b))
