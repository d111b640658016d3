"""The read ceiling of a decode mat-vec: a streaming read of the same bytes (a Triton kernel that loads every 32-bit
word once and writes one XOR per program), timed as the quant rows are (CUDA-graph replay, buffers rotated past L2),
in microseconds and as a fraction of the device-to-device copy bandwidth. Small matrices cannot reach the copy
bandwidth of a 2 GiB copy (launch, ramp-up and tail); this says how close a kernel reading their bytes can get.

    python bench/read_ceiling.py --out DIR [--mib 2.25,4.5,9,18,31.5,63,126]

Writes DIR/read_ceiling.json. 9 and 31.5 MiB are the bytes of the issue's 4-bit decode shapes K x N 4096 x 4096 and
4096 x 14336 (= 14336 x 4096) in MLX g64 (codes + bf16 scales + biases), GGUF Q4_0 and Q4_K alike (4.5 bits a
weight).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from report import CEILING  # noqa: E402

CONFIGS = ((2048, 1), (2048, 4), (4096, 8))  # (words a program loads per iteration, iterations): the best is kept


@triton.jit
def _read_kernel(src, out, n_words, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (BLOCK * ITERS)
    acc = tl.zeros([BLOCK], tl.int32)
    for i in range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc ^= tl.load(src + offs, mask=offs < n_words, other=0)
    tl.store(out + tl.program_id(0), tl.xor_sum(acc, 0))


def read_all(src: torch.Tensor, out: torch.Tensor, block: int = 2048, iters: int = 1) -> torch.Tensor:
    """XOR of every word of ``src`` (int32, flat) per program of ``block * iters`` words into ``out``
    (``cdiv(src.numel(), block * iters)`` words). The defaults: the best of ``CONFIGS`` at 2-126 MiB on the H100
    (session 30 run 5)."""
    _read_kernel[(out.numel(),)](src, out, src.numel(), BLOCK=block, ITERS=iters, num_warps=4)
    return out


def buffers(n_bytes: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(src, out)`` for :func:`read_all` with its default launch: ``n_bytes`` (rounded down to words) of random
    words and the per-program output."""
    words = n_bytes // 4
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device=device)
    return src, torch.empty(math.ceil(words / 2048), dtype=torch.int32, device=device)


READ_CEILING = CEILING + "one read of the same bytes"


def add_read_ceiling(case: common.Case, n_bytes: int) -> common.Case:
    """``case`` with ``READ_CEILING`` timed beside its implementations (a bound: see ``common.Impl``): one streaming
    read of ``n_bytes`` (the weights or K/V the row must read) per call, rotating through as many buffers as the
    case rotates input sets (allocated on the first call), so that no kernel reading those bytes once can beat it
    at this size."""
    sets: list[tuple[torch.Tensor, torch.Tensor]] = []

    def read_next(*_inputs):
        if not sets:
            sets.extend(buffers(n_bytes, common.DEVICE) for _ in range(common.input_set_count(case.bytes)))
        sets.append(sets.pop(0))
        return read_all(*sets[-1])

    case.impls[READ_CEILING] = common.Impl(read_next)
    return case


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mib", default="2.25,4.5,9,18,31.5,63,126")
    a = ap.parse_args()
    copy_bw = common.copy_bandwidth()
    rows = []
    for mib in (float(v) for v in a.mib.split(",")):
        words = int(mib * 2**20) // 4
        srcs = [buffers(4 * words, "cuda")[0] for _ in range(max(2, min(16, math.ceil(256 / mib))))]
        best = None
        for block, iters in CONFIGS:
            out = torch.empty(math.ceil(words / (block * iters)), dtype=torch.int32, device="cuda")
            t = common.time_graph(lambda src, o=out, b=block, i=iters: read_all(src, o, b, i), [(s,) for s in srcs], 20)
            if best is None or t < best[0]:
                best = (t, block, iters)
        t, block, iters = best
        rows.append(dict(mib=mib, bytes=4 * words, us=t, frac_copy=4 * words / (t * 1e-6) / copy_bw, block=block,
                         iters=iters))
        print(f"[read] {mib:8.3f} MiB {t:8.2f} us {100 * rows[-1]['frac_copy']:5.1f}% copy (block {block} x {iters})",
              flush=True)
        del srcs
        torch.cuda.empty_cache()
    os.makedirs(a.out, exist_ok=True)
    common.save_json(os.path.join(a.out, "read_ceiling.json"),
                     dict(environment=common.environment(), copy_bandwidth_Bps=copy_bw, rows=rows))


if __name__ == "__main__":
    main()
