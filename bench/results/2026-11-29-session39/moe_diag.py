"""Where the one-launch MoE step's time goes (Qwen3-30B-A3B shape, one token, CUDA-graph replay over 16 routings):
the step as one launch (with and without an early PDL trigger), its two phases as two launches, each phase alone
(route + gate/up, route + down), against the chained launches; GPU time per kernel of the two-launch form."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
from moe_sweep import kernel_times, set_pdl  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.moe import fused  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

E, HIDDEN, INTER, TOPK = 128, 2048, 768, 8
gq, uq, dq = affine_weight(INTER, HIDDEN, lead=(E,)), affine_weight(INTER, HIDDEN, lead=(E,)), \
    affine_weight(HIDDEN, INTER, lead=(E,))
floor = TOPK * (2 * affine_bytes(INTER, HIDDEN) + affine_bytes(HIDDEN, INTER)) / common.copy_bandwidth() * 1e6
sets = [(torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16), torch.randn(1, E, device="cuda"))
        for _ in range(16)]


def step(x, logits):
    return mn.moe_ffn(x, logits, TOPK, gq, uq, dq)


def timed(label, **knobs):
    saved = {k: getattr(fused, k) for k in knobs}
    for k, v in knobs.items():
        setattr(fused, k, v)
    plans.clear_all()
    t = common.time_graph(step, sets)
    print(f"{label:44s} {t:6.2f} us  {t / floor:.2f}x the floor {floor:.2f}", flush=True)
    if knobs.get("PHASE_LAUNCHES") == (1, 2):
        for name, us in kernel_times(step, sets):
            print(f"    profile: {us:6.2f} us  {name}", flush=True)
    for k, v in saved.items():
        setattr(fused, k, v)


set_pdl(True)
timed("chained launches", ENABLED=False)
timed("one launch")
timed("one launch, early trigger", TRIGGER=True)
timed("two launches (phase A, phase B)", PHASE_LAUNCHES=(1, 2))
timed("phase A alone (route + gate/up)", PHASE_LAUNCHES=(1,))
timed("phase B alone (route + down, mix)", PHASE_LAUNCHES=(2,))
timed("one launch, 1 program per SM", PROGRAMS_PER_SM=1)
for bn_a, bn_b in ((16, 16), (32, 8), (16, 32)):
    timed(f"one launch, bn_a {bn_a} bn_b {bn_b}", BN_A=bn_a, BN_B=bn_b)
