"""Launch-config sweeps (developer tool; results go to bench/NOTES.md).

    python bench/sweep.py

Each sweep varies module-level launch constants of one kernel module, times
ours on a few shapes (CUDA-graph replay, rotating inputs), and prints every
setting with the best one first. Plan caches are cleared between settings.
"""

from __future__ import annotations

import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.ops.activations import elementwise  # noqa: E402
from mlx_native.ops.norms import kernel as norm_kernel  # noqa: E402
from mlx_native.ops.rope import kernel as rope_kernel  # noqa: E402
from mlx_native.runtime.plans import clear_all  # noqa: E402

BF16 = torch.bfloat16


def _rand(*shape):
    return torch.randn(*shape, device="cuda", dtype=BF16)


def hnr(tokens, heads, dim):
    def make():
        return _rand(tokens, heads, dim), _rand(dim), torch.arange(tokens, device="cuda")
    return make, (lambda x, w, p: mn.head_norm_rope(x, w, positions=p)), 4 * tokens * heads * dim


def rope_qk(batch, seq, hq, hkv, dim):
    def make():
        return _rand(batch, seq, hq, dim), _rand(batch, seq, hkv, dim), torch.arange(seq, device="cuda")[:, None]
    return make, (lambda q, k, p: mn.rope_qk(q, k, dim, positions=p)), 4 * batch * seq * (hq + hkv) * dim


def silu(rows, cols):
    def make():
        return _rand(rows, cols), _rand(rows, cols)
    return make, mn.silu_mul, 6 * rows * cols


def rms(rows, cols):
    def make():
        return _rand(rows, cols), _rand(cols)
    return make, (lambda x, w: mn.rms_norm(x, w)), 4 * rows * cols


SWEEPS = [
    ("rope small problems", rope_kernel, ("SMALL_ROWS", "SMALL_NUM_WARPS"), ([2, 4, 8], [2, 4, 8]),
     {"hnr T1 H32 D128": hnr(1, 32, 128), "hnr T4 H16 D256": hnr(4, 16, 256), "hnr T16 H32 D128": hnr(16, 32, 128),
      "rope_qk B1 L1 32/8 D128": rope_qk(1, 1, 32, 8, 128), "rope_qk B8 L1 32/8 D128": rope_qk(8, 1, 32, 8, 128)}),
    ("rope large problems", rope_kernel, ("LARGE_GROUP", "ELEMS_PER_THREAD"), ([8, 16, 32], [16, 32]),
     {"hnr T8192 H32 D256": hnr(8192, 32, 256), "rope_qk B4 L4096 32/8 D128": rope_qk(4, 4096, 32, 8, 128)}),
    ("elementwise small problems", elementwise, ("MIN_TILE_ELEMS", "NUM_WARPS"), ([256, 512, 1024, 2048], [2, 4, 8]),
     {"silu 1x8960": silu(1, 8960), "silu 4x14336": silu(4, 14336), "silu 16x14336": silu(16, 14336)}),
    ("norm", norm_kernel, ("ELEMS_PER_THREAD",), ([4, 8, 16, 32],),
     {"rms 1x576": rms(1, 576), "rms 1x4096": rms(1, 4096), "rms 16x8192": rms(16, 8192),
      "rms 16384x4096": rms(16384, 4096)}),
]


def main() -> None:
    for title, module, names, values, shapes in SWEEPS:
        saved = [getattr(module, n) for n in names]
        print(f"\n== {title}: {' x '.join(names)} (default {saved}) ==", flush=True)
        for label, (make, fn, nbytes) in shapes.items():
            sets = [make() for _ in range(max(1, min(32, (256 << 20) // nbytes)))]
            results = []
            for setting in itertools.product(*values):
                for n, v in zip(names, setting):
                    setattr(module, n, v)
                clear_all()
                t = common.time_graph(fn, sets, reps=10) or common.time_eager(fn, sets, reps=10)
                results.append((t, setting))
            results.sort()
            row = "  ".join(f"{'/'.join(map(str, s))}:{t:.2f}" for t, s in results)
            print(f"{label:26s} {nbytes / results[0][0] / 1e6:6.3f} TB/s best | {row}", flush=True)
            del sets
        for n, v in zip(names, saved):
            setattr(module, n, v)
        clear_all()


if __name__ == "__main__":
    main()
