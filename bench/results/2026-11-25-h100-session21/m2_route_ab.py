"""A/B for branch mmv-m2-large (run it from that branch, main's package as snap/mlx_native_main): MLX g64 at 2 rows
of x, the tensor-core kernel (branch, from N x K >= 2**25) against the integer-dot rows kernel (main), and 1 / 3
rows of both trees for the 1.3x-of-one-row target; graph replay, 4 rotating weight sets, 4 interleaved rounds."""
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as mn
import mlx_native_main as old

DT = torch.bfloat16
for k, n in [(4096, 14336), (14336, 4096), (4096, 8192), (8192, 4096), (4096, 4096), (2048, 16384)]:
    for m in (1, 2, 3):
        sets = []
        for _ in range(4):
            w = torch.randn(n, k, device="cuda", dtype=DT) * 0.02
            sets.append((torch.randn(m, k, device="cuda", dtype=DT), *mn.quantize(w, 64, 4)))
        fns = {"new": lambda x, w, s, b: mn.quantized_matmul(x, w, s, b),
               "main": lambda x, w, s, b: old.quantized_matmul(x, w, s, b)}
        a, b_ = (f(*sets[0]).float() for f in fns.values())
        rel = ((a - b_).abs().max() / b_.abs().max()).item()
        best = common.time_graph_rounds(fns, sets, 4)
        print(f"MLX g64 K{k} N{n} M{m}: new {best['new']:.2f}, main {best['main']:.2f} us; "
              f"main/new {best['main'] / best['new']:.3f}, rel diff {rel:.2e}", flush=True)
