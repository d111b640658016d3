"""Decode head_norm_rope / rope_qk: the small launch config (ops/rope/kernel.py SMALL_ROWS head rows per program,
SMALL_ELEMS_PER_THREAD elements per thread) swept again after the parameter reorder, against torch.compile in the
same rounds (graph replay, 32 rotating sets, 4 interleaved rounds, best of each)."""
import sys
sys.path.insert(0, "bench")
import torch
import common
import mlx_native as mn
from mlx_native.ops.rope import kernel as rk
from mlx_native.runtime import plans
from peers import compiled, cos_sin, torch_head_norm_rope

D, DT, S, BASE = "cuda", torch.bfloat16, 32, 10000.0
CONFIGS = [(8, 8), (4, 8), (2, 8), (8, 16), (4, 4), (16, 8), (8, 4), (1, 8)]


class Configured:
    """Sets the small config and drops the cached plans when the variant changes (time_graph's eager warm-up
    builds the plan before capture)."""
    current = None

    def __init__(self, rows, per_thread):
        self.cfg = (rows, per_thread)

    def __call__(self, x, w, pos, c, s):
        if Configured.current != self.cfg:
            rk.SMALL_ROWS, rk.SMALL_ELEMS_PER_THREAD = Configured.current = self.cfg
            plans.clear_all()
        return mn.head_norm_rope(x, w, positions=pos, eps=1e-6, base=BASE)


for t, h, d in [(4, 16, 256), (1, 32, 128), (16, 32, 128), (1, 8, 256), (4, 8, 128)]:
    sets = []
    for _ in range(S):
        pos = torch.arange(t, device=D) + 1000
        c, s = cos_sin(pos, d, BASE, DT)
        sets.append((torch.randn(t, h, d, device=D, dtype=DT), torch.randn(d, device=D, dtype=DT), pos, c, s))
    fns = {f"rows{r} ept{e}": Configured(r, e) for r, e in CONFIGS}
    fns["torch.compile"] = compiled(lambda x, w, pos, c, s: torch_head_norm_rope(x, w, c, s, 1e-6))
    best = common.time_graph_rounds(fns, sets, 4)
    pc = best.pop("torch.compile")
    cells = ", ".join(f"{k} {v:.3f} ({pc / v:.3f}x)" for k, v in sorted(best.items(), key=lambda kv: kv[1]))
    print(f"head_norm_rope T{t} H{h} D{d}: torch.compile {pc:.3f} us; {cells}", flush=True)
rk.SMALL_ROWS, rk.SMALL_ELEMS_PER_THREAD = CONFIGS[0]
