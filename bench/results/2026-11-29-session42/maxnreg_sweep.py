"""Session 42: register caps (Triton ``maxnreg``) for the MLX 4-bit decode kernels, which ncu (runs 4-5) shows
issue-limited at ~3 warps a scheduler (mmv_kernel 95 registers: 5 programs an SM; affine_idot_kernel 128: 4).
argv: maxnreg (0: none), kernel name, mmv split override (0: the rule). 4096 x 14336 and 14336 x 4096, us."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402
from quant import affine_weight  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.kernels import launch as launch_mod  # noqa: E402
from mlx_native.ops.quant import mmv  # noqa: E402

cap, name, split = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
orig_init = launch_mod.Launch.__init__


def init(self, kernel, *a, **kw):
    orig_init(self, kernel, *a, **kw)
    if cap and getattr(kernel, "__name__", getattr(getattr(kernel, "fn", None), "__name__", "")) == name:
        self.options["maxnreg"] = cap


launch_mod.Launch.__init__ = init
if split:
    orig_bs = mmv.balanced_split

    def forced(groups, gps, tiles, sms, min_steps):
        steps = groups // gps
        per = -(-steps // split) * gps
        return -(-groups // per), per
    mmv.balanced_split = forced
for k, n in ((4096, 14336), (14336, 4096)):
    ws = [affine_weight(n, k) for _ in range(4)]
    for m in ((1,) if name == "affine_idot_kernel" else (2, 8, 16)):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ref = mn.quantized_matmul(x, *ws[0], group_size=64).float()
        t = common.time_graph(lambda x, w: mn.quantized_matmul(x, *w, group_size=64), [(x, w) for w in ws], 50)
        print(f"{name} maxnreg {cap:3d} split {split} K{k} N{n} M{m:2d}: {t:7.2f} us (|out| {ref.abs().max():.3g})",
              flush=True)
