"""A/B: head_norm_rope at decode with at most SMALL_ROWS head rows in all, one head row per program (this tree)
against main (snap/mlx_native_main: one program for all of them) and torch.compile; graph replay, 32 rotating
sets, 4 interleaved rounds, best of each. The last rows have more head rows (same config in both trees)."""
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as mn
import mlx_native_main as old
from peers import compiled, cos_sin, torch_head_norm_rope

D, DT, S, BASE = "cuda", torch.bfloat16, 32, 10000.0
for t, h, d in [(1, 8, 256), (1, 4, 256), (1, 8, 128), (2, 4, 128), (1, 1, 128), (1, 32, 128), (4, 16, 256)]:
    sets = []
    for _ in range(S):
        pos = torch.arange(t, device=D) + 1000
        c, s = cos_sin(pos, d, BASE, DT)
        sets.append((torch.randn(t, h, d, device=D, dtype=DT), torch.randn(d, device=D, dtype=DT), pos, c, s))
    fns = {"new": lambda x, w, pos, c, s: mn.head_norm_rope(x, w, positions=pos, eps=1e-6, base=BASE),
           "main": lambda x, w, pos, c, s: old.head_norm_rope(x, w, positions=pos, eps=1e-6, base=BASE),
           "torch.compile": compiled(lambda x, w, pos, c, s: torch_head_norm_rope(x, w, c, s, 1e-6))}
    same = torch.equal(fns["new"](*sets[0]), fns["main"](*sets[0]))
    best = common.time_graph_rounds(fns, sets, 4)
    pc = best["torch.compile"]
    print(f"head_norm_rope T{t} H{h} D{d}: new {best['new']:.3f} ({pc / best['new']:.3f}x compile), main "
          f"{best['main']:.3f} ({pc / best['main']:.3f}x), torch.compile {pc:.3f}, bit-identical {same}", flush=True)
