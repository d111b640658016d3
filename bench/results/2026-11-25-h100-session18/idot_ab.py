"""A/B: the integer-dot MLX 4-bit mat-vec of session 8 (5988351) against HEAD, same run, CUDA-graph replay,
4 rotating weight sets (no L2 reuse)."""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, "bench")
import torch
import common
import mlx_native as mn
import mlx_native_s8 as old
from mlx_native.ops.quant import kernel as qk_new
from mlx_native_s8.ops.quant import kernel as qk_old

DT = torch.bfloat16
for k, n in [(int(a), int(b)) for a, b in (s.split("x") for s in (sys.argv[1] if len(sys.argv) > 1 else "14336x4096,4096x14336,4096x4096").split(","))]:
    sets = []
    for _ in range(4):
        w = torch.randn(n, k, device="cuda", dtype=DT) * 0.02
        q = mn.quantize(w, 64, 4)
        sets.append((torch.randn(1, k, device="cuda", dtype=DT), *q))
    f_new = lambda x, w, s, b: mn.quantized_matmul(x, w, s, b)
    f_old = lambda x, w, s, b: old.quantized_matmul(x, w, s, b)
    a = f_new(*sets[0]); b_ = f_old(*sets[0])
    print(k, n, "max diff", (a.float() - b_.float()).abs().max().item(), flush=True)
    for rnd in range(2):
        t_new = common.time_graph(f_new, sets)
        t_old = common.time_graph(f_old, sets)
        print(f"K{k} N{n} round {rnd}: HEAD {t_new:.2f} us, session-8 {t_old:.2f} us", flush=True)
    for mod, name in ((qk_new, "HEAD"), (qk_old, "s8")):
        pass
