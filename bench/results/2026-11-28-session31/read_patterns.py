"""Session 31: does the order in which a 1 GiB read visits memory cap the decode attention's bandwidth?

Issue 3's B8 Hkv8 kv32k D128 decode (stream-K, 128 programs, each half a (sequence, KV head) column: two streams,
K and V, of 16k rows x 256 bytes) runs at 3.05 TB/s, cuDNN too; ``bench/read_ceiling.py``'s linear read of the same
1 GiB at 3.16 TB/s. This times reads of one buffer in other orders, all graph-replayed:

* ``linear``: the ceiling kernel (program i reads 8 KiB block i);
* ``streams S``: the same blocks, program i reading block ``(i % S) * (nb / S) + i // S``: the resident programs
  walk S regions at once, as S persistent programs would;
* ``persistent P x 2``: P programs, each streaming two regions (a "K" and a "V" half of its share) in 32 KiB
  tiles, software-pipelined (``num_stages``) as the decode loop is.

    python read_patterns.py OUT.json
"""
import json
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/bench")

import common  # noqa: E402
from read_ceiling import read_all  # noqa: E402

N_BYTES = 1 << 30
BLOCK = 2048  # words of the linear / strided read per program


@triton.jit
def _strided_kernel(src, out, nb, S: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    blk = (i % S) * (nb // S) + i // S
    offs = blk.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.xor_sum(tl.load(src + offs), 0))


@triton.jit
def _persistent_kernel(src, out, tiles_per_stream, ROWS: tl.constexpr, COLS: tl.constexpr):
    """Program p: tiles [ROWS, COLS] int16 of two streams (its "K" and "V" regions), alternating, as the decode
    loop does; the tiles are summed by a dot so that the pipeliner treats the loads as the attention's."""
    p = tl.program_id(0).to(tl.int64)
    tile = ROWS * COLS
    k_base = src + (2 * p) * tiles_per_stream * tile
    v_base = src + (2 * p + 1) * tiles_per_stream * tile
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    ones = tl.full([16, ROWS], 1.0, src.dtype.element_ty)
    acc = tl.zeros([16, COLS], tl.float32)
    for t in range(tiles_per_stream):
        k = tl.load(k_base + t * tile + offs)
        acc += tl.dot(ones, k)
        v = tl.load(v_base + t * tile + offs)
        acc += tl.dot(ones, v)
    tl.store(out + p * 16 * COLS + tl.arange(0, 16)[:, None] * COLS + tl.arange(0, COLS)[None, :], acc)


def main():
    copy = common.copy_bandwidth()
    words = N_BYTES // 4
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    nb = words // BLOCK
    out = torch.empty(nb, dtype=torch.int32, device="cuda")
    rows = []

    def record(label, fn):
        t = min(common.time_graph(fn, [()]) for _ in range(2))
        rows.append(dict(pattern=label, us=t, tbps=N_BYTES / (t * 1e-6) / 1e12, frac_copy=N_BYTES / (t * 1e-6) / copy))
        print(f"{label:34s} {t:9.1f} us {rows[-1]['tbps']:.3f} TB/s {100 * rows[-1]['frac_copy']:5.1f}% copy",
              flush=True)

    record("linear", lambda: read_all(src, out))
    for s in (64, 128, 256, 512):
        record(f"streams {s}", lambda s=s: _strided_kernel[(nb,)](src, out, nb, S=s, BLOCK=BLOCK, num_warps=4))
    half = src.view(torch.bfloat16)
    for p, stages in ((128, 3), (132, 3), (128, 2), (128, 4), (256, 2)):
        tile_elems = 128 * 128
        per = half.numel() // (2 * p) // tile_elems
        acc = torch.empty(p * 16 * 128, dtype=torch.float32, device="cuda")
        record(f"persistent {p} x 2 streams, {stages} stages",
               lambda p=p, per=per, acc=acc, stages=stages: _persistent_kernel[(p,)](
                   half, acc, per, ROWS=128, COLS=128, num_warps=4, num_stages=stages))
    json.dump(dict(copy_bandwidth=copy, rows=rows), open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
