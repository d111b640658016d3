"""One-row matmuls that take the general qmm kernel (MLX affine 3/5/6-bit, GGUF Q6_K / Q5_K / Q8_0 ...): time
the heuristic config against smaller mat-vec tiles and the 16-row tensor-core decode config, in CUDA-graph
replay, K 4096 x N 14336, bf16 x (the quant bench measured 3-bit at 2.0 ms and Q6_K at 6.5 ms).

    python scripts/slow_gemv_probe.py
"""

import os
import sys

import torch

for sub in ("bench", "tests", os.path.join("tests", "ops")):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", sub))

import common  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import qmm  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

K, N = 4096, 14336


def cases():
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.05
    for bits in (3, 5, 6):
        wq, s, b = mn.quantize(w, 64, bits)
        yield f"affine {bits}-bit g64", lambda x, wq=wq, s=s, b=b, bits=bits: mn.quantized_matmul(x, wq, s, b, True,
                                                                                                   64, bits)
    import numpy as np
    from test_ggml import valid_blocks
    for name in ("Q6_K", "Q5_K", "Q8_0"):
        raw = torch.from_numpy(valid_blocks(name, N, K, np.random.default_rng(0)).view(np.uint8).copy()).cuda()
        yield f"GGUF {name}", lambda x, raw=raw, name=name: mn.ggml_matmul(x, raw, name, (N, K))


def main():
    configs = {"heuristic": None}
    for bn, bk, warps in ((16, 256, 4), (16, 512, 4), (32, 256, 4), (8, 512, 4), (16, 128, 4), (64, 128, 4)):
        configs[f"gemv BN{bn} BK{bk} w{warps}"] = qmm.Config(1, bn, bk, 1, False, warps, 1)
    configs["decode BM16 BN64 BK128"] = qmm.Config(16, 64, 128, 1, True, 4, 1, swap=True)
    x = [torch.randn(1, K, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    for label, f in cases():
        ref = None
        for name, cfg in configs.items():
            qmm.CONFIG_OVERRIDE = (lambda kind, m, n, k, spec, cfg=cfg: cfg) if cfg is not None else None
            plans.clear_all()
            try:
                y = f(x[0]).float()
                ref = y if ref is None else ref
                err = ((y - ref).abs().max() / ref.abs().max()).item()
                t = common.time_graph(f, [(xi,) for xi in x], 10)
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"{label:20s} {name:28s} {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                continue
            print(f"{label:20s} {name:28s} {t:10.1f} us  (vs heuristic output: {err:.1e})", flush=True)
    qmm.CONFIG_OVERRIDE = None


if __name__ == "__main__":
    main()
