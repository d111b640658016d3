"""A/B of branch decode-pdl (decode kernels as programmatic dependent launches: wait first, then let the next
launch be scheduled) against main's package (snap/mlx_native_main, from `git archive main src`) and the branch
with no early trigger (snap/mlx_native_none: a copy of src with kernels/dependent.py's EARLY_TRIGGER = False;
run 5 ran this script with the first two only), one process.
Graph replay of 4 rotating input sets (weights new to L2 each call), 6 interleaved rounds, best of each;
outputs bit-compared. Rows: one-row and multi-row quantized mat-vecs, decode-sized norms / rope / silu_mul,
and a decode MLP chain (rms_norm -> gate, up -> silu_mul -> down)."""
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import common
import mlx_native as new
import mlx_native_main as old
try:
    import mlx_native_none as none
except ImportError:
    none = None
from quant import gguf_raw

DT = torch.bfloat16
TREES = {"new": new, "main": old, **({"none": none} if none else {})}


def row(label, sets, call, mb=None):
    fns = {name: (lambda *a, pkg=pkg: call(pkg, *a)) for name, pkg in TREES.items()}
    outs = [fns[k](*sets[0]) for k in TREES]
    outs = [t[0] if isinstance(t, tuple) else t for t in outs]
    same = all(torch.equal(o, outs[0]) for o in outs)
    best = common.time_graph_rounds(fns, sets, 6)
    pct = f"; % of 3.01 TB/s " + ", ".join(f"{k} {100 * mb / v / 3.01:.1f}" for k, v in best.items()) if mb else ""
    print(f"{label}: " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()) + " us; " +
          ", ".join(f"main/{k} {best['main'] / best[k]:.3f}" for k in best if k != "main") + f"{pct}; bit-equal {same}",
          flush=True)


def mlx_sets(m, n, k):
    out = []
    for _ in range(4):
        w = torch.randn(n, k, device="cuda", dtype=DT) * 0.02
        out.append((torch.randn(m, k, device="cuda", dtype=DT), *new.quantize(w, 64, 4)))
    return out


def nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts) / 1e6


for k, n in [(4096, 14336), (14336, 4096), (4096, 4096)]:
    for m in (1, 2, 8):
        sets = mlx_sets(m, n, k)
        row(f"MLX g64 M{m} K{k} N{n}", sets, lambda pkg, x, w, s, b: pkg.quantized_matmul(x, w, s, b),
            nbytes(sets[0][1:]))
    for fmt, rows_ in (("Q4_0", (1, 2, 8)), ("Q4_K", (1, 2, 8)), ("Q6_K", (1,)), ("Q8_0", (1,))):
        for m in rows_:
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), gguf_raw(fmt, n, k)) for _ in range(4)]
            row(f"{fmt} M{m} K{k} N{n}", sets, lambda pkg, x, raw: pkg.ggml_matmul(x, raw, fmt, (n, k)),
                nbytes(sets[0][1:]))

for t, h in [(1, 576), (1, 4096), (4, 4096)]:
    w = torch.randn(h, device="cuda", dtype=DT)
    sets = [(torch.randn(t, h, device="cuda", dtype=DT), torch.randn(t, h, device="cuda", dtype=DT)) for _ in range(4)]
    row(f"rms_norm {t}x{h}", sets, lambda pkg, x, r: pkg.rms_norm(x, w, 1e-6))
    row(f"add_rms_norm {t}x{h}", sets, lambda pkg, x, r: pkg.add_rms_norm(x, r, w, 1e-6))
for t, hq, d in [(1, 8, 256), (1, 32, 128)]:
    w = torch.randn(d, device="cuda", dtype=DT)
    sets = [(torch.randn(t, hq, d, device="cuda", dtype=DT), torch.arange(t, device="cuda") + 100) for _ in range(4)]
    row(f"head_norm_rope T{t} H{hq} D{d}", sets, lambda pkg, x, p: pkg.head_norm_rope(x, w, positions=p))
sets = [(torch.randn(1, 14336, device="cuda", dtype=DT), torch.randn(1, 14336, device="cuda", dtype=DT))
        for _ in range(4)]
row("silu_mul 1x14336", sets, lambda pkg, g, u: pkg.silu_mul(g, u))

# a decode MLP: rms_norm -> gate, up (4096 -> 14336) -> silu_mul -> down (14336 -> 4096), MLX g64
for m in (1, 4):
    sets = []
    for _ in range(4):
        q = [new.quantize(torch.randn(a, b, device="cuda", dtype=DT) * 0.02, 64, 4)
             for a, b in ((14336, 4096), (14336, 4096), (4096, 14336))]
        sets.append((torch.randn(m, 4096, device="cuda", dtype=DT), *q))
    nw = torch.ones(4096, device="cuda", dtype=DT)

    def mlp(pkg, x, g, u, d):
        h = pkg.rms_norm(x, nw, 1e-6)
        a = pkg.silu_mul(pkg.quantized_matmul(h, *g), pkg.quantized_matmul(h, *u))
        return pkg.quantized_matmul(a, *d)
    row(f"decode MLP M{m} (norm, gate, up, silu_mul, down; 8B shapes)", sets, mlp,
        sum(nbytes(t) for t in sets[0][1:]))
