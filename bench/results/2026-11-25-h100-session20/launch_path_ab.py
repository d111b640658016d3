"""rms_norm 1x576 graph replay: is the 25-35 ns to torch.compile in our kernel or in how it is launched?
(1) mn.rms_norm; (2) our norm kernel through kernel[grid] (Triton's JIT path), same arguments;
(3) lean_norm's runtime_k through kernel[grid]; (4) runtime_k through our Launch; (5) torch.compile.
32 rotating sets, 4 interleaved rounds, best of each."""
import os, sys
sys.path.insert(0, "bench")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import common
import mlx_native as mn
from mlx_native.kernels.launch import Launch
from mlx_native.ops.norms import api as napi
from mlx_native.ops.norms.kernel import _norm_kernel
from peers import compiled, torch_rms_norm
from lean_norm_kernels import runtime_k

D, DT, S = "cuda", torch.bfloat16, 32
sets = [(torch.randn(1, 576, device=D, dtype=DT), torch.randn(576, device=D, dtype=DT)) for _ in range(S)]
mn.rms_norm(*sets[0], 1e-6)
plan = next(iter(napi._RMS_PLANS.plans.values()))
ln = plan.launch
lean_launch = Launch(runtime_k, (1,), dict(BLOCK=1024), num_warps=8)


def ours_jit(x, w):
    y = torch.empty_like(x)
    _norm_kernel[ln.grid](x, x, w, y, y, *plan.ints, plan.inv_n, 1e-6, 0.0, **ln.constexprs, **ln.options)
    return y


def lean_jit(x, w):
    y = torch.empty_like(x)
    runtime_k[(1,)](x, w, y, 576, 1e-6, BLOCK=1024, num_warps=8)
    return y


def lean_ours(x, w):
    y = torch.empty_like(x)
    lean_launch(x, w, y, 576, 1e-6)
    return y


fns = {"mn.rms_norm": lambda x, w: mn.rms_norm(x, w, 1e-6), "our kernel, JIT launch": ours_jit,
       "lean kernel, JIT launch": lean_jit, "lean kernel, our Launch": lean_ours,
       "torch.compile": compiled(lambda x, w: torch_rms_norm(x, w, 1e-6))}
ref = fns["mn.rms_norm"](*sets[0]).float()
for k, f in fns.items():
    assert (f(*sets[0]).float() - ref).abs().max().item() < 0.1, k
best = common.time_graph_rounds(fns, sets, 5)
print("rms_norm 1x576 graph us: " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()), flush=True)
