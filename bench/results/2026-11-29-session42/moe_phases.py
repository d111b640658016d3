"""Session 42: where the MLX affine 4-bit MoE decode step's 12.5 us go (Qwen3-30B-A3B: 128 experts, top-8, hidden
2048, expert intermediate 768, g64). CUDA-graph replay of 4 input sets (routing differs per set), us per step:
the whole step as moe_ffn runs it (PDL chain), each phase alone (its inputs precomputed, no PDL), phase pairs, the
chain without PDL, empty-kernel chains (the launch floor), and the gate/up and down tiles' knobs inside the step."""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.kernels.launch import pdl_available  # noqa: E402
from mlx_native.ops.moe import idot as moe_idot  # noqa: E402
from mlx_native.ops.moe.kernel import RoutePlan, words  # noqa: E402
from mlx_native.ops.quant.qmm import ACT_CODES  # noqa: E402

E, TOPK, HIDDEN, INTER, GS = 128, 8, 2048, 768, 64
DT = torch.bfloat16


@triton.jit
def _empty_kernel(p):
    tl.store(p + tl.program_id(0), 1.0)


def main():
    copy = common.copy_bandwidth()
    floor = (2 * affine_bytes(INTER, HIDDEN) + affine_bytes(HIDDEN, INTER)) * TOPK / copy * 1e6
    print(f"{torch.cuda.get_device_name()}; copy {copy / 1e12:.3f} TB/s; floor {floor:.2f} us", flush=True)
    gq, uq, dq = (affine_weight(n, k, lead=(E,)) for n, k in ((INTER, HIDDEN), (INTER, HIDDEN), (HIDDEN, INTER)))
    wts = [words(t) for t in (*gq, *uq, *dq)]
    xs = [(torch.randn(1, HIDDEN, device="cuda", dtype=DT), torch.randn(1, E, device="cuda")) for _ in range(4)]
    pdl = pdl_available(torch.device("cuda"))

    def plans(p, glu_bn=0, mix_bn=0):
        route = RoutePlan(xs[0][1], TOPK, "softmax", True, None, p)
        glu = moe_idot.MoeIdotLaunch(1, TOPK, INTER, HIDDEN, E, GS, TOPK, DT, "cuda", act=ACT_CODES["silu"], pdl=p,
                                     bn=glu_bn)
        mix = moe_idot.MoeIdotLaunch(1, TOPK, HIDDEN, INTER, E, GS, 1, DT, "cuda", mix=True, pdl=p, bn=mix_bn)
        return route, glu, mix

    r0, g0, m0 = plans(False)
    pre = []  # per set: ids, w, h (precomputed phase inputs)
    for x, lg in xs:
        ids, w = r0(lg, None)
        ids = ids.reshape(-1)
        h = g0(x, ids, *wts[:6])
        pre.append((x, lg, ids, w.reshape(-1), h))
    ref = [mn.moe_ffn(x, lg, TOPK, gq, uq, dq) for x, lg in xs]

    def chain(route, glu, mix):
        def step(x, lg, ids0, w0, h0):
            ids, w = route(lg, None)
            ids = ids.reshape(-1)
            h = glu(x, ids, *wts[:6])
            return mix(h, ids, *wts[6:], mix=w.reshape(-1))
        return step

    for (x, lg, *_), want in zip(pre, ref):
        got = chain(*plans(pdl))(x, lg, None, None, None)
        assert torch.equal(got, want), "the phase chain differs from moe_ffn"

    def t(fn):
        return common.time_graph(fn, pre, 50)

    rows = {}
    rows["moe_ffn (as the library runs it)"] = t(lambda x, lg, *_: mn.moe_ffn(x, lg, TOPK, gq, uq, dq))
    rows["chain, PDL"] = t(chain(*plans(pdl)))
    rows["chain, no PDL"] = t(chain(r0, g0, m0))
    rows["route alone"] = t(lambda x, lg, *_: r0(lg, None))
    rows["gate/up alone"] = t(lambda x, lg, ids, w, h: g0(x, ids, *wts[:6]))
    rows["down + mix alone"] = t(lambda x, lg, ids, w, h: m0(h, ids, *wts[6:], mix=w))
    rows["route + gate/up, no PDL"] = t(lambda x, lg, *_: g0(x, r0(lg, None)[0].reshape(-1), *wts[:6]))
    rows["gate/up + down, no PDL"] = t(lambda x, lg, ids, w, h: m0(g0(x, ids, *wts[:6]), ids, *wts[6:], mix=w))
    buf = torch.zeros(4096, device="cuda")
    for n in (1, 2, 3):
        def empties(*_, n=n):
            for _ in range(n):
                _empty_kernel[(256,)](buf)
        rows[f"{n} empty kernels of 256 programs"] = t(empties)
    for name, us in rows.items():
        print(f"  {name:40s} {us:7.2f} us", flush=True)
    gate_bytes = 2 * affine_bytes(INTER, HIDDEN) * TOPK
    down_bytes = affine_bytes(HIDDEN, INTER) * TOPK
    print(f"  gate/up bytes at copy {gate_bytes / copy * 1e6:.2f} us, down {down_bytes / copy * 1e6:.2f} us", flush=True)
    for gbn in (2, 4, 8, 16):
        for mbn in (4, 8, 16, 32):
            try:
                us = t(chain(*plans(pdl, gbn, mbn)))
            except Exception as exc:  # noqa: BLE001
                print(f"  knobs glu BN {gbn} mix BN {mbn}: fails {type(exc).__name__}", flush=True)
                continue
            print(f"  knobs glu BN {gbn:2d} mix BN {mbn:2d}: step {us:7.2f} us", flush=True)


if __name__ == "__main__":
    main()
