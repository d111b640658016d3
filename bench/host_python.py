"""Python (host) cost of one eager call of the small ops, kernel launch stubbed out; runs on the CPU.

    python bench/host_python.py [--number N] [--repeat R] [--profile OP]

What it measures: everything an eager call does on the host before the kernel launch (argument
coercion, the torch.library caller, plan key and lookup, backend choice, output allocation, argument
packing) at the decode sizes of ``bench/overhead.py`` (x 1 x 4096 bf16, q 1 x 1 x 32 x 128), but on
CPU tensors and with ``Launch.__call__`` replaced by a no-op, so the number is our Python alone: no
Triton launcher, no CUDA driver, no GPU. ``TRITON_INTERPRET`` is forced on in the settings so that
``use_triton`` takes the kernel path at about the cost it has for CUDA tensors. Each row is the
minimum over ``R`` repeats of ``N`` calls (``timeit``), in microseconds per call; the ``floor:`` rows
are the allocations and the lookups a call cannot do without, for comparison. ``bench/overhead.py``
is the same question asked on the GPU host (launch included).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import timeit

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import mlx_native as mn
from mlx_native.kernels.launch import Launch
from mlx_native.runtime import env


def _stub() -> None:
    """No kernel launches; ``use_triton`` says yes for CPU tensors (the interpreter setting)."""
    Launch.__call__ = lambda self, *args: None
    env.settings = dataclasses.replace(env.settings, triton_interpret=True, nan_fill=False,
                                       backend="auto")


def calls() -> dict:
    x = torch.randn(1, 4096, dtype=torch.bfloat16)
    r = torch.randn(1, 4096, dtype=torch.bfloat16)
    w = torch.randn(4096, dtype=torch.bfloat16)
    gu = torch.randn(1, 8192, dtype=torch.bfloat16)
    gate, up = gu[:, :4096], gu[:, 4096:]  # strided halves of one fused projection
    q = torch.randn(1, 1, 32, 128, dtype=torch.bfloat16)  # [B, L, H, D]
    qh = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16)  # [B, H, L, D] (MLX layout)
    k = torch.randn(1, 1, 8, 128, dtype=torch.bfloat16)
    q3, k3 = q[0], k[0]  # [T, H, D]
    rows = torch.randn(1, 1, 128, dtype=torch.bfloat16)  # [B, L, D]
    w128 = torch.randn(128, dtype=torch.bfloat16)
    pos = torch.tensor([7])
    pos2 = pos[:, None]  # [B, L]: broadcast over the heads of [B, L, H]
    pos3 = pos[:, None, None]
    return {
        "floor: torch.empty(tuple, dtype=, device=)": lambda: torch.empty((1, 4096), dtype=torch.bfloat16,
                                                                          device=x.device),
        "floor: torch.empty_like(x)": lambda: torch.empty_like(x),
        "floor: dict.get((x.shape, x.stride(), x.dtype, x.device))":
            lambda d={}: d.get((x.shape, x.stride(), x.dtype, x.device)),
        "rms_norm": lambda: mn.rms_norm(x, w, 1e-6),
        "add_rms_norm": lambda: mn.add_rms_norm(x, r, w, 1e-6),
        "l2_norm": lambda: mn.l2_norm(x),
        "silu_mul (contiguous)": lambda: mn.silu_mul(x, r),
        "silu_mul (strided halves)": lambda: mn.silu_mul(gate, up),
        "gelu_mul": lambda: mn.gelu_mul(x, r),
        "sigmoid_mul": lambda: mn.sigmoid_mul(x, r),
        "rope (positions, [B,L,H,D])": lambda: mn.rope(q, 128, positions=pos3),
        "rope (positions, [B,L,D] rows)": lambda: mn.rope(rows, 128, positions=pos2),
        "rope (int offset, [B,H,L,D])": lambda: mn.rope(qh, 128, offset=7),
        "rope (tensor offset)": lambda: mn.rope(qh, 128, offset=pos),
        "head_norm_rope": lambda: mn.head_norm_rope(q3, w128, positions=pos),
        "rope_qk (positions)": lambda: mn.rope_qk(q, k, 128, positions=pos3),
        "head_norm_rope_qk": lambda: mn.head_norm_rope_qk(q3, k3, w128, w128, positions=pos),
    }


def rows(number: int, repeat: int) -> list[tuple[str, float]]:
    out = []
    for name, fn in calls().items():
        for _ in range(200):
            fn()
        best = min(timeit.repeat(fn, number=number, repeat=repeat))
        out.append((name, best / number * 1e6))
    return out


def markdown(results: list[tuple[str, float]]) -> str:
    lines = [f"## Host Python per eager call, launch stubbed (CPU, torch {torch.__version__})", "",
             "| call | us |", "|---|---|"]
    lines += [f"| {name} | {us:.2f} |" for name, us in results]
    return "\n".join(lines) + "\n"


def profile(name: str, n: int = 50000) -> None:
    """cProfile of ``n`` calls of the row whose name contains ``name``."""
    common.cprofile(next(f for k, f in calls().items() if name in k), n, top=15)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--profile", nargs="*", default=[])
    args = parser.parse_args()
    _stub()
    print(markdown(rows(args.number, args.repeat)))
    for op in args.profile:
        print(f"### cProfile: {op}")
        profile(op)
