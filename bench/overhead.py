"""Host (Python) overhead per call at a tiny size: ours vs a bare Triton launch and the peers.

    python bench/overhead.py [--profile OP]    # standalone: the table, optionally a cProfile of one call

Rows named ``layer:`` split a launch into its layers, from the driver up, so that the
part our library adds can be told from what Triton and CUDA cost on the host.
"""

from __future__ import annotations

import ctypes
import sys

import torch
import triton
import triton.language as tl

import mlx_native as mn
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
        "component: prepared Launch only": lambda: plan.launch(x, x, w, y, y, *plan.ints, plan.inv_n, 1e-6, 0.0),
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


def rows() -> list[dict]:
    return [{"call": name, "host_us": host_overhead_us(fn, ())} for name, fn in calls().items()]


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
