"""Session 47 run 5: issue 3's B8 Hq64 Hkv8 kv32k D128 bf16 decode on the H200 in 8 interleaved rounds of CUDA-graph
replay: the stream-K kernel's default (H100-tuned (BLOCK_N, warps, stages) = (128, 4, 3), 128 programs) against
other tile configs / program counts, SDPA cuDNN and flash, and one linear read of the same K/V bytes (the ceiling).
Prints each variant's times, median, and the median per-round ratio cuDNN / variant.

    python b8_stream_configs.py
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import attention  # noqa: E402
import common  # noqa: E402
from mlx_native.ops.attention import stream  # noqa: E402

# (name, (BLOCK_N, warps, stages) or None for the default, programs or None for grid_programs' choice)
VARIANTS = [("default", None, None), ("P132", None, 132), ("64x4x4", (64, 4, 4), None), ("64x4x6", (64, 4, 6), None),
            ("64x4x3", (64, 4, 3), None), ("128x8x3", (128, 8, 3), None)]
ROUNDS = 8

case = attention.decode_case(8, 64, 8, 32768, 128)
sets = [case.make() for _ in range(2)]
scale = 128 ** -0.5

def variant(cfg, programs):
    stream.CONFIG_OVERRIDE, stream.PROGRAMS_OVERRIDE = cfg, programs
    try:
        q, k, v, lens = sets[0]
        plan = stream.StreamPlan(q, k, v, lens, window=0, softcap=0.0)
    finally:
        stream.CONFIG_OVERRIDE = stream.PROGRAMS_OVERRIDE = None
    return plan

fns, ref = {}, None
for name, cfg, programs in VARIANTS:
    plan = variant(cfg, programs)
    fns[name] = lambda q, k, v, lens, plan=plan: plan(q, k, v, lens, scale, 0.0)
    q, k, v, lens = sets[0]
    out = fns[name](q, k, v, lens).float()
    ref = case.impls["sdpa cudnn"].fn(q, k, v, lens).float() if ref is None else ref
    print(f"[b8cfg] {name}: {plan.programs} programs, max |ours - cuDNN| {(out - ref).abs().max().item():.2e}",
          flush=True)
for peer in ("sdpa cudnn", "sdpa flash", "ceiling: one read of the same bytes"):
    key = next(k for k in case.impls if k.startswith(peer))
    fns[peer] = case.impls[key].fn
times = {n: [] for n in fns}
for _ in range(ROUNDS):
    for n, fn in fns.items():
        times[n].append(common.time_graph(fn, sets))
cudnn = times["sdpa cudnn"]
for n, ts in times.items():
    ratio = statistics.median(c / t for c, t in zip(cudnn, ts))
    print(f"[b8cfg] {n:40s} " + " ".join(f"{t:7.2f}" for t in ts) + f"  median {statistics.median(ts):7.2f} us, "
          f"cuDNN / this per round: median {ratio:.4f}", flush=True)
