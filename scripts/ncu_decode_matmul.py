"""One decode matmul, called a few times, for Nsight Compute: where a kernel's time goes (stall reasons, memory
throughput, issue slots) when the timings alone do not say.

    ncu --clock-control none --kernel-name regex:mmv_kernel --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section Occupancy \
        python3 scripts/ncu_decode_matmul.py --format affine --m 16 --k 4096 --n 14336

``--format``: ``affine`` (MLX 4-bit g64, ``quantized_matmul``) or a GGUF type name (``ggml_matmul``). The first
call compiles; the script makes ``--calls`` calls on one set of weights (ncu replays the kernel it profiles, so
L2 reuse between calls does not matter); ncu's report names the kernel, so the profile can be matched to a route.
``--mmv on`` forces the tensor-core kernel (``MLX_NATIVE_MMV``), e.g. for 2 rows. Leave ncu's clocks alone
(``--clock-control none``: the device notes say why).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import mlx_native as mn  # noqa: E402
from mlx_native.runtime import env  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", default="affine", help="affine or a GGUF type name (Q4_K, Q4_0, ...)")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=14336)
    ap.add_argument("--calls", type=int, default=6)
    ap.add_argument("--mmv", choices=("auto", "on", "off"), default="auto")
    args = ap.parse_args()
    env.settings = dataclasses.replace(env.settings, mmv=args.mmv)
    x = torch.randn(args.m, args.k, device="cuda", dtype=torch.bfloat16)
    if args.format == "affine":
        w = mn.quantize(torch.randn(args.n, args.k, device="cuda", dtype=torch.bfloat16) * 0.02, 64, 4)
        call = lambda: mn.quantized_matmul(x, *w)  # noqa: E731
    else:
        from quant import gguf_raw  # bench/quant.py: random blocks with sane scale fields

        raw = gguf_raw(args.format, args.n, args.k)
        call = lambda: mn.ggml_matmul(x, raw, args.format, (args.n, args.k))  # noqa: E731
    for _ in range(args.calls):
        call()
    torch.cuda.synchronize()
    print(f"{args.calls} calls of {args.format} M{args.m} K{args.k} N{args.n} (MLX_NATIVE_MMV={args.mmv})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
