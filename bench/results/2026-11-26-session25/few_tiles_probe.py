"""GGUF one-row mat-vecs of matrices with fewer row tiles than SMs: the word-level kernel they take now
(``q4_mv.MIN_TILES_PER_SM`` / ``q8_mv.MIN_TILES_PER_SM`` = 1) against the streamed / integer-dot kernels (0), CUDA-graph
replay, bf16 x, weights rotating through >= 120 MB; two alternated rounds.

    python3 few_tiles_probe.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, "bench")
import common  # noqa: E402
from quant import gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats, q4_mv, q8_mv  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

SHAPES = [(4096, 1024), (4096, 512), (2048, 512), (8192, 1024), (3072, 1024), (1536, 576), (2048, 256), (4096, 2048)]
copy = common.copy_bandwidth()
print(f"copy bandwidth {copy / 1e12:.3f} TB/s", flush=True)
for name in ("Q4_0", "Q4_1", "Q8_0"):
    for k, n in SHAPES:
        nbytes = n * formats.row_bytes(formats.BY_NAME[name], k)
        sets = [(torch.randn(1, k, device="cuda", dtype=torch.bfloat16), gguf_raw(name, n, k))
                for _ in range(max(2, min(64, 120_000_000 // nbytes)))]
        call = lambda x, raw, name=name, n=n, k=k: mn.ggml_matmul(x, raw, name, (n, k))  # noqa: E731
        ref = None
        best = {}
        for _ in range(2):
            for few in (1, 0):
                q4_mv.MIN_TILES_PER_SM = q8_mv.MIN_TILES_PER_SM = few
                plans.clear_all()
                out = call(*sets[0]).float()
                ref = out if ref is None else ref
                err = ((out - ref).abs().max() / ref.abs().max()).item()
                t = common.time_graph(call, sets, 20)
                best[few] = min(best.get(few, 1e9), t)
        q4_mv.MIN_TILES_PER_SM = q8_mv.MIN_TILES_PER_SM = 1
        print(f"{name} K{k:5d} N{n:5d} {nbytes / 1e6:6.2f} MB  now {best[1]:6.2f} us  streamed {best[0]:6.2f} us "
              f"({nbytes / best[0] * 1e6 / copy * 100:4.1f}% copy)  x{best[1] / best[0]:.2f}  diff {err:.1e}", flush=True)
