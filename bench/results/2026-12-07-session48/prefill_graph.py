"""Session 48 run 2 (session 47 run 10 again, start=None chunks now on flash_attn_prefill(kv_lens=)): what does
a batch-1 prefill chunk cost eager against replayed from a CUDA graph?

``model.forward(tokens, cache)`` with ``start=None`` reads the positions from the cache's device lengths and attends
through ``flash_attn_prefill(kv_lens=)`` (from 9 tokens), so no host value is baked in and the call
can be captured. For each model and chunk length L this times, into an empty cache:
  * ``eager start=0``: today's prefill (``flash_attn_prefill``, host-known positions), as ``mlx-native bench``'s ppL;
  * ``eager start=None``: the device-driven forward, eager;
  * ``graph start=None``: the same captured once, then ``cache.reset()`` + ``replay()`` per call;
and checks the graph's logits against today's prefill (max |diff| / max |logit|).

    python prefill_graph.py [--lengths 128,512,2048] [--device cuda]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-29-session47"))
from prefill_profile import models  # noqa: E402


def timed(fn, sync, reps=7) -> float:
    ts = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts[1:]) * 1e3


def case(label: str, model, n: int, device: torch.device) -> None:
    on_cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    tokens = torch.randint(0, model.vocab_size, (1, n), generator=torch.Generator().manual_seed(n)).to(device)
    cache = model.new_cache(1, n)

    def eager(start):
        def run():
            cache.reset()
            return model.forward(tokens, cache, start=start)
        return run

    with torch.inference_mode():
        ref = eager(0)().float()
        got = eager(None)().float()
        scale = ref.abs().max().item()
        line = (f"[graph] {label} L{n}: eager start=0 {timed(eager(0), sync):.2f} ms, eager start=None "
                f"{timed(eager(None), sync):.2f} ms (max |diff| / max |logit| {(got - ref).abs().max().item() / scale:.1e})")
        if on_cuda:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    eager(None)()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            cache.reset()
            with torch.cuda.graph(graph):
                out = model.forward(tokens, cache)

            def replay():
                cache.reset()
                graph.replay()
            replay()
            sync()
            err = (out.float() - ref).abs().max().item() / scale
            line += f", graph start=None {timed(replay, sync):.2f} ms (max |diff| / max |logit| {err:.1e})"
            del graph
        print(line, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--lengths", default="128,512,2048")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--kinds", default="mlx-affine-4bit-g64")
    ap.add_argument("--smollm2-layers", type=int, default=30)
    args = ap.parse_args()
    device = torch.device(args.device)
    lengths = [int(v) for v in args.lengths.split(",")]
    for label, model in models(device, args.layers, args.kinds, args.smollm2_layers):
        for n in lengths:
            case(label, model, n, device)
    return 0

if __name__ == "__main__":
    sys.exit(main())
