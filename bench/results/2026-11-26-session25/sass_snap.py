"""SASS of the launches touched by the load-helper refactor, for a before/after diff (offline, triton 3.6 sm_90)."""
import json, sys
sys.path.insert(0, "scripts"); sys.path.insert(0, "tests"); sys.path.insert(0, "tests/ops")
import numpy as np
import torch
import cbank_lines as cb
cb._h100()
import mlx_native as mn
from test_ggml import valid_blocks, raw_tensor

bf = torch.bfloat16
torch.manual_seed(0)
rng = np.random.default_rng(0)

def affine(n, k):
    return mn.quantize(torch.randn(n, k, dtype=bf) * 0.02, 64, 4)

calls = {}
for (n, k) in [(4096, 4096), (4096, 14336), (576, 1536), (4096, 11008), (1024, 14336)]:
    w = affine(n, k)
    calls[f"qmm M1 {n}x{k}"] = (lambda w=w, k=k: mn.quantized_matmul(torch.randn(1, k, dtype=bf), *w))
for m in (4, 16):
    w = affine(4096, 4096)
    calls[f"qmm M{m}"] = (lambda w=w, m=m: mn.quantized_matmul(torch.randn(m, 4096, dtype=bf), *w))
for name, (n, k) in [("Q4_K", (4096, 4096)), ("Q4_K", (4096, 5376)), ("Q4_K", (1024, 2304))]:
    raw = raw_tensor(valid_blocks(name, n, k, rng), "cpu")
    calls[f"{name} M1 {n}x{k}"] = (lambda raw=raw, n=n, k=k, name=name: mn.ggml_matmul(torch.randn(1, k, dtype=bf), raw, name, (n, k)))
    calls[f"{name} M8 {n}x{k}"] = (lambda raw=raw, n=n, k=k, name=name: mn.ggml_matmul(torch.randn(8, k, dtype=bf), raw, name, (n, k)))
raw41 = raw_tensor(valid_blocks("Q4_1", 4096, 4096, rng), "cpu")
calls["Q4_1 M8 4096x4096"] = lambda: mn.ggml_matmul(torch.randn(8, 4096, dtype=bf), raw41, "Q4_1", (4096, 4096))
calls["Q4_1 M1 4096x4096"] = lambda: mn.ggml_matmul(torch.randn(1, 4096, dtype=bf), raw41, "Q4_1", (4096, 4096))
# MoE: 16 experts, hidden 2048, inter 768, top-4, 1 and 3 tokens
E, H, I = 16, 2048, 768
g = mn.quantize(torch.randn(E * I, H, dtype=bf) * 0.02, 64, 4)
u = mn.quantize(torch.randn(E * I, H, dtype=bf) * 0.02, 64, 4)
d = mn.quantize(torch.randn(E * H, I, dtype=bf) * 0.02, 64, 4)
resh = lambda t, e: tuple(a.reshape(e, -1, a.shape[-1]) for a in t)
for t in (1, 3):
    calls[f"moe_ffn T{t}"] = (lambda t=t: mn.moe_ffn(torch.randn(t, H, dtype=bf), torch.randn(t, E), 4, resh(g, E), resh(u, E), resh(d, E)))
out = cb.sass_hashes(calls)
json.dump(out, open(sys.argv[1], "w"), indent=1)
for k, v in out.items(): print(v, k)
