"""Session 47 run 8: where a batch-1 prefill's time goes (host issue, kernels, syncs).

For the SmolLM2-135M-shaped GGUF (random Q4_1 blocks, ``bench/model.py``'s synthetic file) and a 4-layer
Llama-3-8B-shaped model (MLX 4-bit g64 / GGUF Q4_K): one ``model.forward`` of N prompt tokens into an empty cache,
eager (as ``mlx-native bench``'s ppN). Prints per case: the wall time (median of 5), the host time to issue the
call (``forward`` returning, before the synchronize), the GPU kernel time and kernel count of one call (torch
profiler), the host-device syncs the call makes, and the top kernels.

    python prefill_profile.py [--device cuda] [--prompts 512,2048]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import model as bm  # noqa: E402  (bench/model.py)

import mlx_native as mn  # noqa: E402
from mlx_native.models import LoadOptions, build_model  # noqa: E402

SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync", "cudaEventSynchronize")


def measure(label: str, model, n: int, device: torch.device) -> None:
    on_cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    g = torch.Generator().manual_seed(n)
    tokens = torch.randint(0, model.vocab_size, (1, n), generator=g).to(device)
    cache = model.new_cache(1, n)
    walls, issues = [], []
    with torch.inference_mode():
        for r in range(6):
            cache.reset()
            sync()
            t0 = time.perf_counter()
            model.forward(tokens, cache, start=0)
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            if r:  # the first call compiles
                walls.append(t2 - t0)
                issues.append(t1 - t0)
        cache.reset()
        sync()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
        with profile(activities=acts) as prof:
            model.forward(tokens, cache, start=0)
            sync()
    kernels, syncs = [], {}
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)
        if t and e.count and on_cuda:
            kernels.append((t, e.count, e.key[:80]))
        if any(e.key.startswith(s) for s in SYNC_CALLS):
            syncs[e.key] = e.count
    kernels.sort(reverse=True)
    wall = statistics.median(walls) * 1e3
    k_ms = sum(t for t, _, _ in kernels) / 1e3
    print(f"[pp] {label} pp{n}: wall {wall:.2f} ms ({n / wall * 1e3:.0f} tok/s), host issue "
          f"{statistics.median(issues) * 1e3:.2f} ms, kernels {k_ms:.2f} ms in {sum(c for _, c, _ in kernels)} "
          f"launches ({100 * k_ms / wall:.0f}% of the wall), syncs {syncs}", flush=True)
    for t, c, name in kernels[:10]:
        print(f"[pp]     {t / 1e3:8.3f} ms  x{c:4d}  {name}", flush=True)


def models(device: torch.device, layers: int, kinds: str, smollm2_layers: int = 30):
    """``(label, model)`` of the SmolLM2-135M-shaped GGUF (random Q4_1 blocks, ``smollm2_layers`` layers), then of
    the ``layers``-layer Llama-3-8B-shaped model in each of ``kinds`` (comma-separated), one at a time."""
    bm.SMOLLM2["num_hidden_layers"] = smollm2_layers
    path = bm.synthetic_smollm2_gguf(os.path.join(tempfile.mkdtemp(), "smollm2-shaped.gguf"))
    model, _ = mn.load(path, device=str(device))
    yield "SmolLM2-135M-shaped Q4_1", model
    del model
    for kind in [k for k in kinds.split(",") if k]:
        ckpt = bm.llama8b_checkpoint(layers, kind, device)
        model = build_model(ckpt, LoadOptions(device, torch.bfloat16, keep_quantized=True))
        yield f"Llama-3-8B-shaped {layers} layers {kind}", model
        del model, ckpt
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prompts", default="512,2048")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--kinds", default="mlx-affine-4bit-g64,gguf-Q4_K")
    args = ap.parse_args()
    device = torch.device(args.device)
    prompts = [int(v) for v in args.prompts.split(",")]
    for label, model in models(device, args.layers, args.kinds):
        for n in prompts:
            measure(label, model, n, device)
    return 0

if __name__ == "__main__":
    sys.exit(main())
