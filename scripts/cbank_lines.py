"""Which 64-byte lines of the constant bank each decode kernel's parameters touch (offline, no GPU).

    python scripts/cbank_lines.py [--ops rms_norm,rope_qk,...]

Kernel parameters live in constant bank 0 from offset 0x210. At decode sizes a kernel waits about 20 ns for
each extra 64-byte line its used parameters span (session 20, runs 9-10: the same minimal norm kernel with its
parameters over one / three lines, 1.404 / 1.448 us), so parameters a decode launch reads belong together at
the front of the signature.

For each decode call below the script records the real launches of the op (plans built for an H100: 132 SMs,
sm_90) without running them, specializes the arguments the way Triton's launcher does (ints equal to 1 become
constants, multiples of 16 and 16-byte aligned pointers get divisibility hints), compiles each kernel for sm_90
with the local Triton and reads the SASS: the parameter offsets it loads (``c[0x0][...]``) and the lines they
span. Numbers from the local Triton are a guide; the device's Triton 3.6 decides (``pip install --target
/tmp/tri36/site triton==3.6.0`` and ``PYTHONPATH=/tmp/tri36/site`` to match it).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from typing import Callable

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.runtime.jit import create_function_from_signature

import mlx_native as mn
from mlx_native.kernels import launch as launch_mod
from mlx_native.runtime import device as device_mod, env, plans

TARGET = GPUTarget("cuda", 90, 32)
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
PARAM_BASE = 0x210  # first kernel parameter in constant bank 0 on sm_90
LINE = 64


def _h100() -> None:
    """Plans built for CPU tensors take an H100's shape (SM count, arch) and the kernel path."""
    device_mod._CPU_INFO = dataclasses.replace(device_mod._CPU_INFO, name="H100 (offline)", sm_count=132,
                                               arch=(9, 0))
    env.settings = dataclasses.replace(env.settings, triton_interpret=True, nan_fill=False, backend="auto")


def compile_recorded(ln, args):
    """``(compiled kernel, signature)`` of one recorded launch for sm_90, its arguments specialized as Triton's
    launcher would (``compiled.asm`` holds ``ttgir``, ``ptx``, ``cubin``)."""
    kernel = ln.kernel
    backend = CUDABackend(TARGET)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    kwargs = dict(ln.constexprs, **ln.options)
    bound, specialization, _ = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound, specialization, None)
    src = ASTSource(kernel, signature, constexprs, attrs)
    return triton.compile(src, target=TARGET, options=options.__dict__), signature


def compile_launch(ln, args) -> tuple[str, dict[int, str]]:
    """(SASS, {parameter offset: name}) of one recorded launch, specialized as Triton's launcher would."""
    compiled, signature = compile_recorded(ln, args)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    sass = subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    return sass, param_offsets(signature)


def sass_hashes(calls: dict[str, Callable[[], object]]) -> dict[str, str]:
    """``{"label #i kernel": hash}``: a 12-digit hash of the SASS (addresses stripped) of each launch the calls
    make, recorded without running and compiled for sm_90 (``ASM`` constexprs on, as on a GPU); for before /
    after diffs of a refactor. Calls or launches that fail are printed and skipped."""
    out = {}
    for label, fn in calls.items():
        plans.clear_all()
        with launch_mod.recording(run=False) as rec:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001
                print(label, "ERR", repr(exc)[:200])
                continue
        for i, (ln, args) in enumerate(rec):
            if "ASM" in ln.constexprs:
                ln.constexprs = dict(ln.constexprs, ASM=True)
            try:
                sass, _ = compile_launch(ln, args)
            except Exception as exc:  # noqa: BLE001
                print(label, i, "compile ERR", repr(exc)[:200])
                continue
            body = "\n".join(line.split("*/", 1)[-1] for line in sass.splitlines() if "/*" in line)
            out[f"{label} #{i} {ln.kernel.fn.__name__}"] = hashlib.sha1(body.encode()).hexdigest()[:12]
    return out


def param_offsets(signature: dict[str, str]) -> dict[int, str]:
    """Offset of each runtime parameter in the constant bank: in signature order, each at its natural
    alignment (pointers and 64-bit values 8 bytes, the rest 4)."""
    out, at = {}, PARAM_BASE
    for name, ty in signature.items():
        if ty == "constexpr":
            continue
        size = 8 if ty.startswith("*") or ty in ("i64", "u64", "fp64") else 4
        at = (at + size - 1) // size * size
        out[at] = name
        at += size
    return out


