"""Launch-config sweep for the row/elementwise kernels (developer tool).

    python bench/sweep.py

For the rope kernel module it varies TILE_ELEMS (elements per program) and
ELEMS_PER_THREAD (which sets num_warps) of the large-problem config, times
ours on large and decode shapes, and prints the best setting per shape. The
heuristics in the kernel modules were chosen from such tables (bench/NOTES.md).
"""

from __future__ import annotations

import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.ops.rope import kernel as rope_kernel  # noqa: E402
from mlx_native.runtime.plans import clear_all  # noqa: E402

BF16 = torch.bfloat16


def _rope_bhld_case(batch, heads, seq, dim):
    def make():
        return (torch.randn(batch, heads, seq, dim, device="cuda", dtype=BF16),)
    return make, (lambda x: mn.rope(x, dim, base=1e6, offset=3)), 2 * batch * heads * seq * dim * 2


def _hnr_case(tokens, heads, dim):
    def make():
        return (torch.randn(tokens, heads, dim, device="cuda", dtype=BF16), torch.randn(dim, device="cuda", dtype=BF16),
                torch.arange(tokens, device="cuda"))
    return make, (lambda x, w, p: mn.head_norm_rope(x, w, positions=p)), 2 * tokens * heads * dim * 2


SWEEPS = [
    ("rope", rope_kernel, [1024, 2048, 4096, 8192], [4, 8, 16, 32],
     {"hnr T32768 H16 D128": _hnr_case(32768, 16, 128), "hnr T8192 H32 D256": _hnr_case(8192, 32, 256),
      "hnr T16 H32 D128": _hnr_case(16, 32, 128), "hnr T1 H32 D128": _hnr_case(1, 32, 128),
      "rope BHLD 4x32x4096x128": _rope_bhld_case(4, 32, 4096, 128)}),
]


def main() -> None:
    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s")
    for name, module, tiles, epts, shapes in SWEEPS:
        saved = module.TILE_ELEMS, module.ELEMS_PER_THREAD
        print(f"\n== {name}: TILE_ELEMS x ELEMS_PER_THREAD (default {saved}) ==")
        for label, (make, fn, nbytes) in shapes.items():
            sets = [make() for _ in range(max(1, min(32, (256 << 20) // nbytes)))]
            results = []
            for tile, ept in itertools.product(tiles, epts):
                module.TILE_ELEMS, module.ELEMS_PER_THREAD = tile, ept
                clear_all()
                t = common.time_graph(fn, sets, reps=10) or common.time_eager(fn, sets, reps=10)
                results.append((t, tile, ept))
            results.sort()
            best = results[0]
            row = "  ".join(f"{tile}/{ept}:{t:.1f}" for t, tile, ept in sorted(results, key=lambda r: (r[1], r[2])))
            print(f"{label:18s} best {best[1]}/{best[2]} {best[0]:.2f} us ({nbytes / best[0] / 1e6:.2f} TB/s)  | {row}")
            del sets
        module.TILE_ELEMS, module.ELEMS_PER_THREAD = saved
        clear_all()


if __name__ == "__main__":
    main()
