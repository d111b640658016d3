"""A/B: tensor-core decode tiles (ops/quant/mmv.py) with x loaded in code order and permuted in registers
(this tree) against main (snap/mlx_native_main), same process, CUDA-graph replay, 4 rotating weight sets,
4 interleaved rounds, best of each. MLX g64 and GGUF Q4_K rows on the default route (mmv where it is
chosen), and Q4_0 rows with MLX_NATIVE_MMV=on (both trees) beside main's default route."""
import os
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as mn
import mlx_native_main as old
from quant import gguf_raw

DT = torch.bfloat16
SHAPES = [(4096, 14336), (14336, 4096), (4096, 4096)]


def set_mmv(mode):
    os.environ["MLX_NATIVE_MMV"] = mode
    for pkg in (mn, old):
        pkg.runtime.env.reload_settings()
        pkg.runtime.plans.clear_all()


def row(label, sets, fns):
    outs = [f(*sets[0]) for f in fns.values()]
    diff = max((o.float() - outs[0].float()).abs().max().item() for o in outs[1:])
    best = common.time_graph_rounds(fns, sets, 4)
    cells = ", ".join(f"{k} {v:.2f}" for k, v in best.items())
    print(f"{label}: {cells} us; main/new {best['main'] / best['new']:.3f}, max diff {diff:.3g}", flush=True)


set_mmv("auto")
for k, n in SHAPES:
    for m in (2, 3, 4, 8, 16):
        sets = []
        for _ in range(4):
            w = torch.randn(n, k, device="cuda", dtype=DT) * 0.02
            sets.append((torch.randn(m, k, device="cuda", dtype=DT), *mn.quantize(w, 64, 4)))
        row(f"MLX g64 K{k} N{n} M{m}", sets, {
            "new": lambda x, w, s, b: mn.quantized_matmul(x, w, s, b),
            "main": lambda x, w, s, b: old.quantized_matmul(x, w, s, b)})
for fmt, rows_ in (("Q4_K", (3, 4, 8, 16)), ("Q4_0", (3, 4, 8, 16))):
    for k, n in SHAPES:
        for m in rows_:
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), gguf_raw(fmt, n, k)) for _ in range(4)]
            fns = {"new": lambda x, raw: mn.ggml_matmul(x, raw, fmt, (n, k)),
                   "main": lambda x, raw: old.ggml_matmul(x, raw, fmt, (n, k))}
            if fmt == "Q4_0":
                set_mmv("on")
                row(f"{fmt} K{k} N{n} M{m} (mmv on)", sets, fns)
                set_mmv("auto")
                best = common.time_graph_rounds({"default": fns["main"]}, sets, 4)
                print(f"{fmt} K{k} N{n} M{m}: main's default route {best['default']:.2f} us", flush=True)
            else:
                row(f"{fmt} K{k} N{n} M{m}", sets, fns)
