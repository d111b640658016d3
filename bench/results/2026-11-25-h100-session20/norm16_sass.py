"""rms_norm 16x8192 got 100 ns slower with N / INV_N constexpr and eps first (runs 11-12) while offline SASS is
leaner: time it again (new vs main) and write the SASS the device compiled for each."""
import os, subprocess, sys
sys.path.insert(0, "bench")
sys.path.insert(0, "snap")
import torch
import triton
import common
import mlx_native as mn
import mlx_native_main as old
from mlx_native.ops.norms import api as napi
from mlx_native_main.ops.norms import api as oapi

D, DT, S = "cuda", torch.bfloat16, 32
nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
for rows, n in ((16, 8192), (16, 4096)):
    sets = [(torch.randn(rows, n, device=D, dtype=DT), torch.randn(n, device=D, dtype=DT)) for _ in range(S)]
    fns = {"new": lambda x, w: mn.rms_norm(x, w, 1e-6), "main": lambda x, w: old.rms_norm(x, w, 1e-6)}
    best = common.time_graph_rounds(fns, sets, 6)
    print(f"rms_norm {rows}x{n}: new {best['new']:.3f}, main {best['main']:.3f}", flush=True)
    for name, api in (("new", napi), ("main", oapi)):
        plan = [p for k, p in api._RMS_PLANS.plans.items() if k[0] == (rows, n)][0]
        ck = next(iter(plan.launch.compiled.values()))
        path = os.path.join(os.environ["OUT"], f"{name}_{rows}x{n}.cubin")
        open(path, "wb").write(ck.asm["cubin"])
        sass = subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True).stdout
        open(path.replace(".cubin", ".sass"), "w").write(sass)
        os.unlink(path)
        print(name, plan.launch.grid, plan.launch.options, plan.launch.constexprs, "regs", ck.n_regs, "shared", ck.metadata.shared)
