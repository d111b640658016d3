"""SASS hashes of the MLX 3/5/6-bit one-row launches (affine_mv_odd) with and without a partial last step, for a
before/after diff, and each launch's spill bytes (offline, triton 3.6 sm_90):
``PYTHONPATH=/tmp/tri36/site:<package> python sass_odd.py out.json``."""
import json, sys
sys.path.insert(0, "scripts")
import torch
import cbank_lines as cb
cb._h100()
import mlx_native as mn

bf = torch.bfloat16
torch.manual_seed(0)
calls = {}
for bits in (3, 5, 6):
    for (k, n) in [(4096, 14336), (14336, 4096), (11008, 4096), (18944, 3584), (2560, 9728)]:
        wq = mn.quantize(torch.randn(n, k, dtype=bf) * 0.02, 64, bits)
        calls[f"mlx{bits} M1 {k}x{n}"] = (lambda wq=wq, k=k, bits=bits:
                                          mn.quantized_matmul(torch.randn(1, k, dtype=bf), *wq, bits=bits))
out = cb.sass_hashes(calls)
json.dump(out, open(sys.argv[1], "w"), indent=1)
for k, v in out.items(): print(v, k)
