"""Host (Python) overhead per call at a tiny size: ours vs a bare Triton launch and the peers.

    python bench/overhead.py [--profile OP]    # standalone: the table, optionally a cProfile of one call

Rows named ``layer:`` split a launch into its layers, from the driver up, so that the
part our library adds can be told from what Triton and CUDA cost on the host.

Each ``mlx-native`` op row has a ``floor`` beside it: what any caller of the same kernels pays on this
host whatever its Python, that is ``torch.empty_like`` per output plus each of the call's launches
through Triton's C launcher with every argument already prepared (raw pointers, the stream, the
compiled function). ``ours above floor`` is the difference: the Python overhead of our eager path
(validation-free plan lookup, allocation bookkeeping, argument packing). The host is shared and its
speed varies between minutes by up to 2x, so rows are timed in interleaved rounds and each keeps its
best round.
"""

from __future__ import annotations

import ctypes
import functools
import sys

import torch
import triton
import triton.language as tl

import mlx_native as mn
from mlx_native.kernels import launch as launch_mod
from common import cprofile, host_overhead_us
from peers import compiled, liger, torch_rms_norm, torch_silu_mul


@triton.jit
def _noop_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _launch_layers(x: torch.Tensor, y: torch.Tensor) -> dict:
    """The copy kernel launched through each layer: CUDA driver (ctypes), Triton's C launcher, its
    Python wrapper, and the full ``kernel[grid]`` path."""
    k = _noop_kernel[(4,)](x, y, 4096, BLOCK=1024)
    torch.cuda.synchronize()
    run = k.run
    stream = torch.cuda.current_stream().cuda_stream
    xp, yp = x.data_ptr(), y.data_ptr()
    layers = {
        "layer: triton compiled.run (C launcher + Python wrapper)":
            lambda: run(4, 1, 1, stream, k.function, k.packed_metadata, None, None, None, xp, yp, 4096, 1024),
        "layer: triton kernel[grid] (full JIT path)": lambda: _noop_kernel[(4,)](x, y, 4096, BLOCK=1024),
    }
    c_launch = getattr(run, "launch", None)
    if c_launch is not None and getattr(run, "global_scratch_size", 1) == 0:
        layers["layer: triton C launcher called directly"] = lambda: c_launch(
            4, 1, 1, stream, k.function, False, False, None, None, k.packed_metadata, None, None, None,
            xp, yp, 4096, 1024)
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        fn = cuda.cuLaunchKernel
        fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        vals = [ctypes.c_uint64(xp), ctypes.c_uint64(yp), ctypes.c_int32(4096), ctypes.c_uint64(0),
                ctypes.c_uint64(0)]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        threads = 32 * k.metadata.num_warps
        args = (k.function, 4, 1, 1, threads, 1, 1, k.metadata.shared, stream, params, None)
        if fn(*args) == 0:
            layers["layer: cuLaunchKernel through ctypes (driver floor)"] = lambda keep=vals: fn(*args)  # keep: params point into vals
    except (OSError, AttributeError):
        pass
    layers["layer: torch.neg(out=) (torch's own launch path)"] = lambda: torch.neg(x, out=y)
    return layers


def _floor(fn) -> callable:
    """What one call of ``fn`` (an mlx-native op) costs the host at the least: ``torch.empty_like`` of
    each output and each of its kernel launches through Triton's C launcher, arguments prepared.
    The launches are recorded from one real call of ``fn``."""
    with launch_mod.recording() as recorded:
        out = fn()
    outputs = [t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, torch.Tensor)]
    stream = torch.cuda.current_stream().cuda_stream
    launches = []
    for ln, args in recorded:
        compiled = ln.compiled[(True,) * len(ln.tensor_pos)]
        c_launch = launch_mod._c_launcher(compiled, ln.pdl)
        prepared = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args) + ln.const_values
        launches.append(functools.partial(c_launch, *ln.grid, stream, compiled.function, False, ln.pdl, None,
                                          None, compiled.packed_metadata, None, None, None, *prepared))

    def floor():
        for t in outputs:
            torch.empty_like(t)
        for launch in launches:
            launch()

    return floor


