"""MoE FFN decode step on GGUF experts (Qwen3-30B-A3B shapes: 128 experts, top-8, hidden 2048, expert intermediate
768), through the ops a model runner chains (``moe_route``, ``moe_ggml_matmul`` on the gate/up pair with SiLU, then on
the down projection, ``moe_weighted_reduce``; or the down projection with ``topk_weights``, mixing the slots in its
launch) and through ``moe_ggml_ffn`` (the same three launches chained by programmatic dependent launch), against the
same step on MLX affine 4-bit experts (``moe_ffn``) and the weight floor (the 8 experts' bytes at the measured copy
bandwidth). CUDA-graph replay, T tokens (default 1).

    python bench/moe_gguf_decode.py [--types Q4_K,Q5_K,Q6_K,Q8_0] [--tokens 1] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import affine_bytes, affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.ggml import formats  # noqa: E402

DT = torch.bfloat16
E, TOPK, HIDDEN, INTER = 128, 8, 2048, 768


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="Q4_K,Q5_K,Q6_K,Q8_0")
    ap.add_argument("--tokens", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    t = args.tokens
    copy = common.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.3f} TB/s", flush=True)
    sets = [(torch.randn(t, HIDDEN, device="cuda", dtype=DT), torch.randn(t, E, device="cuda")) for _ in range(4)]
    rows = []

    def report(label, fn, expert_bytes):
        us = common.time_graph(fn, sets, 20)
        floor = min(E, t * TOPK) * expert_bytes / copy * 1e6
        rows.append(dict(label=label, tokens=t, us=us, floor_us=floor))
        print(f"T{t} {label:44s} {us:8.2f} us  floor {floor:6.2f} us  x{us / floor:5.2f} the floor", flush=True)

    gq, uq, dq = (affine_weight(n, k, lead=(E,)) for n, k in ((INTER, HIDDEN), (INTER, HIDDEN), (HIDDEN, INTER)))
    report("MLX affine 4-bit g64: moe_ffn", lambda x, lg: mn.moe_ffn(x, lg, TOPK, gq, uq, dq),
           2 * affine_bytes(INTER, HIDDEN) + affine_bytes(HIDDEN, INTER))
    for name in args.types.split(","):
        fmt = formats.BY_NAME[name]
        g, u, d = gguf_raw(name, INTER, HIDDEN, E), gguf_raw(name, INTER, HIDDEN, E), gguf_raw(name, HIDDEN, INTER, E)

        def step(x, lg, g=g, u=u, d=d, name=name):
            ids, w = mn.moe_route(lg, TOPK)
            h = mn.moe_ggml_matmul(x, ids, g, name, (E, INTER, HIDDEN), raw_up=u)
            return mn.moe_weighted_reduce(mn.moe_ggml_matmul(h, ids, d, name, (E, HIDDEN, INTER)), w)

        def mixed(x, lg, g=g, u=u, d=d, name=name):
            ids, w = mn.moe_route(lg, TOPK)
            h = mn.moe_ggml_matmul(x, ids, g, name, (E, INTER, HIDDEN), raw_up=u)
            return mn.moe_ggml_matmul(h, ids, d, name, (E, HIDDEN, INTER), topk_weights=w)

        def ffn(x, lg, g=g, u=u, d=d, name=name):
            return mn.moe_ggml_ffn(x, lg, TOPK, (g, name), (u, name), (d, name))

        nbytes = 2 * INTER * formats.row_bytes(fmt, HIDDEN) + HIDDEN * formats.row_bytes(fmt, INTER)
        report(f"GGUF {name}: route, gate/up, down, reduce", step, nbytes)
        report(f"GGUF {name}: route, gate/up, down + mix", mixed, nbytes)
        report(f"GGUF {name}: moe_ggml_ffn", ffn, nbytes)
    if "Q4_K" in args.types and "Q6_K" in args.types:  # a Q4_K_M file's layer: Q4_K gate/up, Q6_K down
        g, u, d = gguf_raw("Q4_K", INTER, HIDDEN, E), gguf_raw("Q4_K", INTER, HIDDEN, E), gguf_raw("Q6_K", HIDDEN, INTER, E)
        nbytes = (2 * INTER * formats.row_bytes(formats.BY_NAME["Q4_K"], HIDDEN)
                  + HIDDEN * formats.row_bytes(formats.BY_NAME["Q6_K"], INTER))
        report("GGUF Q4_K gate/up, Q6_K down: moe_ggml_ffn",
               lambda x, lg: mn.moe_ggml_ffn(x, lg, TOPK, (g, "Q4_K"), (u, "Q4_K"), (d, "Q6_K")), nbytes)
    if args.out:
        common.save_json(args.out, dict(copy_bandwidth=copy, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
