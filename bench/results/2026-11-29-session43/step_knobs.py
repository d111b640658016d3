"""Session 43 runs 2 and 6: the Qwen3-30B-A3B-shaped moe_ggml_ffn step with a tile knob of ``ops/moe/gguf_idot.py`` at
2 / 4 / 8 rows a program for both Q4_K and Q5_K, CUDA-graph replay, two alternated rounds.

    python step_knobs.py MIX_BN   # run 2: output rows of the token-mixing down projection
    python step_knobs.py GLU_BN   # run 6: rows of each projection of the routed gate/up pair

(Runs 2 and 6 set the knobs as one int, ``MIX_BN`` and ``BN``; main keeps a row count per format in ``MIX_BN`` and
``GLU_BN``.)"""
import sys

import torch

import common
from quant import gguf_raw

import mlx_native as mn
from mlx_native.ops.moe import gguf_idot
from mlx_native.runtime import plans

E, TOPK, HIDDEN, INTER = 128, 8, 2048, 768
knob = sys.argv[1]
sets = [(torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16), torch.randn(1, E, device="cuda"))
        for _ in range(4)]
combos = [("Q4_K", "Q4_K"), ("Q5_K", "Q5_K"), ("Q4_K", "Q6_K")]
weights = {c: (gguf_raw(c[0], INTER, HIDDEN, E), gguf_raw(c[0], INTER, HIDDEN, E), gguf_raw(c[1], HIDDEN, INTER, E))
           for c in combos}
for rnd in (1, 2):
    for bn in (2, 4, 8):
        setattr(gguf_idot, knob, {t: bn for t in gguf_idot.TYPES})
        plans.clear_all()
        for (gt, dt), (g, u, d) in weights.items():
            us = common.time_graph(lambda x, lg: mn.moe_ggml_ffn(x, lg, TOPK, (g, gt), (u, gt), (d, dt)), sets, 20)
            print(f"round {rnd} {knob} {bn} gate/up {gt} down {dt}: {us:.2f} us", flush=True)
