"""Session 41: the routed GGUF Q6_K / Q8_0 decode kernel (``ops/moe/gguf_mv.py``) per projection of a
Qwen3-30B-A3B-shaped step (128 experts, top-8, hidden 2048, expert intermediate 768; one token): the gate/up pair
(N 768, K 2048, SiLU) and the down projection (N 2048, K 768), over warps and rows a program; err: max |out - default|
/ max |default|. CUDA-graph replay over 4 sets of routed ids; us.

    python moe_mv_sweep.py [--types Q6_K,Q8_0]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
from quant import gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats  # noqa: E402
from mlx_native.ops.moe import gguf_mv  # noqa: E402
from mlx_native.ops.quant.qmm import ACT_CODES  # noqa: E402

DT = torch.bfloat16
E, TOPK, HIDDEN, INTER = 128, 8, 2048, 768
VARIANTS = {"Q6_K": [(4, 0), (2, 0), (1, 0), (4, 16), (2, 8), (1, 4)], "Q8_0": [(4, 8), (2, 8), (1, 8), (1, 4), (2, 4), (4, 16)]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="Q6_K,Q8_0")
    a = ap.parse_args()
    dev = torch.device("cuda")
    ids = [mn.moe_route(torch.randn(1, E, device="cuda"), TOPK)[0].reshape(-1) for _ in range(4)]
    for name in a.types.split(","):
        t = formats.BY_NAME[name]
        for label, n, k, x_div, act, up in (("gate/up", INTER, HIDDEN, TOPK, ACT_CODES["silu"], True),
                                            ("down", HIDDEN, INTER, 1, None, False)):
            w = gguf_raw(name, n, k, E).reshape(-1)
            wu = gguf_raw(name, n, k, E).reshape(-1) if up else None
            x = torch.randn(1 if x_div == TOPK else TOPK, k, device="cuda", dtype=DT) * 0.1
            sets = [(x, i, w, wu) for i in ids]
            ref = None
            row = f"{name} {label:8s}"
            for warps, bn in VARIANTS[name]:
                plan = gguf_mv.MoeGgufMvLaunch(t.id, TOPK, n, k, E, x_div, DT, dev, act, warps=warps, bn=bn)
                out = plan(*sets[0]).float()
                ref = out if ref is None else ref
                err = (out - ref).abs().max().item() / ref.abs().max().item()
                us = common.time_graph(plan, sets)
                c = plan.launch.constexprs
                row += f"  w{warps} bn{c['BN']:<2d} {us:6.2f} ({err:.0e})"
            print(row, flush=True)


if __name__ == "__main__":
    main()