def param_lines(sass: str) -> tuple[list[int], list[int]]:
    """(parameter offsets read, 64-byte lines they touch) from SASS."""
    offsets = sorted({int(m, 16) for m in re.findall(r"c\[0x0\]\[(0x[0-9a-f]+)\]", sass)})
    params = [o for o in offsets if o >= PARAM_BASE]
    return params, sorted({o // LINE for o in params})


def decode_calls() -> dict[str, Callable[[], object]]:
    bf = torch.bfloat16
    x576, w576 = torch.randn(1, 576, dtype=bf), torch.randn(576, dtype=bf)
    x4k, w4k = torch.randn(1, 4096, dtype=bf), torch.randn(4096, dtype=bf)
    x16 = torch.randn(16, 4096, dtype=bf)
    gu = torch.randn(1, 2 * 14336, dtype=bf)
    q = torch.randn(1, 1, 32, 128, dtype=bf)
    k = torch.randn(1, 1, 8, 128, dtype=bf)
    pos = torch.tensor([[7]])
    qh = torch.randn(4, 16, 256, dtype=bf)
    pos4 = torch.arange(4) + 1000
    w128, w256 = torch.randn(128, dtype=bf), torch.randn(256, dtype=bf)
    logits = torch.randn(1, 151936, dtype=bf)
    w_q, s_q, b_q = mn.quantize(torch.randn(4096, 4096, dtype=bf) * 0.02, 64, 4)
    qd = torch.randn(1, 32, 1, 128, dtype=bf)
    kc, vc = torch.zeros(1, 8, 2048, 128, dtype=bf), torch.zeros(1, 8, 2048, 128, dtype=bf)
    kn, vn = torch.randn(1, 8, 1, 128, dtype=bf), torch.randn(1, 8, 1, 128, dtype=bf)
    lens = torch.tensor([1024], dtype=torch.int32)
    return {
        "rms_norm 1x576": lambda: mn.rms_norm(x576, w576),
        "add_rms_norm 1x576": lambda: mn.add_rms_norm(x576, x576, w576),
        "rms_norm 1x4096": lambda: mn.rms_norm(x4k, w4k),
        "rms_norm 16x4096": lambda: mn.rms_norm(x16, w4k),
        "silu_mul 1x14336 (halves)": lambda: mn.silu_mul(gu[:, :14336], gu[:, 14336:]),
        "rope_qk B1 L1": lambda: mn.rope_qk(q, k, 128, positions=pos[..., None]),
        "head_norm_rope T1 H32 D128": lambda: mn.head_norm_rope(q[0], w128, positions=pos[0]),
        "head_norm_rope T4 H16 D256": lambda: mn.head_norm_rope(qh, w256, positions=pos4),
        "head_norm_rope_qk T1": lambda: mn.head_norm_rope_qk(q[0], k[0], w128, w128, positions=pos[0]),
        "softmax 1x151936": lambda: mn.softmax(logits),
        "argmax 1x151936": lambda: mn.argmax(logits),
        "quantized_matmul M1 4096x4096 g64": lambda: mn.quantized_matmul(x4k, w_q, s_q, b_q),
        "flash_attn_decode B1 Hq32 Hkv8 kv1024 D128": lambda: mn.flash_attn_decode(qd, kc, vc, lens + 1),
        "flash_attn_decode + append": lambda: mn.flash_attn_decode(qd, kc, vc, lens, k_new=kn, v_new=vn),
        "kv_cache_write 1 token": lambda: mn.kv_cache_write(kc, vc, lens.clone(), kn, vn),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="", help="comma-separated name prefixes (default: all)")
    args = ap.parse_args()
    _h100()
    wanted = [s for s in args.ops.split(",") if s]
    print("| call | kernel | runtime params | parameters read (offset) | 64-B lines |")
    print("|---|---|---|---|---|")
    for name, call in decode_calls().items():
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        with launch_mod.recording(run=False) as launches:  # recorded, not run
            call()
        for ln, largs in launches:
            sass, names = compile_launch(ln, largs)
            offsets, lines = param_lines(sass)
            read = ", ".join(f"{names.get(o, '?')} {o:#x}" for o in offsets)
            print(f"| {name} | {ln.kernel.__name__} | {len(names)} | {read} | {len(lines)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