def calls() -> dict:
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    q = torch.randn(1, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    q3 = q[0]
    w128 = w[:128]
    pos = torch.tensor([7], device="cuda")
    pos2 = pos[:, None]
    lig = liger()
    from mlx_native.ops.norms import api as norms_api

    def rms_key():  # the key rms_norm builds inline (ops/norms/api.py)
        return (x.shape, x.stride(), x.dtype, x.device, (w.shape, w.stride(), w.dtype, w.device), 1e-6)

    plan = norms_api._RMS_PLANS.get(rms_key(), x, w, None, 1e-6)
    out = {
        "component: torch.empty 1x4096 bf16": lambda: torch.empty((1, 4096), dtype=torch.bfloat16, device="cuda"),
        "component: torch.empty_like(x) (how the ops allocate)": lambda: torch.empty_like(x),
        "component: plan key + lookup": lambda: norms_api._RMS_PLANS.plans.get(
            (x.shape, x.stride(), x.dtype, x.device, (w.shape, w.stride(), w.dtype, w.device), 1e-6)),
        "component: prepared Launch only": lambda: plan.launch(x, x, w, y, y, 1e-6, 0.0, *plan.ints),
        **_launch_layers(x, y),
        "mlx-native rms_norm": lambda: mn.rms_norm(x, w, 1e-6),
        "mlx-native add_rms_norm": lambda: mn.add_rms_norm(x, x, w, 1e-6),
        "mlx-native silu_mul": lambda: mn.silu_mul(x, x),
        "mlx-native rope (positions)": lambda: mn.rope(q, 128, positions=pos2),
        "mlx-native head_norm_rope": lambda: mn.head_norm_rope(q3, w128, positions=pos),
        "torch eager rms_norm (HF math)": lambda: torch_rms_norm(x, w, 1e-6),
        "torch.compile rms_norm": compiled(lambda: torch_rms_norm(x, w, 1e-6)),
        "torch eager silu_mul": lambda: torch_silu_mul(x, x),
    }
    if lig:
        out["liger rms_norm"] = lambda: lig["rms_norm"](x, w, 1e-6)
        out["liger silu_mul"] = lambda: lig["silu_mul"](x, x)
    return out


def rows(rounds: int = 3) -> list[dict]:
    """Host us per call of every row (best of ``rounds`` interleaved rounds); each mlx-native op row is
    followed by its floor and by ours above the floor."""
    timed = {}
    for name, fn in calls().items():
        timed[name] = fn
        if name.startswith("mlx-native "):
            timed[f"{name}: floor (empty_like per output + prepared C launches)"] = _floor(fn)
    best = {name: float("inf") for name in timed}
    for _ in range(rounds):
        for name, fn in timed.items():
            best[name] = min(best[name], host_overhead_us(fn, ()))
    out = []
    for name, us in best.items():
        out.append({"call": name, "host_us": us})
        if name.endswith("prepared C launches)"):
            op = name.split(": floor")[0]
            out.append({"call": f"{op}: ours above floor", "host_us": best[op] - us})
    return out


def markdown(results: list[dict]) -> str:
    lines = ["## Host overhead per call (1 x 4096 bf16, no sync; Python issue time)", "",
             "| call | host us |", "|---|---|"]
    lines += [f"| {r['call']} | {r['host_us']:.2f} |" for r in results]
    return "\n".join(lines) + "\n"


def profile(name: str, n: int = 20000) -> None:
    """cProfile of ``n`` calls of the row whose name contains ``name``."""
    cprofile(next(f for k, f in calls().items() if name in k), n)


if __name__ == "__main__":
    print(markdown(rows()))
    if len(sys.argv) > 2 and sys.argv[1] == "--profile":
        for op in sys.argv[2:]:
            print(f"### cProfile: {op}")
            profile(op)
