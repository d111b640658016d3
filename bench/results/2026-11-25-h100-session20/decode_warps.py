"""Issue 2 decode rows that sit at 0.98-0.99x torch.compile (session 20 run 3): rms_norm / add_rms_norm 1x576
and head_norm_rope T4 H16 D256. Graph-replayed us per call (32 rotating input sets) of our kernel at each warp
count, torch.compile in the same run, three interleaved rounds, best of each."""
import sys
sys.path.insert(0, "bench")
import torch
import common
import mlx_native as mn
from mlx_native.ops.norms import api as napi, kernel as nk
from mlx_native.ops.rope import api as rapi, kernel as rk
from peers import compiled, torch_rms_norm, torch_add_rms_norm, torch_head_norm_rope, cos_sin

D = "cuda"
DT = torch.bfloat16
S = 32


def norm_sets(rows, hidden, res):
    return [tuple([torch.randn(rows, hidden, device=D, dtype=DT)] + ([torch.randn(rows, hidden, device=D, dtype=DT)] if res else [])
                  + [torch.randn(hidden, device=D, dtype=DT)]) for _ in range(S)]


def hnr_sets(t, h, d):
    out = []
    for _ in range(S):
        pos = torch.arange(t, device=D) + 1000
        c, s = cos_sin(pos, d, 10000.0, DT)
        out.append((torch.randn(t, h, d, device=D, dtype=DT), torch.randn(d, device=D, dtype=DT), pos, c, s))
    return out


def set_norm_warps(w):
    nk.ELEMS_PER_THREAD = 1 << 30
    nk.DECODE_MIN_WARPS = w
    napi._RMS_PLANS.plans.clear(); napi._ADD_RMS_PLANS.plans.clear()


def set_rope_warps(per_thread):
    rk.SMALL_ELEMS_PER_THREAD = per_thread
    rapi._HEAD_NORM_ROPE_PLANS.plans.clear()


cases = {
    "rms_norm 1x576": (norm_sets(1, 576, False), lambda x, w: mn.rms_norm(x, w, 1e-6),
                       compiled(lambda x, w: torch_rms_norm(x, w, 1e-6)), set_norm_warps, (1, 2, 4, 8, 16)),
    "add_rms_norm 1x576": (norm_sets(1, 576, True), lambda x, r, w: mn.add_rms_norm(x, r, w, 1e-6),
                           compiled(lambda x, r, w: torch_add_rms_norm(x, r, w, 1e-6)), set_norm_warps, (1, 2, 4, 8, 16)),
    "rms_norm 1x4096": (norm_sets(1, 4096, False), lambda x, w: mn.rms_norm(x, w, 1e-6),
                        compiled(lambda x, w: torch_rms_norm(x, w, 1e-6)), set_norm_warps, (2, 4, 8, 16)),
    "head_norm_rope T4 H16 D256": (hnr_sets(4, 16, 256),
                                   lambda x, w, pos, c, s: mn.head_norm_rope(x, w, positions=pos, eps=1e-6, base=10000.0),
                                   compiled(lambda x, w, pos, c, s: torch_head_norm_rope(x, w, c, s, 1e-6)),
                                   set_rope_warps, (64, 32, 16, 8, 4, 2)),
}
for name, (sets, ours, peer, setter, knobs) in cases.items():
    best = {}
    for rnd in range(3):
        t = common.time_graph(peer, sets)
        best["torch.compile"] = min(t, best.get("torch.compile", t))
        for k in knobs:
            setter(k)
            t = common.time_graph(ours, sets)
            best[k] = min(t, best.get(k, t))
    pc = best.pop("torch.compile")
    print(f"{name}: torch.compile {pc:.3f} us | " + ", ".join(f"{k}: {v:.3f} ({pc / v:.3f}x)" for k, v in best.items()), flush=True)
