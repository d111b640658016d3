"""Session 44: the MoE router's dense bf16 mat-vec (x [1, H] times W [E, H]) as cuBLAS runs it under each torch
spelling, in CUDA-graph replay (100 calls a graph, median of 20 replays): us per call.
(Run 1's profile: F.linear's nvjet kernel took 4.9 us a layer for Qwen3-30B-A3B's 128 x 2048 router.)"""
import statistics

import torch
import torch.nn.functional as F


def per_call(fn, calls=100, reps=20):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


for e, h in ((128, 2048), (256, 2048), (128, 4096), (4096, 4096)):
    w = torch.randn(e, h, device="cuda", dtype=torch.bfloat16) * 0.02
    x = torch.randn(1, h, device="cuda", dtype=torch.bfloat16)
    rows = {"F.linear(x, W)": lambda: F.linear(x, w), "W @ x.T": lambda: w @ x.T, "torch.mv(W, x[0])": lambda: torch.mv(w, x[0]),
            "(x.float() @ W.float().T)": None}
    wf = w.float()
    rows["(x.float() @ W.float().T)"] = lambda: F.linear(x.float(), wf)
    ref = F.linear(x.double(), w.double())
    out = [f"E {e:5d} H {h:5d}:"]
    for name, fn in rows.items():
        err = (fn().double().reshape(ref.shape) - ref).abs().max().item()
        out.append(f"{name} {per_call(fn):6.2f} us (err {err:.1e})")
    print("  ".join(out), flush=True)
