"""Session 42: is the 2-16-row MLX 4-bit decode (mmv.py) losing time to an unbalanced grid? 4096 x 14336 runs 448
programs on 132 SMs (3.39 an SM: 52 SMs hold 4, 80 hold 3) and ncu shows it issue-limited per SM (run 4). Time per
output row at N where the grid divides evenly (12672: 396 = 3 an SM; 16896 with PPS=4: 528 = 4 an SM) against 14336.
argv: PPS (mmv.PROGRAMS_PER_SM). CUDA-graph replay, 4 weight sets past L2."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402
from quant import affine_weight  # noqa: E402
import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import mmv  # noqa: E402

mmv.PROGRAMS_PER_SM = int(sys.argv[1]) if len(sys.argv) > 1 else mmv.PROGRAMS_PER_SM
K = 4096
for n in (12672, 14336, 16896):
    ws = [affine_weight(n, K) for _ in range(4)]
    for m in (1, 2, 4, 16):
        x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
        t = common.time_graph(lambda x, w: mn.quantized_matmul(x, *w, group_size=64), [(x, w) for w in ws], 50)
        print(f"PPS {mmv.PROGRAMS_PER_SM} N {n:5d} M {m:2d}: {t:7.2f} us, {t / n * 1e3:6.3f} ns per output row",
              flush=True)
