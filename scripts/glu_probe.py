"""A dense gate/up pair for one row of x on the H100: the integer-dot mat-vec with both projections and the
activation in one launch (``AffineIdotLaunch(act=...)``, what ``GatedMLP`` runs for MLX 4-bit decode) against
the fused ``[2 I, K]`` matrix's mat-vec plus ``silu_mul``, across row tiles, warps and prefetch. CUDA-graph
replay, two weight sets in rotation.

    python scripts/glu_probe.py [--shapes 4096x14336,2048x8192]   (K x I)
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))

import common  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant.affine_idot import AffineIdotLaunch  # noqa: E402
from quant import affine_weight  # noqa: E402

GS, DT = 64, torch.bfloat16


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x14336")
    args = ap.parse_args()
    dev = torch.device("cuda")
    for shape in args.shapes.split(","):
        k, inter = (int(v) for v in shape.split("x"))
        sets = []
        for _ in range(2):
            w, s, b = affine_weight(2 * inter, k, GS)
            sets.append((torch.randn(1, k, device=dev, dtype=DT), w.view(torch.int32), s, b))

        def pair(x, w, s, b):
            gu = mn.quantized_matmul(x, w, s, b, group_size=GS)
            return mn.silu_mul(gu[..., :inter], gu[..., inter:])

        def mv(x, w, s, b):
            return mn.quantized_matmul(x, w, s, b, group_size=GS)

        ref = pair(*sets[0]).float()
        for name, fn in (("fused matrix mat-vec + silu_mul", pair), ("fused matrix mat-vec alone", mv)):
            print(f"K{k} I{inter} {name:44s} {common.time_graph(fn, sets, reps=50):8.2f} us", flush=True)
        for bn in (2, 4, 8):
            for warps in (1, 2):
                for prefetch in (False, True):
                    plan = AffineIdotLaunch(inter, k, GS, DT, dev, bn=bn, warps=warps, prefetch=prefetch, act=0)

                    def glu(x, w, s, b, plan=plan):
                        return plan(x, w[:inter], s[:inter], b[:inter], w[inter:], s[inter:], b[inter:])

                    err = (glu(*sets[0]).float() - ref).abs().max().item()
                    t = common.time_graph(glu, sets, reps=50)
                    print(f"K{k} I{inter} GLU bn={bn} warps={warps} prefetch={int(prefetch)}{'':17s} {t:8.2f} us "
                          f"(max diff to the pair {err:.2e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
