"""Session 27 run 6: issue 3's decode row B8 Hq64 Hkv8 kv32k D128 bf16, ours against SDPA cuDNN and flash, 8
interleaved rounds of CUDA-graph replay (2 input sets of 1.07 GB each), to see the spread of the ratio."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import attention  # noqa: E402
import common  # noqa: E402

case = attention.decode_case(8, 64, 8, 32768, 128)
sets = [case.make() for _ in range(2)]
names = ["mlx-native", "sdpa cudnn", "sdpa flash"]
times = {n: [] for n in names}
for r in range(8):
    for n in names:
        times[n].append(common.time_graph(case.impls[n].fn, sets))
for n in names:
    print(f"[b8] {n:12s} " + " ".join(f"{t:7.2f}" for t in times[n]) + f"  best {min(times[n]):.2f} median "
          f"{statistics.median(times[n]):.2f} us", flush=True)
for peer in names[1:]:
    ratios = [p / o for p, o in zip(times[peer], times["mlx-native"])]
    print(f"[b8] {peer} / ours per round: " + " ".join(f"{x:.4f}" for x in ratios)
          + f"  median {statistics.median(ratios):.4f}; best/best {min(times[peer]) / min(times['mlx-native']):.4f}")
