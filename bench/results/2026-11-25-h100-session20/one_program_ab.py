"""A/B: norm kernel with ONE_PROGRAM (row offsets known at compile time when the grid is one program) against
main (snap/mlx_native_main) and torch.compile, graph replay, 32 rotating sets, 4 interleaved rounds, best of each."""
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as mn
import mlx_native_main as old
from peers import compiled, torch_rms_norm, torch_add_rms_norm

D, DT, S = "cuda", torch.bfloat16, 32
for rows, n in [(1, 576), (1, 4096), (4, 2048), (16, 4096), (16, 8192)]:
    xs = [torch.randn(rows, n, device=D, dtype=DT) for _ in range(S)]
    rs = [torch.randn(rows, n, device=D, dtype=DT) for _ in range(S)]
    ws = [torch.randn(n, device=D, dtype=DT) for _ in range(S)]
    for op, sets, fns in (
        ("rms_norm", list(zip(xs, ws)), {"new": lambda x, w: mn.rms_norm(x, w, 1e-6),
                                         "main": lambda x, w: old.rms_norm(x, w, 1e-6),
                                         "torch.compile": compiled(lambda x, w: torch_rms_norm(x, w, 1e-6))}),
        ("add_rms_norm", list(zip(xs, rs, ws)), {"new": lambda x, r, w: mn.add_rms_norm(x, r, w, 1e-6),
                                                 "main": lambda x, r, w: old.add_rms_norm(x, r, w, 1e-6),
                                                 "torch.compile": compiled(lambda x, r, w: torch_add_rms_norm(x, r, w, 1e-6))})):
        a, b = fns["new"](*sets[0]), fns["main"](*sets[0])
        same = all(torch.equal(p, q) for p, q in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)))
        best = common.time_graph_rounds(fns, sets, 4)
        pc = best["torch.compile"]
        print(f"{op} {rows}x{n}: new {best['new']:.3f} ({pc / best['new']:.3f}x compile), main {best['main']:.3f} "
              f"({pc / best['main']:.3f}x), torch.compile {pc:.3f}, bit-identical {same}", flush=True)
