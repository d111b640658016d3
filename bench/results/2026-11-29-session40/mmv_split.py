"""Session 40 run 1 (prepared in session 39 as next_mmv_split.py): ``mmv.py`` at 2-16 rows of MLX 4-bit g64 with K splits that are not
powers of two. Run 5's profile: 448 programs (split 2 of 224 tiles) fill 3.4 of the 5-6 programs a register budget
allows per SM; split 4 (896 programs, 1.13 waves) was no better in run 6. This forces each split count 1-6 (``split_rule``
monkeypatched; the kernel takes uneven splits: ``g_hi`` is clamped) and times the calls against the default route.

    python next_mmv_split.py [--rows 2,4,8,16]
"""
import argparse
import math
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import common  # noqa: E402
from quant import affine_bytes, affine_weight  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.ops.quant import mmv  # noqa: E402
from mlx_native.runtime import plans  # noqa: E402

DT = torch.bfloat16
SHAPES = [(4096, 14336), (14336, 4096), (4096, 4096)]
default_rule = mmv.split_rule


def forced(split):
    def rule(groups, gps, tiles, target, min_steps):
        steps = groups // gps
        per_split = triton.cdiv(steps, split) * gps
        return triton.cdiv(groups, per_split), per_split
    return rule


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="2,4,8,16")
    a = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    copy = common.copy_bandwidth()
    for k, n in SHAPES:
        wbytes = affine_bytes(n, k)
        weights = [affine_weight(n, k) for _ in range(max(2, min(8, math.ceil(256e6 / wbytes))))]
        for m in (int(v) for v in a.rows.split(",")):
            sets = [(torch.randn(m, k, device="cuda", dtype=DT), *w) for w in weights]

            def call(x, wq, s, b):
                return mn.quantized_matmul(x, wq, s, b)

            mmv.split_rule = default_rule
            plans.clear_all()
            ref = call(*sets[0])
            t0 = common.time_graph(call, sets)
            print(f"K{k:<6d} N{n:<6d} M{m:<3d} default route {t0:7.2f} us ({wbytes / t0 * 1e6 / copy * 100:5.1f}% copy)",
                  flush=True)
            for split in range(1, 7):
                mmv.split_rule = forced(split)
                plans.clear_all()
                out = call(*sets[0])
                err = (out.float() - ref.float()).abs().max().item() / ref.float().abs().max().item()
                t = common.time_graph(call, sets)
                tiles = triton.cdiv(n, mmv.MMV_BN_ROWS)
                print(f"    split {split}: {tiles * split / sms:4.1f} programs an SM  {t:7.2f} us  "
                      f"x{t0 / t:5.2f} the default  err {err:.1e}", flush=True)
            mmv.split_rule = default_rule


if __name__ == "__main__":
    main()
