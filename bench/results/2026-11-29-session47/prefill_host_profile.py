"""Session 47 run 9: cProfile of the host side of SmolLM2-shaped batch-1 prefills on CUDA (what the ~17 ms of host
issue in run 8 is made of). Prints the wall time per forward without the profiler, then the top functions by own
time and by cumulative time over 5 forwards of N tokens.

    python prefill_host_profile.py [N]
"""
import cProfile
import os
import pstats
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import model as bm  # noqa: E402  (bench/model.py)

import mlx_native as mn  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 512
path = bm.synthetic_smollm2_gguf(os.path.join(tempfile.mkdtemp(), "smollm2-shaped.gguf"))
model, _ = mn.load(path, device="cuda")
tokens = torch.randint(0, model.vocab_size, (1, n)).cuda()
cache = model.new_cache(1, n)
with torch.inference_mode():
    for _ in range(3):
        cache.reset()
        model.forward(tokens, cache, start=0)
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        cache.reset()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.forward(tokens, cache, start=0)
        ts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    print(f"[host] pp{n}: host issue {min(ts) * 1e3:.2f} ms (best of 5, no profiler)", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(5):
        cache.reset()
        model.forward(tokens, cache, start=0)
    pr.disable()
    torch.cuda.synchronize()
for key in ("tottime", "cumulative"):
    print(f"[host] by {key}", flush=True)
    pstats.Stats(pr, stream=sys.stdout).strip_dirs().sort_stats(key).print_stats(40)
