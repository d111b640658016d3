"""Reproduce the word-level mat-vec's wrong results with 4-row tiles on MLX affine words of fewer than 8 words
per group (H100, Triton 3.6; bench/results/2026-11-22-h100-session5/NOTES.md, section 2). Prints the relative
error of ``quantized_matmul`` against fp64 for 16-, 8- and 4-row tiles; on a correct build every row is ~1e-3.

    python scripts/gemv_bn4_repro.py        (CUDA; with TRITON_INTERPRET=1 it runs the interpreter on the CPU)
"""
import dataclasses

import torch

import mlx_native as mn
from mlx_native.ops.quant import gemv
from mlx_native.runtime import env, plans

env.settings = dataclasses.replace(env.settings, mmv="off", affine_mv=False, word_gemv=True)
device = "cuda" if torch.cuda.is_available() and not env.settings.triton_interpret else "cpu"
torch.manual_seed(0)
# (n, k, group size, bits): words per group = group size * bits / 32
CASES = [(40, 256, 32, 4), (64, 1024, 64, 2), (1000, 2048, 32, 2), (64, 1024, 64, 4), (64, 1024, 64, 8)]
for bn in (16, 8, 4):
    gemv.GEMV_BNS = (bn,)  # affine rows take the first entry
    plans.clear_all()
    for n, k, gs, bits in CASES:
        wq, s, b = mn.quantize((torch.randn(n, k, device=device) * 0.05).half(), gs, bits)  # fp16 scales, as the failing tests
        x = torch.randn(1, k, device=device, dtype=torch.float16)
        out = mn.quantized_matmul(x, wq, s, b, transpose=True, group_size=gs, bits=bits).double()
        ref = x.double() @ mn.dequantize(wq, s, b, gs, bits).double().T
        err = ((out - ref).abs().max() / ref.abs().max()).item()
        print(f"BN {bn:2d}  n {n:5d} k {k:5d} group {gs:3d} bits {bits}  words/group {gs * bits // 32:2d}  "
              f"rel err {err:.1e}{'  WRONG' if err > 0.05 else ''}")
