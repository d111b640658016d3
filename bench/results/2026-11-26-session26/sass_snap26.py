"""SASS of the streamed GGUF one-row launches (Q8_0, Q5_K, Q6_K, Q4_0) with and without a partial last step, for a
before/after diff (offline, triton 3.6 sm_90): ``PYTHONPATH=/tmp/tri36/site:<package> python sass_snap26.py out.json``."""
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
for name in ("Q8_0", "Q5_K", "Q6_K", "Q4_0"):
    for (n, k) in [(4096, 4096), (4096, 14336), (1024, 4096), (4096, 11008), (4096, 5376), (576, 1536)]:
        raw = raw_tensor(valid_blocks(name, n, k, rng), "cpu")
        calls[f"{name} M1 {n}x{k}"] = (lambda raw=raw, n=n, k=k, name=name: mn.ggml_matmul(torch.randn(1, k, dtype=bf), raw, name, (n, k)))
out = cb.sass_hashes(calls)
json.dump(out, open(sys.argv[1], "w"), indent=1)
for k, v in out.items(): print(v, k)
