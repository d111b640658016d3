"""Where the host time of one small eager launch goes, on the GPU host (issue 2: <= 10 us per call).

    python bench/results/2026-11-25-h100-session20/launch_cost_probe.py  # prints a table and writes $OUT/launch_cost.json if OUT is set

Times (best of 5 loops, no sync inside, ``bench/common.host_overhead_us``):
* host calibration: an empty Python call with 7 and 16 arguments, ``x.data_ptr()``, the stream query,
  ``torch.empty_like``;
* Triton's C launcher called directly for copy kernels with 0-32 extra runtime int arguments (how the
  launcher's cost grows per argument);
* the norm kernel of ``rms_norm`` 1 x 4096: the C launcher with every argument prepared, our prepared
  ``Launch``, and the whole ``mn.rms_norm``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from common import host_overhead_us  # noqa: E402

import mlx_native as mn  # noqa: E402
from mlx_native.kernels import launch as launch_mod  # noqa: E402
from mlx_native.ops.norms import api as norms_api  # noqa: E402

EXTRA = (0, 4, 8, 16, 32)


def _copy_kernels() -> dict:
    """``k{n}(x_ptr, y_ptr, a0..a{n-1}, BLOCK)``: a copy of 128 values whose n int arguments are summed
    into the first value (so none is dead)."""
    src = ["import triton", "import triton.language as tl"]
    for n in EXTRA:
        ints = [f"a{i}" for i in range(n)]
        dns = ", ".join(f'"{a}"' for a in ints)
        src += [f"@triton.jit(do_not_specialize=[{dns}])",
                f"def k{n}(x_ptr, y_ptr, {''.join(a + ', ' for a in ints)}BLOCK: tl.constexpr):",
                "    offs = tl.arange(0, BLOCK)",
                f"    s = {' + '.join(ints) if ints else '0'}",
                "    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + s)"]
    path = os.path.join(tempfile.mkdtemp(), "probe_kernels.py")
    with open(path, "w") as f:
        f.write("\n".join(src) + "\n")
    spec = importlib.util.spec_from_file_location("probe_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {n: getattr(mod, f"k{n}") for n in EXTRA}


def rows() -> dict:
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    xf = torch.zeros(128, device="cuda", dtype=torch.float32)
    yf = torch.empty_like(xf)
    stream = torch.cuda.current_stream().cuda_stream
    get_stream = launch_mod._get_stream

    def f7(a, b, c, d, e, f, g):
        return None

    def f16(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p):
        return None

    out = {
        "python call, 7 args": lambda: f7(1, 2, 3, 4, 5, 6, 7),
        "python call, 16 args": lambda: f16(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
        "x.data_ptr()": x.data_ptr,
        "stream query (_cuda_getCurrentRawStream)": lambda: get_stream(0),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
    }
    xp, yp = xf.data_ptr(), yf.data_ptr()
    for n, k in _copy_kernels().items():
        ints = tuple(range(1, n + 1))
        ck = k[(1,)](xf, yf, *ints, BLOCK=128)
        ck._init_handles()
        c = launch_mod._c_launcher(ck, False)
        f, meta = ck.function, ck.packed_metadata
        out[f"C launcher, 2 pointers + {n} ints + 1 constexpr"] = (
            lambda c=c, f=f, meta=meta, ints=ints: c(1, 1, 1, stream, f, False, False, None, None, meta, None,
                                                     None, None, xp, yp, *ints, 128))
    mn.rms_norm(x, w, 1e-6)
    key = (x.shape, x.stride(), x.dtype, x.device, (w.shape, w.stride(), w.dtype, w.device), 1e-6)
    plan = norms_api._RMS_PLANS.plans[key]
    ln = plan.launch
    ck = next(iter(ln.compiled.values()))
    c = launch_mod._c_launcher(ck, False)
    args = (x.data_ptr(), x.data_ptr(), w.data_ptr(), y.data_ptr(), y.data_ptr(), 1e-6, 0.0, *plan.ints, *ln.const_values)
    f, meta = ck.function, ck.packed_metadata
    out["norm kernel: C launcher, all arguments prepared"] = lambda: c(1, 1, 1, stream, f, False, False, None, None,
                                                                          meta, None, None, None, *args)
    out["norm kernel: prepared Launch (fast path)"] = lambda: ln(x, x, w, y, y, 1e-6, 0.0, *plan.ints)
    out["mn.rms_norm 1 x 4096"] = lambda: mn.rms_norm(x, w, 1e-6)
    out["mn.add_rms_norm 1 x 4096"] = lambda: mn.add_rms_norm(x, x, w, 1e-6)
    return {name: host_overhead_us(fn, ()) for name, fn in out.items()}


if __name__ == "__main__":
    res = rows()
    print("| call | host us |\n|---|---|")
    for k, v in res.items():
        print(f"| {k} | {v:.2f} |")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "launch_cost.json"), "w") as fh:
            json.dump(res, fh, indent=1)
