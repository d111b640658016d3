"""Session 42: the routed gate/up launch of the MLX MoE decode step runs 1536 programs of 2 warps at 96 registers
(offline sm_90): 10 an SM by registers, 1320 at once, so 216 wait for a second wave. Variants: a register cap (80: 12
an SM, one wave), one warp a program (two K steps), and the whole step with each. argv: maxnreg for the gate/up kernel
(0: none), warps (0: the rule). CUDA-graph replay, 4 routing sets; us."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402
from quant import affine_weight  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.kernels import launch as launch_mod  # noqa: E402
from mlx_native.ops.moe import idot as moe_idot  # noqa: E402
from mlx_native.ops.moe.kernel import RoutePlan, words  # noqa: E402
from mlx_native.ops.quant.qmm import ACT_CODES  # noqa: E402

E, TOPK, HIDDEN, INTER, GS = 128, 8, 2048, 768, 64
DT = torch.bfloat16
cap, warps = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
orig_init = launch_mod.Launch.__init__


def init(self, kernel, grid, constexprs, *a, **kw):
    orig_init(self, kernel, grid, constexprs, *a, **kw)
    if cap and constexprs.get("HAS_UP"):
        self.options["maxnreg"] = cap


launch_mod.Launch.__init__ = init
if warps:
    moe_idot.warps_for = lambda k: warps
gq, uq, dq = (affine_weight(n, k, lead=(E,)) for n, k in ((INTER, HIDDEN), (INTER, HIDDEN), (HIDDEN, INTER)))
wts = [words(t) for t in (*gq, *uq, *dq)]
xs = [(torch.randn(1, HIDDEN, device="cuda", dtype=DT), torch.randn(1, E, device="cuda")) for _ in range(4)]
r0 = RoutePlan(xs[0][1], TOPK, "softmax", True, None, False)
g0 = moe_idot.MoeIdotLaunch(1, TOPK, INTER, HIDDEN, E, GS, TOPK, DT, "cuda", act=ACT_CODES["silu"])
pre = []
for x, lg in xs:
    ids, w = r0(lg, None)
    pre.append((x, lg, ids.reshape(-1)))
ref = [mn.moe_ffn(x, lg, TOPK, gq, uq, dq) for x, lg in xs]
t_glu = common.time_graph(lambda x, lg, ids: g0(x, ids, *wts[:6]), pre, 50)
t_step = common.time_graph(lambda x, lg, ids: mn.moe_ffn(x, lg, TOPK, gq, uq, dq), pre, 50)
check = sum(r.double().abs().sum().item() for r in ref)  # the same data in every process (seed 0)
print(f"maxnreg {cap:3d} warps {warps}: gate/up alone {t_glu:6.2f} us, moe_ffn step {t_step:6.2f} us "
      f"(checksum {check:.6f})", flush=True)
