"""Per-launch cost of the norm handoff at Llama-3-8B decode shapes (graph replay, L2 rotated over weight sets):
consumers with NPARTS parts of sum(h^2) against the plain launch, producers against the plain launch.

    python3 handoff_parts.py    (from the repo root, PYTHONPATH=src)

Timing only: the parts are random, so consumer outputs are not checked here."""
import sys

import torch

sys.path.insert(0, "bench")
from common import time_graph_rounds  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import q4_idot, q4k_idot  # noqa: E402
from mlx_native.ops.quant import affine_idot  # noqa: E402

dev, bf = "cuda", torch.bfloat16
K = 4096
SETS = 3


def mlx_weights(n, k):
    sets = [mn.quantize(torch.randn(n, k, dtype=bf, device=dev) * 0.02, 64, 4) for _ in range(SETS)]
    return [(w.view(torch.int32), s, b) for w, s, b in sets]


def gguf_weights(name, n, k):
    import gguf
    bs, ts = gguf.GGML_QUANT_SIZES[getattr(gguf.GGMLQuantizationType, name)]
    return [(torch.randint(0, 255, (n * k // bs * ts,), dtype=torch.uint8, device=dev),) for _ in range(SETS)]


def fmt(name, n, k, role):
    """(plan, weight sets, call(plan, x, parts, *w))"""
    if name == "mlx":
        plan = affine_idot.AffineIdotLaunch(n, k, 64, bf, dev, **role)
        ws = mlx_weights(n, k)
        return plan, ws
    tid = {"Q4_K": 12, "Q4_0": 2}[name]
    plan = (q4k_idot.Q4kIdotLaunch(n, k, bf, dev, **role) if name == "Q4_K"
            else q4_idot.Q4IdotLaunch(tid, n, k, bf, dev, **role))
    return plan, gguf_weights(name, n, k)  # random bytes: timing only


def consumer_rows(name, n, glu=False):
    rows = {}
    x = torch.randn(1, K, dtype=bf, device=dev)
    for nparts in (0, 1024, 256, 32):
        role = dict(take_parts=nparts)
        if glu:
            role["act"] = 0
        plan, ws = fmt(name, n, K, role)
        parts = torch.rand(max(nparts, 1), device=dev)
        if nparts:
            fn = (lambda *w, plan=plan, parts=parts: plan.take(x, parts, 1e-5, *w, *(w if glu else ())))
        else:
            fn = (lambda *w, plan=plan: plan(x, *w, *(w if glu else ())))
        rows[f"parts {nparts}" if nparts else "plain"] = (fn, ws)
    return rows


def producer_rows(name, n, k):
    rows = {}
    x = torch.randn(1, k, dtype=bf, device=dev)
    r, nw = torch.randn(1, n, dtype=bf, device=dev), torch.rand(n, device=dev) + 0.5
    for hand in (False, True):
        plan, ws = fmt(name, n, k, dict(hand_off=hand))
        fn = ((lambda *w, plan=plan: plan.hand_off(x, *w, r, nw, 0.0)) if hand else (lambda *w, plan=plan: plan(x, *w)))
        rows["hand_off" if hand else "plain"] = (fn, ws)
    return rows


def report(title, rows):
    fns = {k: (lambda w, f=f: f(*w)) for k, (f, ws) in rows.items()}
    sets = [(w,) for w in next(iter(rows.values()))[1]]  # the first row's weight sets for all (same shapes)
    t = time_graph_rounds(fns, sets, rounds=3)
    base = t.get("plain")
    print(title + ": " + ", ".join(f"{k} {v:.2f} us" + (f" ({v / base:.3f}x)" if base and k != "plain" else "")
                                   for k, v in t.items()), flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), flush=True)
    for name in ("mlx", "Q4_K", "Q4_0"):
        report(f"{name} consumer qkv 6144x4096", consumer_rows(name, 6144))
        if name == "mlx":
            report(f"{name} consumer gate/up GLU 14336x4096", consumer_rows(name, 14336, glu=True))
        else:
            report(f"{name} consumer gate or up 14336x4096", consumer_rows(name, 14336))
        report(f"{name} producer o 4096x4096", producer_rows(name, 4096, 4096))
        report(f"{name} producer down 4096x14336", producer_rows(name, 4096, 14336))
