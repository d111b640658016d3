"""MoE prefill on expert formats without the grouped mat-vec kernel (GGUF Q6_K, Q8_0, Q5_K; MLX 8-bit), and
``gather_qmm`` on 4-bit experts (``MLX4``: mlx-lm's SwitchGLU calls): the default route (dequantized chunks,
``grouped.DequantGroupedLaunch``, for the formats; the grouped kernel for ``gather_qmm``) at each
``grouped.DENSE_CONFIG`` of ``--dense``, against the tiled grouped kernel (``qmm.RoutedLaunch``: tiles dequantized in
registers) with ``--tiled`` at its default launch config and at each config of ``--configs``.

    python bench/moe_formats_sweep.py [--tokens 128,512,2048] [--formats Q6_K,Q8_0,Q5_K,MLX8,MLX4]
                                      [--dense "64,64,4,3 ..."] [--tiled] [--configs "64,128,4,1,1 ..."]
                                      [--out FILE.json]

A ``--configs`` entry is ``BN,BK,warps,stages,swap`` of ``qmm.Config`` (``swap``: the weight tile is the MMA's wide
side, the block's rows the narrow one); a ``--dense`` entry ``BN,BK,warps,stages``. Shape: Qwen3-30B-A3B (128
experts, top-8, hidden 2048, expert intermediate 768): the down projection alone and the gate/up pair (``MLX4``: the
gate alone through ``gather_qmm``, x ``[T, 1, 1, K]``, ``rhs_indices`` the routing). Outputs are checked against the
default route; CUDA-graph replay.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.moe import grouped  # noqa: E402
from mlx_native.ops.quant import qmm  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

DT = torch.bfloat16
E, TOPK, HIDDEN, INTER = 128, 8, 2048, 768
DEFAULT_CONFIGS = ""


def _h_ids(x, h, ids):
    return h, ids


def _x_ids(x, h, ids):
    return x, ids


def _override(cfg):
    bn, bk, warps, stages, swap = cfg

    def hook(kind, m, n, k, spec):
        if kind != "prefill":
            return None
        return qmm.Config(16, bn, max(bk, spec.k_align), 1, True, warps, num_stages=stages, group_m=1,
                          swap=bool(swap))

    return hook


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="128,512,2048")
    ap.add_argument("--formats", default="Q6_K,Q8_0,Q5_K,MLX8")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS)
    ap.add_argument("--dense", default="")
    ap.add_argument("--tiled", action="store_true", help="time the tiled kernel too")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "moe_formats_sweep.json"))
    a = ap.parse_args()
    configs = [tuple(map(int, c.split(","))) for c in a.configs.split()]
    dense = [tuple(map(int, c.split(","))) for c in a.dense.split()]
    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows = []
    for fmt in a.formats.split(","):
        if fmt == "MLX4":
            gate = affine_weight(INTER, HIDDEN, lead=(E,))
            ops = (("gather_qmm", lambda x, ids: mn.gather_qmm(x[:, None, None, :], *gate, rhs_indices=ids), _x_ids),)
        elif fmt.startswith("MLX"):
            bits = int(fmt[3:])
            gate, up, down = (affine_weight(n, k, bits=bits, lead=(E,)) for n, k in
                              ((INTER, HIDDEN), (INTER, HIDDEN), (HIDDEN, INTER)))

            def run_down(h, ids):
                return mn.moe_qmm(h, ids, *down, bits=bits)

            def run_pair(x, ids):
                return mn.moe_qmm(x, ids, *gate, w_up=up[0], scales_up=up[1], biases_up=up[2], bits=bits)

            ops = (("down", run_down, _h_ids), ("gate/up", run_pair, _x_ids))
        else:
            gq, uq = gguf_raw(fmt, INTER, HIDDEN, lead=E), gguf_raw(fmt, INTER, HIDDEN, lead=E)
            dq = gguf_raw(fmt, HIDDEN, INTER, lead=E)

            def run_down(h, ids, dq=dq, fmt=fmt):
                return mn.moe_ggml_matmul(h, ids, dq, fmt, (E, HIDDEN, INTER))

            def run_pair(x, ids, gq=gq, uq=uq, fmt=fmt):
                return mn.moe_ggml_matmul(x, ids, gq, fmt, (E, INTER, HIDDEN), raw_up=uq)

            ops = (("down", run_down, _h_ids), ("gate/up", run_pair, _x_ids))
        for t in map(int, a.tokens.split(",")):
            x = torch.randn(t, HIDDEN, device="cuda", dtype=DT)
            h = torch.randn(t, TOPK, INTER, device="cuda", dtype=DT)
            ids, _ = mn.moe_route(torch.randn(t, E, device="cuda"), TOPK)
            for what, fn, pick in ops:
                args = pick(x, h, ids)
                flops = 2 * t * TOPK * HIDDEN * INTER * (2 if what == "gate/up" else 1)
                plans.clear_all()
                want = fn(*args)

                def timed(label, cfg=None, fn=fn, args=args, want=want, what=what, flops=flops, t=t):
                    plans.clear_all()
                    try:
                        err = common.rel_err(fn(*args), want)
                        us = common.time_any(fn, [args])
                    except Exception as exc:  # noqa: BLE001 - keep the other rows
                        print(f"{fmt} T{t} {what} {label}: {exc!r}"[:300], flush=True)
                        return
                    rows.append(dict(format=fmt, tokens=t, what=what, label=label, cfg=cfg, us=us, rel_err=err,
                                     tflops=flops / (us * 1e-6) / 1e12))
                    print(f"{fmt:5s} T{t:<5d} {what:8s} {label:28s} {us:9.1f} us  {flops / (us * 1e-6) / 1e12:6.1f} "
                          f"TFLOP/s  err {err:.1e}", flush=True)

                timed("default route")
                keep_dense = grouped.DENSE_CONFIG
                for cfg in dense if fmt != "MLX4" else ():
                    grouped.DENSE_CONFIG = cfg
                    try:
                        timed(f"dense {cfg}", cfg)
                    finally:
                        grouped.DENSE_CONFIG = keep_dense
                if not a.tiled:
                    continue
                keep = grouped.dense_supports, grouped.MIN_ROWS
                grouped.dense_supports, grouped.MIN_ROWS = (lambda *_: False), 1 << 30
                try:
                    timed("tiled, default config")
                    for cfg in configs:
                        qmm.CONFIG_OVERRIDE = _override(cfg)
                        try:
                            timed(f"tiled {cfg}", cfg)
                        finally:
                            qmm.CONFIG_OVERRIDE = None
                finally:
                    grouped.dense_supports, grouped.MIN_ROWS = keep
    common.save_json(a.out, dict(environment=common.environment(), copy_bandwidth_Bps=copy_bw, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
