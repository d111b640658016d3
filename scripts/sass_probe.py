"""Offline sm_90 SASS of a decode mat-vec kernel (no GPU needed): compiles with the local Triton for an H100
target, disassembles with the bundled nvdisasm and prints the instruction histogram of the whole kernel and
of its main loop (the largest backward-branch block).

    python scripts/sass_probe.py affine_idot [--bn 8] [--warps 2] [--k 4096] [--prefetch 0]
    python scripts/sass_probe.py affine_mv
    python scripts/sass_probe.py q4k_idot [--bn 4] [--warps 2] [--k 4096] [--prefetch 0]
    python scripts/sass_probe.py q4k_mv [--bn 16]  (4 warps, its 128-word steps)
    python scripts/sass_probe.py q6k_idot [--bn 32] --warps 1 [--k 4096] [--mr 2]  (BN / 8 rows a lane; MR rows of x)
    python scripts/sass_probe.py moe_idot [--bn 4] [--warps 2] [--k 2048]  (routed gate/up pair)
    python scripts/sass_probe.py moe_mix [--bn 4] [--k 768]  (routed down projection mixing 8 slots)
    python scripts/sass_probe.py block_mmv --fmt 14 [--bn 64] --warps 4 [--mp 16] [--prefetch 0]  (tensor-core
        decode of GGUF Q6_K (14) / Q8_0 (8) blocks)
    python scripts/sass_probe.py mmv [--bn 64] --warps 4 [--mp 16] --stages 3  (the tensor-core decode of MLX affine
        4-bit g64 at 2-16 rows: packed tiles, 128 codes a step, a fused K split)
    python scripts/sass_probe.py decode --bn 64 --warps 4 --stages 4 [--d 128] [--g 8] [--rope 1] [--pdl 1]  (split-KV
        decode attention of one query token, as the model runner's step launches it at batch 1 on an H200)
    ... moe_idot / moe_mix --pdl 1: as moe_ffn launches them (programmatic dependent launch)

It also prints the kernel's shared memory and local (spill) bytes, and the loop's shared-memory accesses.

The local Triton may be newer than the device's; counts are a guide, the GPU run decides.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


PTR_TYPES = {"x_ptr": "*bf16", "out_ptr": "*bf16", "part_ptr": "*fp32", "cnt_ptr": "*i32", "s_ptr": "*bf16",
             "b_ptr": "*bf16", "su_ptr": "*bf16", "bu_ptr": "*bf16", "mix_ptr": "*fp32",  # others: int32 words
             # the decode attention kernel's
             "q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "kn_ptr": "*bf16",
             "vn_ptr": "*bf16", "po_ptr": "*fp32", "plse_ptr": "*fp32", "freq_ptr": "*fp32"}
FLOAT_ARGS = {"eps", "w_offset", "qk_scale", "softcap_in", "softcap_out", "rope_scale"}  # others: int32


def signature_of(fn, constexprs: dict) -> tuple[dict, dict]:
    """``(signature, constexprs)`` of a kernel from its parameters: pointers by name (PTR_TYPES), other runtime
    arguments int32, constexprs not given at their defaults."""
    sig, const = {}, dict(constexprs)
    for p in fn.params:
        if p.is_constexpr:
            const.setdefault(p.name, p.default)
        else:
            sig[p.name] = (PTR_TYPES.get(p.name, "*i32") if p.name.endswith("_ptr")
                           else "fp32" if p.name in FLOAT_ARGS else "i32")
    return sig, const


def compile_sass(fn, constexprs: dict, num_warps: int, num_stages: int = 1) -> tuple[str, int, str]:
    """(SASS text, registers per thread, ``cuobjdump -res-usage`` line) of ``fn`` compiled for sm_90."""
    signature, constexprs = signature_of(fn, constexprs)
    sig = dict(signature, **{name: "constexpr" for name in constexprs})
    # pointers are 16-byte aligned, and so are the int arguments (row lengths, strides) the launches pass
    src = ASTSource(fn, sig, constexprs=constexprs, attrs={(i,): [["tt.divisibility", 16]]
                                                            for i, (n, t) in enumerate(signature.items())})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps,
                                                                                  "num_stages": num_stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    sass = subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", f.name], capture_output=True, text=True).stdout
    usage = subprocess.run([os.path.join(BIN, "cuobjdump"), "-res-usage", f.name], capture_output=True,
                           text=True).stdout
    os.unlink(f.name)
    regs = re.search(r"REG:(\d+)", usage)
    res = re.search(r"REG:.*", usage)
    return sass, int(regs.group(1)) if regs else -1, res.group(0) if res else ""


def histogram(lines: list[str]) -> collections.Counter:
    ops = collections.Counter()
    for line in lines:
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    return ops


def main_loop(sass: str) -> list[str]:
    """Lines of the largest block ending in a backward branch."""
    lines = sass.splitlines()
    addr = {}
    for i, line in enumerate(lines):
        m = re.search(r"/\*([0-9a-f]{4,})\*/", line)
        if m:
            addr[int(m.group(1), 16)] = i
    best = []
    for i, line in enumerate(lines):
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", line)
        lab = re.search(r"BRA\s+`\((\.L_x_\d+)\)", line)
        start = None
        if lab:
            for j in range(i):
                if lines[j].strip().startswith(lab.group(1) + ":"):
                    start = j
        elif m and m.group(1):
            start = addr.get(int(m.group(1), 16))
        if start is not None and start < i and i - start > len(best):
            best = lines[start:i + 1]
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", choices=("affine_idot", "affine_mv", "q4k_idot", "q4k_mv", "q6k_idot", "moe_idot",
                                           "moe_mix", "block_mmv", "mmv", "decode"))
    ap.add_argument("--bn", type=int, default=8)
    ap.add_argument("--warps", type=int, default=2)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--dump", help="write the SASS here")
    ap.add_argument("--prefetch", type=int, default=1)
    ap.add_argument("--pdl", type=int, default=0)
    ap.add_argument("--mr", type=int, default=1, help="rows of x (q6k_idot)")
    ap.add_argument("--mp", type=int, default=16, help="x tile rows (block_mmv)")
    ap.add_argument("--fmt", type=int, default=14, help="GGUF type id (block_mmv)")
    ap.add_argument("--stages", type=int, default=1, help="software pipeline stages")
    ap.add_argument("--d", type=int, default=128, help="head dim (decode)")
    ap.add_argument("--g", type=int, default=8, help="query heads per KV head (decode)")
    ap.add_argument("--rope", type=int, default=1, help="rotate q and append the new K / V rows (decode)")
    args = ap.parse_args()
    k, gs = args.k, 64
    warps = args.warps
    if args.kernel == "affine_idot":
        from mlx_native.ops.quant.affine_idot import affine_idot_kernel as fn
        const = dict(STRIDE_W=k // 8, STRIDE_S=k // gs, BN=args.bn, CH=32 * warps, GS=gs, EVEN_N=True,
                     PREFETCH=bool(args.prefetch), SPLIT_K=False, FUSE=False, ASM=True)
        codes_per_iter = args.bn * 32 * warps * 32
    elif args.kernel == "affine_mv":
        from mlx_native.ops.quant.affine_mv import affine_mv_kernel as fn
        const = dict(STRIDE_W=k // 8, STRIDE_S=k // gs, BN=args.bn, WPS=128, GS=gs, EVEN_N=True, PREFETCH=True,
                     SPLIT_K=False, FUSE=False)
        codes_per_iter = args.bn * 128 * 8
    elif args.kernel == "q4k_idot":
        from mlx_native.ops.ggml.q4k_idot import q4k_idot_kernel as fn
        const = dict(STRIDE_W=k // 256 * 36, BN=args.bn, CH=32 * warps, EVEN_N=True, PREFETCH=bool(args.prefetch),
                     SPLIT_K=False, FUSE=False, ASM=True)
        codes_per_iter = args.bn * 32 * warps * 64
    elif args.kernel == "q6k_idot":  # 8 super-blocks of each of BN rows a loop step
        from mlx_native.ops.ggml.q6k_idot import q6k_idot_kernel as fn
        const = dict(STRIDE_W=k // 256 * 105 // 2, BN=args.bn, EVEN_N=True, PREFETCH=bool(args.prefetch),
                     SPLIT_K=False, FUSE=False, ASM=True, MR=args.mr)
        codes_per_iter = args.bn * 8 * 256  # (weight codes: each one times MR rows of x)
    elif args.kernel == "moe_idot":  # the gate/up pair of routed experts, N 768 per expert
        from mlx_native.ops.moe.idot import moe_idot_kernel as fn
        const = dict(STRIDE_E=768 * k // 8, STRIDE_SE=768 * k // gs, STRIDE_W=k // 8, STRIDE_S=k // gs, BN=args.bn,
                     CH=32 * warps, GS=gs, EVEN_N=True, EVEN_K=k % (1024 * warps) == 0, X_DIV=8, HAS_UP=True, ACT=0,
                     ASM=True, PDL=bool(args.pdl))
        codes_per_iter = 2 * args.bn * 32 * warps * 32
    elif args.kernel == "moe_mix":  # the mixed down projection of 8 slots, N 2048 per expert
        from mlx_native.ops.moe.idot import mix_chunks, moe_idot_mix_kernel as fn
        ch = mix_chunks(k, 8)
        warps = 8 * ch // 32
        const = dict(STRIDE_E=2048 * k // 8, STRIDE_SE=2048 * k // gs, STRIDE_W=k // 8, STRIDE_S=k // gs,
                     BN=args.bn, CH=ch, SLOTS=8, TOPK=8, GS=gs, EVEN_N=True, ASM=True, PDL=bool(args.pdl))
        codes_per_iter = args.bn * 8 * ch * 32
    elif args.kernel == "block_mmv":  # 128 values of each of BN rows a loop step
        from mlx_native.ops.ggml.block_mmv import block_mmv_kernel as fn
        const = dict(FMT=args.fmt, BN=args.bn, MP=args.mp, X_F16=False, SPLIT_K=False, FUSE=False, ASM=True, ROWS4=True,
                     PREFETCH=bool(args.prefetch))
        codes_per_iter = args.bn * 128
    elif args.kernel == "mmv":  # 128 codes of each of BN rows a loop step
        from mlx_native.ops.quant.mmv import AFFINE, mmv_kernel as fn
        const = dict(FMT=AFFINE.value, BN=args.bn, GS=gs, MP=args.mp, GPS=2, X_F16=False, SPLIT_K=True, FUSE=True,
                     ONE_ROW=False, PRESCALE=True, PACKED=True, ASM=True, PDL=0)
        codes_per_iter = args.bn * 128
    elif args.kernel == "decode":  # one query token, split-KV with a reduce launch, BN keys a loop step
        from mlx_native.ops.attention.decode import _decode_kernel as fn
        const = dict(G=args.g, SINGLE=False, FUSE=False, WINDOW=False, MULTI_Q=False, SOFTCAP=False, BALANCE=False,
                     BLOCK_B=1, BLOCK_M=max(16, args.g), BLOCK_N=args.bn, BLOCK_S=8, BLOCK_D=args.d, HEAD_D=args.d,
                     EVEN_D=True, PRECISION="tf32", APPEND=bool(args.rope), ROPE=bool(args.rope),
                     ROPE_TRADITIONAL=False, ROPE_FREQS=False, BLOCK_L=16, PDL=2 if args.pdl else 0)
        codes_per_iter = args.bn  # keys
    else:
        from mlx_native.ops.ggml.q4k_mv import Q4K_MAX_WPS, q4k_mv_kernel as fn
        from mlx_native.ops.quant.affine_mv import AMV_WARPS
        const = dict(STRIDE_W=k // 256 * 36, N_QS=k // 8, BN=args.bn, WPS=Q4K_MAX_WPS, EVEN_N=True, SPLIT_K=False,
                     FUSE=False)
        warps = AMV_WARPS
        codes_per_iter = args.bn * Q4K_MAX_WPS * 8
    sass, regs, usage = compile_sass(fn, const, warps, args.stages)
    if args.dump:
        with open(args.dump, "w") as f:
            f.write(sass)
    loop = main_loop(sass)
    ops = histogram(loop)
    total = sum(ops.values())
    threads = 32 * warps
    shared = sum(ops[op] for op in ("LDS", "STS", "BAR"))
    unit = "key" if args.kernel == "decode" else "code"
    print(f"{args.kernel} BN{args.bn} warps{warps} K{k}: {regs} registers, loop {total} instructions per "
          f"thread = {total * threads / codes_per_iter:.2f} per {unit}, {shared} shared-memory ops in the loop")
    print(f"  {usage.strip()}")
    print("  " + ", ".join(f"{op} {n}" for op, n in ops.most_common(24)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
