"""Hypothesis (run 9: our norm kernel 24 ns slower than a minimal one with near-identical SASS): reading
parameters spread over more 64-byte constant-bank lines costs latency. runtime_k (used params in one line)
vs spread_k (the same, used params over three lines) vs static_k, and mn.rms_norm, graph replay 1x576."""
import os, sys
sys.path.insert(0, "bench")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import common
import mlx_native as mn
from lean_norm_kernels import runtime_k, spread_k, static_k

D, DT, S = "cuda", torch.bfloat16, 32
sets = [(torch.randn(1, 576, device=D, dtype=DT), torch.randn(576, device=D, dtype=DT)) for _ in range(S)]


def rt(x, w):
    y = torch.empty_like(x); runtime_k[(1,)](x, w, y, 576, 1e-6, BLOCK=1024, num_warps=8); return y


def sp(x, w):
    y = torch.empty_like(x); spread_k[(1,)](x, 1, 2, 3, w, 4, 5, 6, y, 7, 8, 9, 10, 576, 1e-6, BLOCK=1024, num_warps=8); return y


def st(x, w):
    y = torch.empty_like(x); static_k[(1,)](x, w, y, N=576, EPS=1e-6, BLOCK=1024, num_warps=8); return y


fns = {"mn.rms_norm": lambda x, w: mn.rms_norm(x, w, 1e-6), "runtime_k": rt, "spread_k": sp, "static_k": st}
best = common.time_graph_rounds(fns, sets, 5)
print("rms_norm 1x576 graph us: " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()), flush=True)
