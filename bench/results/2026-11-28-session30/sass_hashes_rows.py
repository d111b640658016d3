"""Session 30 review: SASS hashes (offline sm_90, PYTHONPATH=/tmp/tri36/site:src) of affine_idot_rows with prefetch
off / on, 2-3 rows, bf16 / fp16; the review (one PREFETCH branch, the 16-bit type taken before the loop) left all six
identical."""
import json, sys
sys.path.insert(0, "/work/main/scripts"); sys.path.insert(0, "/work/main/bench")
import torch
import cbank_lines as cb
import mlx_native as mn
from mlx_native.ops.quant import affine_idot_rows as ar
import common; common.DEVICE = "cpu"
cb._h100()
torch.manual_seed(0)
bf, f16 = torch.bfloat16, torch.float16
def q(n, k, dt=bf):
    return mn.quantize(torch.randn(n, k, dtype=dt) * 0.02, 64, 4)
qa = q(2048, 4096); qf = q(2048, 4096, f16)
calls = {}
for pf in (False, True):
    for m in (2, 3):
        calls[f"rows pf{pf} m{m} bf16"] = (lambda pf=pf, m=m: ar.AffineIdotRowsLaunch(m, 2048, 4096, 64, bf, 4096, "cpu", prefetch=pf)(torch.randn(m, 4096, dtype=bf), qa[0].view(torch.int32), *qa[1:]))
    calls[f"rows pf{pf} fp16"] = (lambda pf=pf: ar.AffineIdotRowsLaunch(2, 2048, 4096, 64, f16, 4096, "cpu", prefetch=pf)(torch.randn(2, 4096, dtype=f16), qf[0].view(torch.int32), *qf[1:]))
print(json.dumps(cb.sass_hashes(calls), indent=1))
