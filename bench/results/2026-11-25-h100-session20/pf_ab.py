"""A/B: packed mmv with MLX scales/biases prefetched a step ahead (this tree) against main (snap/mlx_native_main),
same run, CUDA-graph replay, 4 rotating weight sets (no L2 reuse). Also Q4_K packed rows as a control
(unchanged by the branch)."""
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as mn
import mlx_native_main as old

DT = torch.bfloat16
shapes = [(4096, 14336), (14336, 4096), (4096, 4096)]
rows = [2, 3, 4, 8, 16]
for k, n in shapes:
    for m in rows:
        sets = []
        for _ in range(4):
            w = torch.randn(n, k, device="cuda", dtype=DT) * 0.02
            q = mn.quantize(w, 64, 4)
            sets.append((torch.randn(m, k, device="cuda", dtype=DT), *q))
        f_new = lambda x, w, s, b: mn.quantized_matmul(x, w, s, b)
        f_old = lambda x, w, s, b: old.quantized_matmul(x, w, s, b)
        a = f_new(*sets[0]); b_ = f_old(*sets[0])
        diff = (a.float() - b_.float()).abs().max().item()
        res = []
        for rnd in range(3):
            res.append((common.time_graph(f_new, sets), common.time_graph(f_old, sets)))
        tn = min(r[0] for r in res); to = min(r[1] for r in res)
        print(f"MLX g64 K{k} N{n} M{m}: branch {tn:.2f} us, main {to:.2f} us, ratio {to/tn:.3f}, max diff {diff:.3g}", flush=True)
