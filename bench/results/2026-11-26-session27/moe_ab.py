"""Session 27: moe_ffn's decode step with the routing + L2 prefetch launch (ops/moe/prefetch.py) against main's
package (run this file once per package, PYTHONPATH picks it). CUDA-graph replay over 16 routings (the experts
change with each, so their weights are not in L2), best of 3 interleaved rounds; variants of the tree: the
prefetch off (the ranked routing alone, one program) and on with 1 / 2 programs per SM.

    python moe_ab.py --label main|new
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.moe import kernel  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

SHAPES = [("qwen3-30b-a3b", 128, 2048, 768), ("qwen3.6-35b-a3b", 256, 2048, 512)]
TOPK = 8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    a = ap.parse_args()
    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s")
    new = hasattr(kernel, "PREFETCH")
    if new:
        from mlx_native.ops.moe import prefetch
    for label, e, hidden, inter in SHAPES:
        torch.manual_seed(0)
        gq = affine_weight(inter, hidden, lead=(e,))
        uq = affine_weight(inter, hidden, lead=(e,))
        dq = affine_weight(hidden, inter, lead=(e,))
        floor_us = TOPK * (2 * affine_bytes(inter, hidden) + affine_bytes(hidden, inter)) / copy_bw * 1e6
        sets = [(torch.randn(1, hidden, device="cuda", dtype=torch.bfloat16), torch.randn(1, e, device="cuda"))
                for _ in range(16)]

        def fused(x, logits):
            return mn.moe_ffn(x, logits, TOPK, gq, uq, dq)

        def three(x, logits):
            ids, w = mn.moe_route(logits, TOPK)
            h = mn.moe_qmm(x, ids, *gq, w_up=uq[0], scales_up=uq[1], biases_up=uq[2])
            return mn.moe_qmm(h, ids, *dq, topk_weights=w)

        variants = {"default": (True, 1)}
        if new:
            variants = {"prefetch off": (False, 1), "prefetch 1/SM": (True, 1), "prefetch 2/SM": (True, 2),
                        "prefetch 4/SM": (True, 4)}
        best = {}
        for _ in range(3):
            for name, (pf, per_sm) in variants.items():
                if new:
                    kernel.PREFETCH, prefetch.SHARES_PER_SM = pf, per_sm
                plans.clear_all()
                t = common.time_graph(fused, sets)
                best[name] = min(t, best.get(name, t))
        for name, t in best.items():
            print(f"[moe] {a.label} {label:16s} {name:14s} {t:7.2f} us  {t / floor_us:.2f}x the floor {floor_us:.2f}",
                  flush=True)
        if new:
            kernel.PREFETCH, prefetch.SHARES_PER_SM = True, 1
            plans.clear_all()
        diffs = [(fused(*s).float() - three(*s).float()).abs().max().item() for s in sets[:4]]
        print(f"[moe] {a.label} {label:16s} max |moe_ffn - three ops| {max(diffs):.3e}", flush=True)


if __name__ == "__main__":
    main()
