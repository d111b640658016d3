"""Session 39: would TMA loads (tensor descriptors) move the B8 kv32k decode's read ceiling? Session 31's persistent
two-stream read pattern (128 programs, K and V halves of a column each, 128 x 128 bf16 tiles, software-pipelined,
summed by a dot as in the attention loop) with pointer loads (cp.async) against the same tiles through a host-side
TMA descriptor; the linear read of the same 1 GiB beside them. CUDA-graph replay, best of 3.

    python read_tma.py OUT.json
"""
import json
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/bench")

import common  # noqa: E402
from read_ceiling import read_all  # noqa: E402

N_BYTES = 1 << 30
ROWS = COLS = 128


@triton.jit
def _pointer_kernel(src, out, tiles_per_stream, ROWS: tl.constexpr, COLS: tl.constexpr):
    p = tl.program_id(0).to(tl.int64)
    tile = ROWS * COLS
    k_base = src + (2 * p) * tiles_per_stream * tile
    v_base = src + (2 * p + 1) * tiles_per_stream * tile
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    ones = tl.full([16, ROWS], 1.0, src.dtype.element_ty)
    acc = tl.zeros([16, COLS], tl.float32)
    for t in range(tiles_per_stream):
        acc += tl.dot(ones, tl.load(k_base + t * tile + offs))
        acc += tl.dot(ones, tl.load(v_base + t * tile + offs))
    tl.store(out + p * 16 * COLS + tl.arange(0, 16)[:, None] * COLS + tl.arange(0, COLS)[None, :], acc)


@triton.jit
def _tma_kernel(desc, out, tiles_per_stream, ROWS: tl.constexpr, COLS: tl.constexpr):
    p = tl.program_id(0)
    k_row = (2 * p) * tiles_per_stream * ROWS
    v_row = (2 * p + 1) * tiles_per_stream * ROWS
    ones = tl.full([16, ROWS], 1.0, tl.bfloat16)
    acc = tl.zeros([16, COLS], tl.float32)
    for t in range(tiles_per_stream):
        acc += tl.dot(ones, desc.load([k_row + t * ROWS, 0]))
        acc += tl.dot(ones, desc.load([v_row + t * ROWS, 0]))
    tl.store(out + p * 16 * COLS + tl.arange(0, 16)[:, None] * COLS + tl.arange(0, COLS)[None, :], acc)


def main():
    copy = common.copy_bandwidth()
    words = N_BYTES // 4
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    out = torch.empty(words // 2048, dtype=torch.int32, device="cuda")
    half = src.view(torch.bfloat16)
    desc = TensorDescriptor.from_tensor(half.view(-1, COLS), [ROWS, COLS])
    rows = []

    def record(label, fn):
        t = min(common.time_graph(fn, [()]) for _ in range(3))
        rows.append(dict(pattern=label, us=t, tbps=N_BYTES / (t * 1e-6) / 1e12, frac_copy=N_BYTES / (t * 1e-6) / copy))
        print(f"{label:40s} {t:9.1f} us {rows[-1]['tbps']:.3f} TB/s {100 * rows[-1]['frac_copy']:5.1f}% copy",
              flush=True)

    record("linear", lambda: read_all(src, out))
    for p, stages in ((128, 3), (128, 4), (132, 3), (256, 3), (256, 2)):
        per = half.numel() // (2 * p) // (ROWS * COLS)
        acc = torch.empty(p * 16 * COLS, dtype=torch.float32, device="cuda")
        record(f"pointers {p} x 2 streams, {stages} stages",
               lambda p=p, per=per, acc=acc, s=stages: _pointer_kernel[(p,)](
                   half, acc, per, ROWS=ROWS, COLS=COLS, num_warps=4, num_stages=s))
        record(f"TMA {p} x 2 streams, {stages} stages",
               lambda p=p, per=per, acc=acc, s=stages: _tma_kernel[(p,)](
                   desc, acc, per, ROWS=ROWS, COLS=COLS, num_warps=4, num_stages=s))
    json.dump(dict(copy_bandwidth=copy, rows=rows), open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
