"""EXPERIMENT (branch xq-experiment, timing only): the one-row MLX integer-dot mat-vec with x's quantization
removed from its loop (int16 pairs, scale and sum loaded as if a launch before had quantized x once:
``affine_idot.XQ_EXPERIMENT``) against the kernel as it is; graph replay, L2 rotated. Results of the XQ variant
are wrong by construction.

    python3 xq_mv.py    (repo root, PYTHONPATH=src)"""
import sys

import torch

sys.path.insert(0, "bench")
from common import copy_bandwidth, time_graph_rounds  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import affine_idot  # noqa: E402

dev, bf = "cuda", torch.bfloat16

if __name__ == "__main__":
    bw = copy_bandwidth()
    print(torch.cuda.get_device_name(), f"copy {bw / 1e12:.3f} TB/s", flush=True)
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (28672, 4096)):
        ws = []
        for _ in range(4):
            w, s, b = mn.quantize(torch.randn(n, k, dtype=bf, device=dev) * 0.02, 64, 4)
            ws.append((w.view(torch.int32), s, b))
        x = torch.randn(1, k, dtype=bf, device=dev)
        plans = {}
        for flag in (False, True):
            affine_idot.XQ_EXPERIMENT = flag
            plans[flag] = affine_idot.AffineIdotLaunch(n, k, 64, bf, dev)
        t = time_graph_rounds({f: (lambda w, p=p: p(x, *w)) for f, p in plans.items()}, [(w,) for w in ws], 3)
        nbytes = sum(v.numel() * v.element_size() for v in ws[0])
        print(f"MLX M1 {n}x{k}: x quantized in the loop {t[False]:.2f} us ({nbytes / t[False] / 1e6 / bw * 1e12:.1%} of copy),"
              f" pre-quantized {t[True]:.2f} us ({nbytes / t[True] / 1e6 / bw * 1e12:.1%}), {t[False] / t[True]:.3f}x",
              flush=True)
