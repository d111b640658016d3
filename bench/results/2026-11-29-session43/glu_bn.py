"""Session 43 run 6: the Qwen3-30B-A3B-shaped moe_ggml_ffn step with gguf_idot.BN (rows of each projection per program
of the routed Q4_K / Q5_K gate/up kernel, one warp) at 2 / 4 / 8, CUDA-graph replay, two alternated rounds. (Run 6
set BN, which the gate/up pairs then took; main has their own GLU_BN per format since.)"""
import sys

import torch

import common
from quant import gguf_raw

import mlx_native as mn
from mlx_native.ops.moe import gguf_idot
from mlx_native.runtime import plans

E, TOPK, HIDDEN, INTER = 128, 8, 2048, 768
sets = [(torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16), torch.randn(1, E, device="cuda"))
        for _ in range(4)]
combos = [("Q4_K", "Q4_K"), ("Q5_K", "Q5_K"), ("Q4_K", "Q6_K")]
weights = {c: (gguf_raw(c[0], INTER, HIDDEN, E), gguf_raw(c[0], INTER, HIDDEN, E), gguf_raw(c[1], HIDDEN, INTER, E))
           for c in combos}
for rnd in (1, 2):
    for bn in (2, 4, 8):
        gguf_idot.BN = bn
        plans.clear_all()
        for (gt, dt), (g, u, d) in weights.items():
            us = common.time_graph(lambda x, lg: mn.moe_ggml_ffn(x, lg, TOPK, (g, gt), (u, gt), (d, dt)), sets, 20)
            print(f"round {rnd} BN {bn} gate/up {gt} down {dt}: {us:.2f} us", flush=True)
sys.exit(0)
