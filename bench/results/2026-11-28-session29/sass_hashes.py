"""SASS hashes (offline sm_90, PYTHONPATH=/tmp/tri36/site:src for triton 3.6) of the kernels session 29 changed, for
before / after diffs of a refactor: the final review (half16, word_ptrs in kernels.words) left all eight identical."""
import dataclasses
import json
import os
import sys
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts")); sys.path.insert(0, os.path.join(ROOT, "bench"))
import torch
import cbank_lines as cb
import mlx_native as mn
from mlx_native.runtime import env
from mlx_native.ops.quant import affine_idot
import common; common.DEVICE = "cpu"
import quant
cb._h100()
bf, f16 = torch.bfloat16, torch.float16
env.settings = dataclasses.replace(env.settings, mmv="auto")
torch.manual_seed(0)
def q(n, k, gs, dt=bf):
    return mn.quantize(torch.randn(n, k, dtype=dt) * 0.02, gs, 4)
qa = q(14336, 4096, 64); qb = q(4096, 14336, 64); q32 = q(4096, 4096, 32); q128 = q(4096, 4096, 128)
qh = q(4096, 11008, 64); q16 = q(14336, 4096, 64, f16)
x16 = torch.randn(16, 4096, dtype=bf); x1 = torch.randn(1, 4096, dtype=bf); x1b = torch.randn(1, 14336, dtype=bf)
x1h = torch.randn(1, 11008, dtype=bf); x4 = torch.randn(4, 4096, dtype=bf); x1f = torch.randn(1, 14336, dtype=f16)
raw = quant.gguf_raw("Q4_K", 14336, 4096)
calls = {
    "mmv affine g64 M16": lambda: mn.quantized_matmul(x16, *qa),
    "mmv affine g32 M4": lambda: mn.quantized_matmul(x4, *q32, group_size=32),
    "mmv affine g128 M16": lambda: mn.quantized_matmul(x16, *q128, group_size=128),
    "mmv Q4_K M16": lambda: mn.ggml_matmul(x16, raw, "Q4_K", (14336, 4096)),
    "idot words 14336x4096": lambda: mn.quantized_matmul(x1b, *qb),
    "idot fp16 words": lambda: mn.quantized_matmul(x1f, *mn.quantize(torch.randn(4096, 14336, dtype=f16) * 0.02, 64, 4)),
    "idot tail 11008": lambda: mn.quantized_matmul(x1h, *qh),
    "idot gate/up": lambda: affine_idot.AffineIdotLaunch(4096, 14336, 64, bf, "cpu", act=0)(x1b, qb[0].view(torch.int32), *qb[1:], qb[0].view(torch.int32), *qb[1:]),
}
print(json.dumps(cb.sass_hashes(calls), indent=1))
