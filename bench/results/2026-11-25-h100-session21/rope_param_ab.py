"""A/B: rope kernel with its parameters ordered by use (this tree) against main (snap/mlx_native_main) and
torch.compile, decode rows of the rope bench, graph replay, 32 rotating sets, 4 interleaved rounds, best of each."""
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as mn
import mlx_native_main as old
from peers import compiled, cos_sin, torch_head_norm_rope, torch_rope

D, DT, S, BASE = "cuda", torch.bfloat16, 32, 10000.0


def report(name, sets, fns):
    a, b = fns["new"](*sets[0]), fns["main"](*sets[0])
    same = all(torch.equal(p, q) for p, q in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)))
    best = common.time_graph_rounds(fns, sets, 4)
    pc = best["torch.compile"]
    print(f"{name}: new {best['new']:.3f} ({pc / best['new']:.3f}x compile), main {best['main']:.3f} "
          f"({pc / best['main']:.3f}x), torch.compile {pc:.3f}, bit-identical {same}", flush=True)


for t, h, d in [(1, 32, 128), (16, 32, 128), (4, 16, 256)]:
    sets = []
    for _ in range(S):
        pos = torch.arange(t, device=D) + 1000
        c, s = cos_sin(pos, d, BASE, DT)
        sets.append((torch.randn(t, h, d, device=D, dtype=DT), torch.randn(d, device=D, dtype=DT), pos, c, s))
    report(f"head_norm_rope T{t} H{h} D{d}", sets, {
        "new": lambda x, w, pos, c, s: mn.head_norm_rope(x, w, positions=pos, eps=1e-6, base=BASE),
        "main": lambda x, w, pos, c, s: old.head_norm_rope(x, w, positions=pos, eps=1e-6, base=BASE),
        "torch.compile": compiled(lambda x, w, pos, c, s: torch_head_norm_rope(x, w, c, s, 1e-6))})

for b, l in [(1, 1), (8, 1), (1, 16)]:
    sets = []
    for _ in range(S):
        pos = torch.arange(l, device=D) + 1000
        c, s = cos_sin(pos, 128, BASE, DT)
        sets.append((torch.randn(b, l, 32, 128, device=D, dtype=DT).transpose(1, 2),
                     torch.randn(b, l, 8, 128, device=D, dtype=DT).transpose(1, 2), c, s, pos))

    def ours(mod):
        def f(q, k, c, s, pos):
            qo, ko = mod.rope_qk(q.transpose(1, 2), k.transpose(1, 2), 128, base=BASE, positions=pos[:, None])
            return qo.transpose(1, 2), ko.transpose(1, 2)
        return f
    report(f"rope(q,k) B{b} L{l} Hq32 Hkv8 D128", sets, {
        "new": ours(mn), "main": ours(old),
        "torch.compile": compiled(lambda q, k, c, s, pos: torch_rope(q, k, c, s))})
