"""Session 42: one MLX affine 4-bit g64 decode call, 4096 x 14336, M rows of x (argv[1]), repeated for ncu."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from quant import affine_weight  # noqa: E402
import mlx_native as mn  # noqa: E402

m = int(sys.argv[1])
k, n = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "4096x14336").split("x"))
ws = [affine_weight(n, k) for _ in range(4)]
x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
for i in range(8):
    mn.quantized_matmul(x, *ws[i % 4], group_size=64)
torch.cuda.synchronize()
