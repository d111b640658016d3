"""Why rms_norm 1x576 is 25-35 ns behind torch.compile's kernel (1.41 vs 1.38 us, graph replay; run 4):
minimal kernels that differ in one thing each, timed against ours and torch.compile in one run.

A static: n_cols, eps constexpr (inductor's form: its kernel bakes r0_numel = 576 in), 3 pointer params;
B runtime: n_cols, eps runtime args (5 params);
C runtime + 16 unused int params (21 params, as many as our norm kernel's);
"""
import os
import sys
sys.path.insert(0, "bench")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import triton
import common
import mlx_native as mn
from peers import compiled, torch_rms_norm
from lean_norm_kernels import many_k, runtime_k, static_k


D, DT, S = "cuda", torch.bfloat16, 32
for n in (576, 4096):
    sets = [(torch.randn(1, n, device=D, dtype=DT), torch.randn(n, device=D, dtype=DT)) for _ in range(S)]
    blk = triton.next_power_of_2(n)
    fns = {
        "torch.compile": compiled(lambda x, w: torch_rms_norm(x, w, 1e-6)),
        "mn.rms_norm": lambda x, w: mn.rms_norm(x, w, 1e-6),
    }
    for warps in (4, 8):
        def st(x, w, warps=warps):
            y = torch.empty_like(x); static_k[(1,)](x, w, y, N=n, EPS=1e-6, BLOCK=blk, num_warps=warps); return y

        def rt(x, w, warps=warps):
            y = torch.empty_like(x); runtime_k[(1,)](x, w, y, n, 1e-6, BLOCK=blk, num_warps=warps); return y

        def many(x, w, warps=warps):
            y = torch.empty_like(x); many_k[(1,)](x, w, y, n, 1e-6, *range(16), BLOCK=blk, num_warps=warps); return y
        fns[f"A static {warps}w"] = st
        fns[f"B runtime {warps}w"] = rt
        fns[f"C runtime+16 {warps}w"] = many
    ref = fns["mn.rms_norm"](*sets[0]).float()
    for k, f in fns.items():
        assert (f(*sets[0]).float() - ref).abs().max().item() < 0.1, k
    best = common.time_graph_rounds(fns, sets, 4)
    print(f"1x{n}: " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()), flush=True)
