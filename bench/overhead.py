"""Host (Python) overhead per call at a tiny size: ours vs a bare Triton launch and the peers."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import mlx_native as mn
from common import host_overhead_us
from peers import compiled, liger, torch_rms_norm, torch_silu_mul


@triton.jit
def _noop_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def rows() -> list[dict]:
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    q = torch.randn(1, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    pos = torch.tensor([7], device="cuda")
    lig = liger()
    from mlx_native.ops.norms import api as norms_api
    from mlx_native.runtime.plans import tensor_key

    plan = norms_api._RMS_PLANS.get((tensor_key(x), tensor_key(w), 1e-6), x, w, None, 1e-6)
    calls = {
        "component: torch.empty 1x4096 bf16": (lambda: torch.empty((1, 4096), dtype=torch.bfloat16, device="cuda"), ()),
        "component: plan key + lookup": (lambda: norms_api._RMS_PLANS.get((tensor_key(x), tensor_key(w), 1e-6)), ()),
        "component: prepared Launch only": (lambda: plan.launch(x, x, w, y, y, *plan.ints, plan.inv_n, 1e-6, 0.0), ()),
        "bare triton launch (copy kernel)": (lambda: _noop_kernel[(4,)](x, y, 4096, BLOCK=1024), ()),
        "mlx-native rms_norm": (lambda: mn.rms_norm(x, w, 1e-6), ()),
        "mlx-native add_rms_norm": (lambda: mn.add_rms_norm(x, x, w, 1e-6), ()),
        "mlx-native silu_mul": (lambda: mn.silu_mul(x, x), ()),
        "mlx-native rope (positions)": (lambda: mn.rope(q, 128, positions=pos[:, None]), ()),
        "mlx-native head_norm_rope": (lambda: mn.head_norm_rope(q[0], w[:128], positions=pos), ()),
        "torch eager rms_norm (HF math)": (lambda: torch_rms_norm(x, w, 1e-6), ()),
        "torch.compile rms_norm": (compiled(lambda: torch_rms_norm(x, w, 1e-6)), ()),
        "torch eager silu_mul": (lambda: torch_silu_mul(x, x), ()),
    }
    if lig:
        calls["liger rms_norm"] = (lambda: lig["rms_norm"](x, w, 1e-6), ())
        calls["liger silu_mul"] = (lambda: lig["silu_mul"](x, x), ())
    return [{"call": name, "host_us": host_overhead_us(fn, args)} for name, (fn, args) in calls.items()]


def markdown(results: list[dict]) -> str:
    lines = ["## Host overhead per call (1 x 4096 bf16, no sync; Python issue time)", "",
             "| call | host us |", "|---|---|"]
    lines += [f"| {r['call']} | {r['host_us']:.2f} |" for r in results]
    return "\n".join(lines) + "\n"
