"""Session 32 run 2: the persistent two-per-column read (session 31's decode pattern) with the pair of a column
settling its middle once, at run time.

Run 1 (read_balance.py) found the static pattern's programs ending between 286 and 347 us (median 341), and that
claiming middle tiles one at a time on an atomic counter costs more than it saves (the claim's latency sits in
every pipelined load). Here each program of a column's pair (front: tiles [0, M) of T, back: [T - M, T), M = 3/8 T)
streams its static part, then once: reads how far its partner got (a progress word the partner stores every tile),
proposes the split of the middle [M, T - M) that would end both at once if their rates hold, and settles it with a
compare-and-swap on the column's split word (the first proposal wins; the other program takes the winner's). Then
each streams its side of the split. The split word is re-armed by the last of the pair; progress words by their
owner at its end (a partner's progress is only read while the split is unsettled, i.e. while the owner runs).

Rows: linear, static, rebalance (M = 3/8 T and 1/4 T); per-program start / end stamps (``%globaltimer``) and SM ids
of the last launch of each go to the JSON.

    python read_rebalance.py OUT.json
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
def _sreg(x, NAME: tl.constexpr):
    return tl.inline_asm_elementwise("mov.u64 $0, %" + NAME + ";", "=l,r", [x], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _tiles(acc, ones, k_base, v_base, lo, hi, offs, TILE: tl.constexpr, prog_ptr, done):
    """Tiles [lo, hi) of both streams; the count done so far goes to ``prog_ptr`` after each."""
    for t in range(lo, hi):
        acc += tl.dot(ones, tl.load(k_base + t * TILE + offs))
        acc += tl.dot(ones, tl.load(v_base + t * TILE + offs))
        tl.store(prog_ptr, done + t - lo + 1)
    return acc


@triton.jit
def _pair_kernel(src, out, split, arrive, prog, stamps, T, M, ROWS: tl.constexpr, COLS: tl.constexpr,
                 REBALANCE: tl.constexpr):
    p = tl.program_id(0)
    t0 = _sreg(p, "globaltimer")
    col = p // 2
    back = p % 2
    TILE: tl.constexpr = ROWS * COLS
    k_base = src + col.to(tl.int64) * 2 * T * TILE
    v_base = k_base + T * TILE
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    ones = tl.full([16, ROWS], 1.0, src.dtype.element_ty)
    acc = tl.zeros([16, COLS], tl.float32)
    if REBALANCE:
        lo = tl.where(back == 1, T - M, 0)
        acc = _tiles(acc, ones, k_base, v_base, lo, lo + M, offs, TILE, prog + p, 0)
        theirs = tl.load(prog + (p ^ 1), volatile=True)
        mid = T - 2 * M
        # equal end times at the rates so far (M and theirs tiles in the same time): mine * theirs = (M - theirs
        # + mid - mine) * M, so mine = M (M - theirs + mid) / (M + theirs)
        mine = tl.minimum(M * (M - theirs + mid) // (M + theirs), mid)
        want = tl.where(back == 1, T - M - mine, M + mine)
        old = tl.atomic_cas(split + col, -1, want)
        s = tl.where(old == -1, want, old)
        lo2 = tl.where(back == 1, s, M)
        hi2 = tl.where(back == 1, T - M, s)
        acc = _tiles(acc, ones, k_base, v_base, lo2, hi2, offs, TILE, prog + p, M)
        tl.store(prog + p, 0)
        if tl.atomic_add(arrive + col, 1) == 1:
            tl.store(split + col, -1)
            tl.store(arrive + col, 0)
    else:
        lo = tl.where(back == 1, T // 2, 0)
        for t in range(lo, lo + T // 2):
            acc += tl.dot(ones, tl.load(k_base + t * TILE + offs))
            acc += tl.dot(ones, tl.load(v_base + t * TILE + offs))
    t1 = _sreg(p, "globaltimer")
    tl.store(out + p * 16 * COLS + tl.arange(0, 16)[:, None] * COLS + tl.arange(0, COLS)[None, :], acc)
    tl.store(stamps + 3 * p, t0)
    tl.store(stamps + 3 * p + 1, t1)
    tl.store(stamps + 3 * p + 2, _smid(p).to(tl.int64))


def main():
    copy = common.copy_bandwidth()
    half = torch.randn(N_BYTES // 2, dtype=torch.bfloat16, device="cuda")
    words = half.view(torch.int32)
    lin_out = torch.empty(words.numel() // 2048, dtype=torch.int32, device="cuda")
    T = half.numel() // (2 * COLUMNS) // (ROWS * COLS)
    P = 2 * COLUMNS
    acc = torch.empty(P * 16 * COLS, dtype=torch.float32, device="cuda")
    split = torch.full((COLUMNS,), -1, dtype=torch.int32, device="cuda")
    arrive = torch.zeros(COLUMNS, dtype=torch.int32, device="cuda")
    prog = torch.zeros(P, dtype=torch.int32, device="cuda")
    stamps = torch.zeros(3 * P, dtype=torch.int64, device="cuda")
    rows = []

    def record(label, fn):
        t = min(common.time_graph(fn, [()]) for _ in range(2))
        row = dict(pattern=label, us=t, tbps=N_BYTES / (t * 1e-6) / 1e12)
        fn()
        torch.cuda.synchronize()
        if label != "linear":
            s = stamps.view(-1, 3).cpu()
            t0 = int(s[:, 0].min())
            ends = [(int(e) - t0) / 1e3 for e in s[:, 1]]
            row.update(end_min=min(ends), end_median=statistics.median(ends), end_max=max(ends),
                       ends=ends, smid=s[:, 2].tolist())
            assert int(arrive.abs().sum()) == 0 and int((split + 1).abs().sum()) == 0 and int(prog.abs().sum()) == 0
        rows.append(row)
        print(" ".join(f"{k}={v:.2f}" for k, v in row.items() if isinstance(v, float)), row["pattern"], flush=True)

    def pair(m):
        return lambda: _pair_kernel[(P,)](half, acc, split, arrive, prog, stamps, T, m, ROWS=ROWS, COLS=COLS,
                                          REBALANCE=m > 0, num_warps=4, num_stages=3)

    ref = half.view(COLUMNS, 2, T, ROWS, COLS).float().sum(dim=(1, 2, 3))
    for m in (0, 3 * T // 8, T // 4):
        pair(m)()
        got = acc.view(COLUMNS, 2, 16, COLS)[:, :, 0].sum(1)
        err = float((got - ref).abs().max() / ref.abs().max())
        print(f"M {m}: column sums rel err {err:.1e}", flush=True)
        assert err < 1e-3
    for _ in range(2):
        record("linear", lambda: read_all(words, lin_out))
        record("static", pair(0))
        record("rebalance 3/8", pair(3 * T // 8))
        record("rebalance 1/4", pair(T // 4))
    json.dump(dict(copy_bandwidth=copy, rows=rows), open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
