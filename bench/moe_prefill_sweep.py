"""MoE prefill (many tokens): the expert-grouped tensor-core kernel (``ops/moe/grouped.py``) against the tiled
grouped kernel it replaced, per launch config, with peers.

    python bench/moe_prefill_sweep.py [--tokens 32,128,512,2048] [--shapes qwen3-30b-a3b,qwen3.6-35b-a3b]
                                      [--configs default|all|"MP,BN,warps,stages ..."] [--gguf] [--out FILE.json]

For each MoE shape (4-bit MLX g64 experts, bf16) and token count: ``moe_ffn`` (route, gate/up, down, mix) on the
default route and with the grouped kernel off (``grouped.MIN_ROWS`` past the rows: the tiled kernel, as before
session 33); the gate/up and the down ``moe_qmm`` alone; the rows grouped by expert alone; each launch config of
``grouped.CONFIG_OVERRIDE`` (``--configs all``); with ``--gguf`` GGUF experts too (Q4_K gate/up; Q4_K, Q6_K or
Q8_0 down).
Peers in the same run: ``torch._grouped_mm`` (CUTLASS grouped GEMM) on the dequantized bf16 experts with the routing
sorted outside the timing (the peer's best case), bf16 cuBLAS on the routed rows as one dense GEMM of the same FLOPs
(a roofline, not a MoE), and the weight floor (the touched experts' bytes at the measured copy bandwidth).
CUDA-graph replay where the call can be captured (and ``moe_ffn`` in eager calls); outputs checked against the
default route.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from quant import MOE, affine_bytes, affine_weight, gguf_raw  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.moe import grouped  # noqa: E402
from mlx_native.ops.quant.grouping import RowGrouping  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

DT = torch.bfloat16


def _configs(kind: str) -> list:
    if kind == "default":
        return []
    if kind != "all":
        return [tuple(map(int, c.split(","))) for c in kind.split()]
    return [c for c in itertools.product((16, 32, 64), (64, 128), (4, 8), (2, 3)) if not (c[1] == 128 and c[2] == 4)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="32,128,512,2048")
    ap.add_argument("--shapes", default="qwen3-30b-a3b,qwen3.6-35b-a3b")
    ap.add_argument("--configs", default="default")
    ap.add_argument("--gguf", action="store_true", help="also GGUF experts: Q4_K gate/up, Q4_K and Q6_K down")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "moe_prefill_sweep.json"))
    a = ap.parse_args()
    copy_bw = common.copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s", flush=True)
    rows = []
    shapes = {name: (e, topk, hidden, inter) for name, e, topk, hidden, inter, _ in MOE}
    for name in a.shapes.split(","):
        e, topk, hidden, inter = shapes[name]
        dims = ((inter, hidden), (inter, hidden), (hidden, inter))
        gate, up, down = (affine_weight(n, k, lead=(e,)) for n, k in dims)
        per_expert = 2 * affine_bytes(inter, hidden) + affine_bytes(hidden, inter)
        for t in map(int, a.tokens.split(",")):
            x = torch.randn(t, hidden, device="cuda", dtype=DT)
            logits = torch.randn(t, e, device="cuda")
            ids, w = mn.moe_route(logits, topk)
            h = mn.moe_qmm(x, ids, *gate, w_up=up[0], scales_up=up[1], biases_up=up[2])
            used = torch.unique(ids).numel()
            floor = used * per_expert / copy_bw * 1e6
            flops = 2 * t * topk * 3 * hidden * inter

            def ffn(x, logits):
                return mn.moe_ffn(x, logits, topk, gate, up, down)

            def gate_up(x, ids):
                return mn.moe_qmm(x, ids, *gate, w_up=up[0], scales_up=up[1], biases_up=up[2])

            def down_mix(h, ids, w):
                return mn.moe_qmm(h, ids, *down, topk_weights=w)

            xr = torch.randn(t * topk, hidden, device="cuda", dtype=DT)
            wg = torch.randn(2 * inter, hidden, device="cuda", dtype=DT)
            wd = torch.randn(hidden, inter, device="cuda", dtype=DT)
            hr = torch.randn(t * topk, inter, device="cuda", dtype=DT)

            def dense(xr, wg, hr, wd):  # the same FLOPs as one dense GEMM pair (no routing): a roofline
                return xr @ wg.T, hr @ wd.T

            def timed(label, fn, sets, eager=False, **extra):
                plans.clear_all()
                try:
                    us = common.time_eager(fn, sets) if eager else common.time_any(fn, sets)
                except Exception as exc:  # noqa: BLE001 - keep the other rows
                    print(f"{name} T{t} {label}: {exc!r}"[:300], flush=True)
                    return None
                row = dict(shape=name, tokens=t, label=label, us=us, floor_us=floor, experts_used=used,
                           tflops=flops / (us * 1e-6) / 1e12, **extra)
                rows.append(row)
                print(f"{name:16s} T{t:<5d} {label:40s} {us:9.1f} us  {floor / us * 100:5.1f}% of the weight floor "
                      f"({floor:.1f} us)  {row['tflops']:6.1f} TFLOP/s", flush=True)
                return us

            order = torch.sort(ids.reshape(-1), stable=True).indices
            offs = torch.cumsum(torch.bincount(ids.reshape(-1).long(), minlength=e), 0).to(torch.int32)
            wgu = torch.cat([mn.dequantize(*gate), mn.dequantize(*up)], dim=1).transpose(-2, -1)  # [E, K, 2I]
            wdn = mn.dequantize(*down).transpose(-2, -1)

            def grouped_mm(x, order, offs, w):  # routing given (sorted outside the timing): the peer's best case
                xs = x.index_select(0, order // topk)
                gu = torch._grouped_mm(xs, wgu, offs=offs)
                hs = torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:]
                ys = torch._grouped_mm(hs, wdn, offs=offs) * w.reshape(-1)[order, None].to(DT)
                return torch.zeros(t, hidden, device="cuda", dtype=DT).index_add_(0, order // topk, ys)

            want = ffn(x, logits)
            timed("peer: torch._grouped_mm bf16, rows pre-sorted", grouped_mm, [(x, order, offs, w)])
            timed("moe_ffn", ffn, [(x, logits)])
            timed("moe_ffn, eager calls", ffn, [(x, logits)], eager=True)
            timed("gate/up moe_qmm", gate_up, [(x, ids)])
            timed("down moe_qmm + mix", down_mix, [(h, ids, w)])
            grouping = RowGrouping(t * topk, e, grouped.block_rows(t * topk, e), x.device)
            timed("rows grouped by expert (RowGrouping)", grouping, [(ids,)])
            timed("peer: dense bf16 cuBLAS, same FLOPs", dense, [(xr, wg, hr, wd)])
            keep = grouped.MIN_ROWS
            grouped.MIN_ROWS = 1 << 30
            try:
                plans.clear_all()
                got = ffn(x, logits)
                timed("moe_ffn, tiled kernel (before)", ffn, [(x, logits)], rel_err=common.rel_err(got, want))
            finally:
                grouped.MIN_ROWS = keep
            if a.gguf:
                gq = gguf_raw("Q4_K", inter, hidden, lead=e)
                timed("GGUF Q4_K gate/up moe_ggml_matmul", lambda x, ids: mn.moe_ggml_matmul(
                    x, ids, gq, "Q4_K", (e, inter, hidden), raw_up=gq), [(x, ids)])
                for name_d in ("Q4_K", "Q6_K", "Q8_0"):
                    dq = gguf_raw(name_d, hidden, inter, lead=e)
                    timed(f"GGUF {name_d} down moe_ggml_matmul", lambda h, ids: mn.moe_ggml_matmul(
                        h, ids, dq, name_d, (e, hidden, inter)), [(h, ids)])
            for cfg in _configs(a.configs):
                grouped.CONFIG_OVERRIDE = cfg
                try:
                    plans.clear_all()
                    got = gate_up(x, ids)
                    timed(f"gate/up {cfg}", gate_up, [(x, ids)], cfg=cfg, rel_err=common.rel_err(got, h))
                    timed(f"down {cfg}", down_mix, [(h, ids, w)], cfg=cfg)
                finally:
                    grouped.CONFIG_OVERRIDE = None
    common.save_json(a.out, dict(environment=common.environment(), copy_bandwidth_Bps=copy_bw, rows=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
