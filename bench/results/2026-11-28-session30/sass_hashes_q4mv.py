"""Session 30 final review: SASS hashes (offline sm_90, PYTHONPATH=/tmp/tri36/site:src) of q4_mv, Q4_0 / Q4_1 at 1-4
rows; replacing its local fp16-from-word helper by kernels.words.half_lo left all eight identical."""
import json, sys
sys.path.insert(0, "/work/main/scripts"); sys.path.insert(0, "/work/main/bench")
import torch
import cbank_lines as cb
import common; common.DEVICE = "cpu"
import quant
from mlx_native.ops.ggml import q4_mv
cb._h100()
torch.manual_seed(0)
calls = {}
for name, tid in (("Q4_0", 2), ("Q4_1", 3)):
    raw = quant.gguf_raw(name, 512, 4096)
    for m in (1, 2, 3, 4):
        calls[f"{name} m{m}"] = (lambda raw=raw, m=m, tid=tid: q4_mv.Q4MvLaunch(tid, 512, 4096, torch.bfloat16, "cpu", m=m)(torch.randn(m, 4096, dtype=torch.bfloat16), raw))
print(json.dumps(cb.sass_hashes(calls), indent=1))
