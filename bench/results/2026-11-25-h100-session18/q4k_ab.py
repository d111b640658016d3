"""Q4_K integer-dot one-row mat-vec (ops/ggml/q4k_idot.py) at 14336 x 4096 (one warp per program, 7 steps) and
4096 x 14336: rows per program and register prefetch, CUDA-graph replay, rotating weights (>= 120 MB)."""
import os, sys
sys.path.insert(0, "bench")
import torch
import common
from quant import gguf_raw
import mlx_native as mn
from mlx_native.ops.ggml import q4k_idot
from mlx_native.runtime import plans

DT = torch.bfloat16
CONFIGS = [(4, 4), (2, 4), (2, 100), (4, 100), (8, 4), (1, 4)]  # (IDOT_BN, PREFETCH_MIN_STEPS)
for k, n in [(14336, 4096), (4096, 14336)]:
    sets = [(torch.randn(1, k, device="cuda", dtype=DT), gguf_raw("Q4_K", n, k)) for _ in range(4)]
    f = lambda x, raw: mn.ggml_matmul(x, raw, "Q4_K", (n, k))
    ref = None
    for rnd in range(2):
        for bn, pf in CONFIGS:
            q4k_idot.IDOT_BN, q4k_idot.PREFETCH_MIN_STEPS = bn, pf
            plans.clear_all()
            try:
                out = f(*sets[0])
            except Exception as exc:  # a configuration that does not compile
                print(f"K{k} N{n} BN {bn}: failed {type(exc).__name__} {str(exc)[:100]}", flush=True)
                continue
            if ref is None:
                ref = out
            err = (out.float() - ref.float()).abs().max().item() / ref.float().abs().max().item()
            t = common.time_graph(f, sets)
            print(f"K{k} N{n} round {rnd} BN {bn} prefetch_min_steps {pf}: {t:.2f} us (rel diff {err:.1e})", flush=True)
