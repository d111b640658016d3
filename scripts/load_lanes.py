"""How the warps of each decode kernel spread their global loads over cache lines (offline, no GPU).

    python scripts/load_lanes.py [--ops quant,ggml_matmul Q4_0,...] [--all]

A warp's load instruction costs the L1 one pass ("wavefront") per 128-byte line it touches. Where the compiler
cannot see that a row's elements are contiguous (an int32 pointer made from byte offsets, say), it puts the
warp's 32 lanes on 32 rows, one small piece each: 32 lines an instruction instead of a handful. Session 21 found
that in the tensor-core decode kernel (Q4_0 code words and Q4_K headers, ``quant/mmv.py``).

For each call below the script records the op's real launches (plans built for an H100, as
``scripts/cbank_lines.py`` does), compiles each kernel for sm_90 with the local Triton, and reads every global load
of the TTGIR (``tt.load``, ``ttg.async_copy_global_to_local``): its tile, element size and blocked layout. Per
warp instruction it reports the bytes a lane loads (``vec``), the lanes that share a row (``lanes/row``), the rows
one instruction spans, and an estimate of the lines it touches (rows x lines of one row's run, taking rows to be
far apart, as weight rows are). The row is the layout's vectorized dimension; where nothing is vectorized the
compiler saw no contiguity and the tile's last dimension is taken (``vec`` marked ``?``). Those rows are suspects
to check by hand, not findings: the streamed one-row mat-vecs (``affine_idot``, ``q4_idot``, ``q8_mv``, ``q4_mv``,
``gemv``) put consecutive words of one row on adjacent lanes of a K-major tile by design and read wrongly here,
as do the split-K partials ``[BN, M]`` (N-major in memory) and x chunks that lie side by side. Session 21's real
finds were the tensor-core kernel's Q4_0 code words and Q4_K headers (32 lines an instruction; fixed on branch
``mmv-wavefronts``, not yet timed) and the general kernel's Q4_0 scales (``qmm_kernel`` ``d``). Loads touching
16 or more lines an instruction are marked ``<<``; by default only those are listed (``--all``: every load). Use
the device's Triton 3.6 (``PYTHONPATH=/tmp/tri36/site``): layouts differ between versions.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cbank_lines  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.kernels import launch as launch_mod  # noqa: E402

ELEM_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "i1": 1}
LOAD = re.compile(r"%(\w+?)(?:_\d+)? = (tt\.load|ttg\.async_copy_global_to_local) .*?: "
                  r"tensor<([0-9x]+)x!tt\.ptr<(\w+)>, "
                  r"(#[\w.<>{}=, \[\]#]+?)>(?: ->| loc|$)")
BLOCKED = re.compile(r"^(#blocked\d*) = #ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], threadsPerWarp = \[([\d, ]+)\], "
                     r"warpsPerCTA = \[([\d, ]+)\], order = \[([\d, ]+)\]\}>", re.M)
SLICE = re.compile(r"#ttg\.slice<\{dim = (\d+), parent = (#blocked\d*)\}")
HOT = 16  # lines per warp instruction from which a load is marked


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def layouts(ttgir: str) -> dict[str, dict[str, list[int]]]:
    """``{#blockedN: {spt, tpw, order}}`` of a TTGIR module."""
    return {m[1]: dict(spt=_ints(m[2]), tpw=_ints(m[3]), order=_ints(m[5])) for m in BLOCKED.finditer(ttgir)}


def _resolve(layout: str, blocked: dict) -> dict | None:
    """The blocked layout of a load's tile (a slice of a blocked layout drops its sliced dimension)."""
    if layout in blocked:
        return blocked[layout]
    m = SLICE.search(layout)
    if not m or m[2] not in blocked:
        return None
    dim, parent = int(m[1]), blocked[m[2]]
    keep = [d for d in range(len(parent["spt"])) if d != dim]
    order = [d - (d > dim) for d in parent["order"] if d != dim]
    return dict(spt=[parent["spt"][d] for d in keep], tpw=[parent["tpw"][d] for d in keep], order=order)


def warp_lines(shape: list[int], elem: int, lay: dict) -> dict[str, float]:
    """Per warp instruction: the bytes of a lane's vector, the lanes on one row, the rows, the estimated lines.
    The dimension contiguous in memory is the layout's fastest one where the compiler vectorized it (more than
    one element per thread), else (``guess``: it saw no contiguity anywhere) the tile's last; every other
    dimension counts as rows far apart."""
    fast = lay["order"][0]
    guess = lay["spt"][fast] == 1
    if guess:
        fast = len(shape) - 1
    vec = min(lay["spt"][fast], shape[fast]) * elem
    lanes_row = max(1, min(lay["tpw"][fast], math.ceil(shape[fast] / max(1, lay["spt"][fast]))))
    rows = math.prod(min(lay["tpw"][d], shape[d]) for d in range(len(shape)) if d != fast)
    return dict(vec=vec, lanes_row=lanes_row, rows=rows, lines=rows * math.ceil(vec * lanes_row / 128),
                guess=guess)


def survey(ttgir: str) -> list[dict]:
    """Every global load of a TTGIR module with its :func:`warp_lines` figures (one row per distinct load)."""
    blocked = layouts(ttgir)
    out, seen = [], set()
    for line in ttgir.splitlines():
        m = LOAD.search(line)
        if not m:
            continue
        name, op, shape, dtype, layout = m.groups()
        lay = _resolve(layout, blocked)
        key = (name, shape, dtype, layout)
        dims = [int(v) for v in shape.split("x")]
        if lay is None or key in seen or dtype not in ELEM_BYTES or len(lay["spt"]) != len(dims):
            continue
        seen.add(key)
        out.append(dict(name=name, op="cp.async" if "async" in op else "load", shape=shape, dtype=dtype,
                        **warp_lines(dims, ELEM_BYTES[dtype], lay)))
    return out


def decode_calls() -> dict:
    """cbank_lines' decode calls plus the quantized decode matmuls (1, 4 and 16 rows) of the 8B and SmolLM2 shapes."""
    bf = torch.bfloat16
    calls = dict(cbank_lines.decode_calls())
    w_q, s_q, b_q = mn.quantize(torch.randn(14336, 4096, dtype=bf) * 0.02, 64, 4)
    raw = {t: torch.randint(0, 255, (14336 * 4096 // per * size,), dtype=torch.uint8)
           for t, per, size in (("Q4_0", 32, 18), ("Q4_1", 32, 20), ("Q4_K", 256, 144), ("Q8_0", 32, 34),
                                ("Q6_K", 256, 210))}
    small = torch.randint(0, 255, (1536 * 576 // 32 * 20,), dtype=torch.uint8)  # SmolLM2's MLP up, Q4_1
    for m in (1, 4, 16):
        x = torch.randn(m, 4096, dtype=bf)
        calls[f"quantized_matmul M{m} 14336x4096 g64"] = lambda x=x: mn.quantized_matmul(x, w_q, s_q, b_q)
        for t, r in raw.items():
            if m == 1 or t in ("Q4_0", "Q4_K"):
                calls[f"ggml_matmul {t} M{m} 14336x4096"] = lambda x=x, t=t, r=r: mn.ggml_matmul(x, r, t, (14336, 4096))
    x576 = torch.randn(1, 576, dtype=bf)
    calls["ggml_matmul Q4_1 M1 1536x576 (SmolLM2)"] = lambda: mn.ggml_matmul(x576, small, "Q4_1", (1536, 576))
    return calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="", help="comma-separated name prefixes (default: all)")
    ap.add_argument("--all", action="store_true", help="list every load, not only those of >= 16 lines")
    args = ap.parse_args()
    cbank_lines._h100()
    wanted = [s for s in args.ops.split(",") if s]
    print("| call | kernel | load | op | tile | vec B | lanes/row | rows | lines/instr |")
    print("|---|---|---|---|---|---|---|---|---|")  # vec B with "?": no vector anywhere, last dim taken
    for name, call in decode_calls().items():
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        with launch_mod.recording(run=False) as launches:
            call()
        for ln, largs in launches:
            if "ASM" in ln.constexprs:  # plans built for the interpreter turn the inline PTX off
                ln.constexprs["ASM"] = True
            compiled, _ = cbank_lines.compile_recorded(ln, largs)
            for r in survey(compiled.asm["ttgir"]):
                if args.all or r["lines"] >= HOT:
                    mark = " <<" if r["lines"] >= HOT else ""
                    vec = f"{r['vec']}{'?' if r['guess'] else ''}"
                    print(f"| {name} | {ln.kernel.__name__} | {r['name']} | {r['op']} | {r['shape']} {r['dtype']} | "
                          f"{vec} | {r['lanes_row']} | {r['rows']} | {r['lines']}{mark} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
