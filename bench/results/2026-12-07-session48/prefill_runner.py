"""Session 48 run 4: the runner's prefill (``generate._prefill``, what ``stream_generate`` runs on a prompt) with and
without its graph rule, on a long prompt in chunks of 512: wall ms, and whether the first chunk was found host-bound
(a PrefillGraph captured). Alternated repeats, into a fresh cache each.

    python prefill_runner.py [--n 4096] [--reps 3]
"""
import argparse
import importlib
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-29-session47"))
from prefill_profile import models  # noqa: E402

gen = importlib.import_module("mlx_native.generate")  # the module (mlx_native.generate is the function)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--step", type=int, default=512)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--layers", type=int, default=16)
    args = ap.parse_args()
    made = []
    real = gen.PrefillGraph
    gen.PrefillGraph = lambda *a, **k: made.append(1) or real(*a, **k)
    gen.PREFILL_GRAPHS_IN_GENERATE = True
    for label, model in models(torch.device("cuda"), args.layers, "mlx-affine-4bit-g64"):
        prompt = torch.randint(0, model.vocab_size, (1, args.n), generator=torch.Generator().manual_seed(1)).cuda()
        times = {False: [], True: []}
        with torch.inference_mode():
            for r in range(args.reps + 1):
                for use_graph in (False, True):
                    cache = model.new_cache(1, args.n)
                    made.clear()
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    logits = gen._prefill(model, cache, prompt, args.step, use_graph)
                    torch.cuda.synchronize()
                    if r:
                        times[use_graph].append((time.perf_counter() - t0) * 1e3)
                    if use_graph:
                        captured = bool(made)
                        got = logits.float()
                    else:
                        want = logits.float()
                    del cache
        diff = (got - want).abs().max().item() / want.abs().max().item()
        print(f"[runner] {label} prompt {args.n} in chunks of {args.step}: eager {min(times[False]):.2f} ms, "
              f"with the graph rule {min(times[True]):.2f} ms (graph captured: {captured}; all reps "
              f"{', '.join(f'{t:.1f}' for t in times[True])}; max |diff| / max |logit| {diff:.1e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
