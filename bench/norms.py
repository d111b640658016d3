"""Norm family benchmark: rms_norm, add_rms_norm, l2_norm vs PyTorch eager, torch.compile, Liger."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import mlx_native as mn
import common
from common import Case, Impl
from peers import compiled, liger, torch_add_rms_norm, torch_rms_norm

LARGE = [(16384, 4096), (8192, 8192), (65536, 1024)]  # 128 MiB of bf16 input each
DECODE = [(1, 576), (1, 4096), (4, 2048), (16, 4096), (16, 8192)]
EPS = 1e-6


def cases(dtype=torch.bfloat16) -> list[Case]:
    out = []
    lig = liger()
    esize = torch.empty((), dtype=dtype).element_size()
    for regime, shapes in (("large", LARGE), ("decode", DECODE)):
        for rows, hidden in shapes:
            shape = f"{rows}x{hidden}"

            def make_xw(rows=rows, hidden=hidden):
                return (torch.randn(rows, hidden, device=common.DEVICE, dtype=dtype),
                        torch.randn(hidden, device=common.DEVICE, dtype=dtype))

            impls = {
                "mlx-native": Impl(lambda x, w: mn.rms_norm(x, w, EPS)),
                "torch eager": Impl(lambda x, w: torch_rms_norm(x, w, EPS)),
                "torch F.rms_norm": Impl(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS)),
                "torch.compile": Impl(compiled(lambda x, w: torch_rms_norm(x, w, EPS))),
            }
            if lig:
                impls["liger"] = Impl(lambda x, w: lig["rms_norm"](x, w, EPS))
            out.append(Case("norms", "rms_norm", shape, str(dtype), regime, 2 * rows * hidden * esize, make_xw, impls))

            def make_xrw(rows=rows, hidden=hidden):
                return (torch.randn(rows, hidden, device=common.DEVICE, dtype=dtype),
                        torch.randn(rows, hidden, device=common.DEVICE, dtype=dtype),
                        torch.randn(hidden, device=common.DEVICE, dtype=dtype))

            impls = {
                "mlx-native": Impl(lambda x, r, w: mn.add_rms_norm(x, r, w, EPS)),
                "torch eager": Impl(lambda x, r, w: torch_add_rms_norm(x, r, w, EPS)),
                "torch.compile": Impl(compiled(lambda x, r, w: torch_add_rms_norm(x, r, w, EPS))),
            }
            if lig:
                impls["liger"] = Impl(lambda x, r, w: lig["add_rms_norm"](x, r, w, EPS))
            out.append(Case("norms", "add_rms_norm", shape, str(dtype), regime, 4 * rows * hidden * esize, make_xrw,
                            impls))

            if regime == "large" and hidden == 4096:
                def l2_torch(x):
                    xf = x.float()
                    return (xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + EPS)).to(x.dtype)

                impls = {
                    "mlx-native": Impl(lambda x, w: mn.l2_norm(x, EPS)),
                    "torch eager": Impl(lambda x, w: l2_torch(x)),
                    "torch.compile": Impl(compiled(lambda x, w: l2_torch(x))),
                }
                out.append(Case("norms", "l2_norm", shape, str(dtype), regime, 2 * rows * hidden * esize, make_xw,
                                impls))
    return out
