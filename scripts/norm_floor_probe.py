"""Where does rms_norm 1x576 lose 80 ns to torch.compile? (GPU, developer tool)

Graph-replay time per call (bench/common.time_graph, best of 3 rounds) of: ``mn.rms_norm``, torch.compile of
the same math, and a minimal Triton kernel (three pointers, the column count a constant, one program) with
1-8 warps, with and without 13 unused scalar arguments (our kernel's count). If the minimal kernel matches
torch.compile, our kernel's body or arguments cost the difference; if not, the difference is in how the
compiled peer is launched.

    python scripts/norm_floor_probe.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import common  # noqa: E402
import mlx_native as mn  # noqa: E402
from peers import compiled, torch_rms_norm  # noqa: E402


@triton.jit
def _rms_row(x_ptr, w_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    ok = cols < N
    x = tl.load(x_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-6) * w
    tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _rms_min(x_ptr, w_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    _rms_row(x_ptr, w_ptr, y_ptr, N, BLOCK)


@triton.jit
def _rms_min_args(x_ptr, w_ptr, y_ptr, a0, a1, a2, a3, a4, a5, a6, a7, f0, f1, f2, f3, f4,
                  N: tl.constexpr, BLOCK: tl.constexpr):
    _rms_row(x_ptr, w_ptr, y_ptr, N, BLOCK)


def main() -> None:
    n = 576
    sets = [(torch.randn(1, n, device="cuda", dtype=torch.bfloat16), torch.randn(n, device="cuda",
                                                                                 dtype=torch.bfloat16))
            for _ in range(64)]
    peer = compiled(torch_rms_norm)
    impls = {"mlx-native rms_norm": lambda x, w: mn.rms_norm(x, w, eps=1e-6),
             "torch.compile": lambda x, w: peer(x, w, 1e-6)}
    for warps in (1, 2, 4, 8):
        def run(x, w, warps=warps):
            y = torch.empty_like(x)
            _rms_min[(1,)](x, w, y, N=n, BLOCK=1024, num_warps=warps)
            return y

        def run_args(x, w, warps=warps):
            y = torch.empty_like(x)
            _rms_min_args[(1,)](x, w, y, 1, 2, 3, 4, 5, 6, 7, 8, 1.0, 2.0, 3.0, 4.0, 5.0, N=n, BLOCK=1024,
                                num_warps=warps)
            return y
        impls[f"minimal triton {warps} warps"] = run
        impls[f"minimal triton {warps} warps + 13 args"] = run_args
    best = {}
    for _ in range(3):
        for name, fn in impls.items():
            t = common.time_graph(fn, sets)
            best[name] = min(t, best.get(name, t))
    for name, t in sorted(best.items(), key=lambda kv: kv[1]):
        print(f"{name:40s} {t:6.3f} us", flush=True)


if __name__ == "__main__":
    main()
