"""Launch constants of the routed integer-dot MoE mat-vecs (ops/moe/idot.py) on the decode FFN of Qwen3-30B-A3B
(128 experts, top-8, hidden 2048, expert intermediate 768) and Qwen3.6-35B-A3B (256 experts, I 512): rows per
program of the gate/up pair and of the mixed down projection, CUDA-graph replay over 16 routings (the experts
touched change with each, so their weights do not sit in L2). Also times each launch of the step alone, and
profiles the kernels of the default configuration (GPU time of each, without launch gaps). The step is timed
as ``moe_ffn`` (two launches routing in the kernels, with and without programmatic dependent launch) and as
the three ops (moe_route, the gate/up pair, the down projection with the mix).

    python bench/moe_sweep.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.moe import idot  # noqa: E402
from mlx_native.runtime import env, plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [("qwen3-30b-a3b", 128, 2048, 768), ("qwen3.6-35b-a3b", 256, 2048, 512)]
TOPK = 8


def kernel_times(fn, sets, rounds: int = 20) -> list[tuple[str, float]]:
    """GPU microseconds per call of each kernel ``fn`` launches (eager, profiled)."""
    from torch.profiler import ProfilerActivity, profile

    for args in sets:
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(rounds):
            for args in sets:
                fn(*args)
        torch.cuda.synchronize()
    calls = rounds * len(sets)
    out = []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)
        if t and e.count:
            out.append((e.key[:60], t / calls))
    return sorted(out, key=lambda r: -r[1])


def set_pdl(on: bool) -> None:
    """``MLX_NATIVE_PDL`` for the plans built from now on."""
    os.environ["MLX_NATIVE_PDL"] = "1" if on else "0"
    env.reload_settings()
    plans.clear_all()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "moe_sweep.json"))
    a = ap.parse_args()
    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s")
    rows = []
    for label, e, hidden, inter in SHAPES:
        gq = affine_weight(inter, hidden, lead=(e,))
        uq = affine_weight(inter, hidden, lead=(e,))
        dq = affine_weight(hidden, inter, lead=(e,))
        nbytes = TOPK * (2 * affine_bytes(inter, hidden) + affine_bytes(hidden, inter))
        floor_us = nbytes / copy_bw * 1e6
        sets = [(torch.randn(1, hidden, device="cuda", dtype=DT), torch.randn(1, e, device="cuda")) for _ in range(16)]

        def route(x, logits):
            return mn.moe_route(logits, TOPK)

        def gate_up(x, logits):
            ids, _ = mn.moe_route(logits, TOPK)
            return mn.moe_qmm(x, ids, *gq, w_up=uq[0], scales_up=uq[1], biases_up=uq[2])

        def three_ops(x, logits):
            ids, w = mn.moe_route(logits, TOPK)
            h = mn.moe_qmm(x, ids, *gq, w_up=uq[0], scales_up=uq[1], biases_up=uq[2])
            return mn.moe_qmm(h, ids, *dq, topk_weights=w)

        def fused(x, logits):
            return mn.moe_ffn(x, logits, TOPK, gq, uq, dq)

        defaults = idot.GLU_BN, idot.MIX_BN
        for glu_bn, mix_bn in itertools.product((4, 8), (4, 8, 16)):
            idot.GLU_BN, idot.MIX_BN = glu_bn, mix_bn
            set_pdl(True)
            t_pdl = common.time_graph(fused, sets)
            t_pdl_eager = common.time_eager(fused, sets)
            set_pdl(False)
            t_fused = common.time_graph(fused, sets)
            t_three = common.time_graph(three_ops, sets)
            t_route = common.time_graph(route, sets)
            t_gate_up = common.time_graph(gate_up, sets)
            row = dict(shape=label, glu_bn=glu_bn, mix_bn=mix_bn, ffn_pdl_us=t_pdl, ffn_pdl_eager_us=t_pdl_eager,
                       ffn_us=t_fused, three_ops_us=t_three, route_us=t_route, route_gate_up_us=t_gate_up,
                       floor_us=floor_us, x_floor=t_pdl / floor_us)
            rows.append(row)
            print(f"{label:16s} glu_bn {glu_bn} mix_bn {mix_bn:2d}: moe_ffn {t_pdl:6.2f} us with PDL "
                  f"({row['x_floor']:.2f}x the floor {floor_us:.2f}; eager {t_pdl_eager:6.2f}), {t_fused:6.2f} "
                  f"without; three ops {t_three:6.2f}, route {t_route:5.2f}, route + gate/up {t_gate_up:6.2f}",
                  flush=True)
        idot.GLU_BN, idot.MIX_BN = defaults
        for pdl in (True, False):
            set_pdl(pdl)
            for name, us in kernel_times(fused, sets):
                print(f"{label:16s} profile moe_ffn (PDL {pdl}): {us:6.2f} us  {name}", flush=True)
        for name, us in kernel_times(three_ops, sets):
            print(f"{label:16s} profile three ops: {us:6.2f} us  {name}", flush=True)
        os.environ.pop("MLX_NATIVE_PDL")
        env.reload_settings()
    common.save_json(a.out, {"copy_bandwidth_Bps": copy_bw, "rows": rows})


if __name__ == "__main__":
    main()
