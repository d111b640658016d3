"""Session 32: is the 1.4% between session 31's persistent read pattern (347.5 us) and the linear read of the same
1 GiB (339.4 us) the persistent programs' unequal finish times, and would a dynamic split of each column recover it?

Issue 3's B8 Hkv8 kv32k decode runs 128 resident programs, two per (sequence, KV head) column, each streaming half a
column's K and V. Here, on one 1 GiB buffer laid out as 64 columns of (K region, V region), 256 tiles of 128 x 128
bf16 each:

* ``static``: session 31's persistent pattern (program p reads tiles [p % 2 * 128, +128) of column p // 2, K and V
  alternating, 3-stage pipelined), with a ``%globaltimer`` stamp at each program's start and end: the spread of the
  end times is the tail a static split pays;
* ``meet R``: the pair of a column splits its middle ``2 R`` tiles at run time: each program takes ``128 - R`` tiles
  from its end statically, then claims the middle tiles one at a time on the column's counter (the front program
  from the front, the back program from the back; claims past ``2 R`` are empty), so the program that streams faster
  takes more.

    python read_balance.py OUT.json
"""
import json
import statistics
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/bench")

import common  # noqa: E402
from read_ceiling import read_all  # noqa: E402

N_BYTES = 1 << 30
COLUMNS = 64
ROWS = COLS = 128


@triton.jit
def _now(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def _tile(acc, ones, base, t, offs, TILE: tl.constexpr, mask):
    return acc + tl.dot(ones, tl.load(base + t * TILE + offs, mask=mask, other=0.0))


@triton.jit
def _pair_kernel(src, out, cnt, stamps, T, R, ROWS: tl.constexpr, COLS: tl.constexpr, DYNAMIC: tl.constexpr,
                 NCOL: tl.constexpr):
    """Program p: column p // 2, from the front (p even) or the back; T tiles per region, R of them per program
    claimed at run time (DYNAMIC)."""
    p = tl.program_id(0)
    t0 = _now(p)
    col = (p // 2).to(tl.int64)
    back = p % 2
    TILE: tl.constexpr = ROWS * COLS
    k_base = src + col * 2 * T * TILE
    v_base = k_base + T * TILE
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    ones = tl.full([16, ROWS], 1.0, src.dtype.element_ty)
    acc = tl.zeros([16, COLS], tl.float32)
    S = T // 2 - R
    for j in range(S):
        t = tl.where(back == 1, T - 1 - j, j)
        acc = _tile(acc, ones, k_base, t, offs, TILE, j >= 0)
        acc = _tile(acc, ones, v_base, t, offs, TILE, j >= 0)
    if DYNAMIC:
        for j in range(2 * R):
            claim = tl.atomic_add(cnt + col, 1, sem="relaxed")
            ok = claim < 2 * R
            t = tl.where(back == 1, T - 1 - S - j, S + j)
            acc = _tile(acc, ones, k_base, t, offs, TILE, ok)
            acc = _tile(acc, ones, v_base, t, offs, TILE, ok)
        if tl.atomic_add(cnt + NCOL + col, 1) == 1:  # both done: re-arm the column's counters
            tl.store(cnt + col, 0)
            tl.store(cnt + NCOL + col, 0)
    t1 = _now(p)
    tl.store(out + p * 16 * COLS + tl.arange(0, 16)[:, None] * COLS + tl.arange(0, COLS)[None, :], acc)
    tl.store(stamps + 2 * p, t0)
    tl.store(stamps + 2 * p + 1, t1)


def spread(stamps: torch.Tensor) -> dict:
    """End-time statistics (us after the earliest start) of the last launch's programs."""
    s = stamps.view(-1, 2).double().cpu()
    t0 = s[:, 0].min()
    ends = ((s[:, 1] - t0) / 1e3).tolist()
    starts = ((s[:, 0] - t0) / 1e3).tolist()
    return dict(start_max=max(starts), end_min=min(ends), end_median=statistics.median(ends), end_max=max(ends))


def main():
    copy = common.copy_bandwidth()
    half = torch.randn(N_BYTES // 2, dtype=torch.bfloat16, device="cuda")
    words = half.view(torch.int32)
    lin_out = torch.empty(words.numel() // 2048, dtype=torch.int32, device="cuda")
    T = half.numel() // (2 * COLUMNS) // (ROWS * COLS)
    P = 2 * COLUMNS
    acc = torch.empty(P * 16 * COLS, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(2 * COLUMNS, dtype=torch.int32, device="cuda")
    stamps = torch.zeros(2 * P, dtype=torch.int64, device="cuda")
    rows = []

    def record(label, fn):
        t = min(common.time_graph(fn, [()]) for _ in range(2))
        row = dict(pattern=label, us=t, tbps=N_BYTES / (t * 1e-6) / 1e12)
        fn()
        torch.cuda.synchronize()
        if label != "linear":
            row.update(spread(stamps))
            assert int(cnt.abs().sum()) == 0, "counters not re-armed"
        rows.append(row)
        print(" ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)

    def pair(r, dynamic):
        return lambda: _pair_kernel[(P,)](half, acc, cnt, stamps, T, r, ROWS=ROWS, COLS=COLS, DYNAMIC=dynamic, NCOL=COLUMNS,
                                          num_warps=4, num_stages=3)

    # the sums check the split: every tile read once (the dot by ones sums each tile's columns)
    ref = half.view(COLUMNS, 2, T, ROWS, COLS).float().sum(dim=(1, 2, 3))
    for r in (0, 4, 16):
        pair(r, r > 0)()
        got = acc.view(COLUMNS, 2, 16, COLS)[:, :, 0].sum(1)
        err = float((got - ref).abs().max() / ref.abs().max())
        print(f"meet {r}: column sums rel err {err:.1e}", flush=True)
        assert err < 1e-3
    for _ in range(2):
        record("linear", lambda: read_all(words, lin_out))
        record("static", pair(0, False))
        for r in (4, 16):
            record(f"meet {r}", pair(r, True))
    json.dump(dict(copy_bandwidth=copy, rows=rows), open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
