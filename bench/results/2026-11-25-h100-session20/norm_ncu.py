"""rms_norm 1x576: our kernel, a minimal runtime-shape kernel (lean_norm.py's runtime_k) and torch.compile's,
5 calls each, for ncu (durations, registers, shared memory); with --sass DIR also writes the SASS the device
compiled for ours and for the minimal kernel."""
import os, subprocess, sys
sys.path.insert(0, "bench")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import triton
import mlx_native as mn
from mlx_native.ops.norms import api as napi
from peers import compiled, torch_rms_norm
from lean_norm_kernels import runtime_k

x = torch.randn(1, 576, device="cuda", dtype=torch.bfloat16)
w = torch.randn(576, device="cuda", dtype=torch.bfloat16)
f = compiled(lambda x, w: torch_rms_norm(x, w, 1e-6))
for _ in range(5):
    mn.rms_norm(x, w, 1e-6)
    y = torch.empty_like(x)
    lean = runtime_k[(1,)](x, w, y, 576, 1e-6, BLOCK=1024, num_warps=8)
    f(x, w)
torch.cuda.synchronize()
if len(sys.argv) > 2 and sys.argv[1] == "--sass":
    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    plan = next(iter(napi._RMS_PLANS.plans.values()))
    ours = next(iter(plan.launch.compiled.values()))
    for name, k in (("ours", ours), ("lean", lean)):
        path = os.path.join(sys.argv[2], f"{name}.cubin")
        open(path, "wb").write(k.asm["cubin"])
        out = subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True).stdout
        open(os.path.join(sys.argv[2], f"{name}.sass"), "w").write(out)
        print(name, "shared", k.metadata.shared, "regs", getattr(k, "n_regs", None), "ttir sig lines:",
              [l for l in k.asm["ttir"].splitlines() if "tt.func public" in l][0][:400])
