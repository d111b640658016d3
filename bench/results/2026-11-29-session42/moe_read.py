"""Session 42: the read ceiling of the MoE decode step's gate/up phase (moe_phases.py: 7.05 us alone, its 12.6 MB at
copy 3.36 us). Kernels that only read what the routed gate/up kernel reads (8 slots' experts of [128, 768, 2048] 4-bit
gate and up words, scales and biases) in its pattern (a program a slot and tile of BN rows of both matrices, 16-byte
loads, 4 words a thread) and store one sum a program; against one linear read of the same bytes. CUDA-graph replay,
4 routing sets (32 experts, 75 MB: past L2)."""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import common  # noqa: E402

E, TOPK, HIDDEN, INTER, GS = 128, 8, 2048, 768, 64
W = HIDDEN // 8  # words a row


@triton.jit
def routed_read(ids_ptr, g_ptr, u_ptr, gs_ptr, us_ptr, out_ptr, BN: tl.constexpr, W: tl.constexpr,
                NS: tl.constexpr, SCALES: tl.constexpr):
    pid = tl.program_id(0)
    slot = tl.program_id(1)
    e = tl.load(ids_ptr + slot).to(tl.int64)
    rows = pid * BN + tl.arange(0, BN)
    off = e * (INTER_C * W) + rows[None, :] * W + tl.arange(0, W)[:, None]
    g = tl.load(g_ptr + off)
    u = tl.load(u_ptr + off)
    acc = tl.sum(tl.sum(g ^ u, axis=0), axis=0)
    if SCALES:
        soff = e * (INTER_C * NS) + rows[None, :] * NS + tl.arange(0, NS)[:, None]
        acc += tl.sum(tl.sum(tl.load(gs_ptr + soff) ^ tl.load(us_ptr + soff), axis=0), axis=0)
    tl.store(out_ptr + slot * tl.num_programs(0) + pid, acc)


INTER_C: tl.constexpr = tl.constexpr(INTER)
HIDDEN_C: tl.constexpr = tl.constexpr(HIDDEN)


@triton.jit
def down_read(ids_ptr, d_ptr, ds_ptr, out_ptr, BN: tl.constexpr, WD: tl.constexpr, WP: tl.constexpr,
              NS: tl.constexpr, TOPK: tl.constexpr):
    """The mixing down projection's pattern: a program reads BN rows of all TOPK slots' experts (rows of WD words,
    padded to WP lanes), scales and biases (NS words a row)."""
    pid = tl.program_id(0)
    slot = tl.arange(0, TOPK)
    e = tl.load(ids_ptr + slot).to(tl.int64)
    rows = pid * BN + tl.arange(0, BN)
    c = tl.arange(0, WP)
    off = e[:, None, None] * (HIDDEN_C * WD) + rows[None, None, :] * WD + c[None, :, None]
    d = tl.load(d_ptr + off, mask=(c < WD)[None, :, None], other=0)
    soff = e[:, None, None] * (HIDDEN_C * NS) + rows[None, None, :] * NS + tl.arange(0, NS)[None, :, None]
    acc = tl.sum(tl.sum(tl.sum(d, axis=0), axis=0), axis=0) + tl.sum(tl.sum(tl.sum(tl.load(ds_ptr + soff), axis=0),
                                                                          axis=0), axis=0)
    tl.store(out_ptr + pid, acc)


@triton.jit
def linear_read(p, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(pid * BLOCK, n, tl.num_programs(0) * BLOCK):
        acc ^= tl.load(p + i + tl.arange(0, BLOCK), mask=i + tl.arange(0, BLOCK) < n, other=0)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def main():
    print(torch.cuda.get_device_name(), flush=True)
    copy = common.copy_bandwidth()
    g = torch.randint(-2**31, 2**31 - 1, (E, INTER, W), dtype=torch.int32, device="cuda")
    u = torch.randint_like(g, -2**31, 2**31 - 1)
    ns = HIDDEN // GS // 2  # bf16 scales + biases as int32 words: (scales, biases) 2 x 32 bf16 = 32 words a row
    gs = torch.randint(-2**31, 2**31 - 1, (E, INTER, 2 * ns), dtype=torch.int32, device="cuda")
    us = torch.randint_like(gs, -2**31, 2**31 - 1)
    sets = [(torch.randperm(E, device="cuda")[:TOPK].to(torch.int32),) for _ in range(4)]
    nbytes = TOPK * INTER * (2 * W + 2 * 2 * ns) * 4
    print(f"copy {copy / 1e12:.3f} TB/s; gate/up bytes {nbytes / 1e6:.2f} MB, at copy {nbytes / copy * 1e6:.2f} us",
          flush=True)
    out = torch.empty(TOPK * INTER, dtype=torch.int32, device="cuda")
    for bn, warps in ((2, 1), (4, 2), (4, 4), (8, 2), (8, 4), (16, 4), (16, 8), (32, 8)):
        for scales in (False, True):
            def run(ids, bn=bn, warps=warps, scales=scales):
                routed_read[(INTER // bn, TOPK)](ids, g, u, gs, us, out, BN=bn, W=W, NS=2 * ns, SCALES=scales,
                                                 num_warps=warps)
            t = common.time_graph(run, sets, 50)
            print(f"  routed read BN {bn:2d} warps {warps} scales {int(scales)}: {t:6.2f} us", flush=True)
    wd, nsd = INTER // 8, 16  # down rows: 96 words; 12 scale + bias words, padded to 16
    d = torch.randint(-2**31, 2**31 - 1, (E, HIDDEN, wd), dtype=torch.int32, device="cuda")
    ds = torch.randint(-2**31, 2**31 - 1, (E, HIDDEN, nsd), dtype=torch.int32, device="cuda")
    dbytes = TOPK * HIDDEN * (wd + nsd) * 4
    print(f"down bytes {dbytes / 1e6:.2f} MB, at copy {dbytes / copy * 1e6:.2f} us", flush=True)
    for bn, warps in ((4, 4), (8, 4), (8, 8), (16, 8)):
        t = common.time_graph(lambda ids, bn=bn, warps=warps: down_read[(HIDDEN // bn,)](
            ids, d, ds, out, BN=bn, WD=wd, WP=128, NS=16, TOPK=TOPK, num_warps=warps), sets, 50)
        print(f"  down read BN {bn:2d} warps {warps}: {t:6.2f} us", flush=True)
    flat = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    flats = [(flat,), (torch.randint_like(flat, -2**31, 2**31 - 1),), (torch.randint_like(flat, 0, 9),),
             (torch.randint_like(flat, 0, 7),)]
    o2 = torch.empty(4096, dtype=torch.int32, device="cuda")
    for progs, block, warps in ((264, 1024, 4), (528, 1024, 4), (1056, 512, 4), (1584, 512, 2), (3072, 256, 2)):
        t = common.time_graph(lambda p: linear_read[(progs,)](p, o2, p.numel(), BLOCK=block, num_warps=warps), flats,
                              50)
        print(f"  linear read {progs} programs of {block} words, {warps} warps: {t:6.2f} us", flush=True)


if __name__ == "__main__":
    main()
