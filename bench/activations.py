"""Activation family benchmark: silu_mul, gelu_mul, sigmoid_mul, softcap, softmax."""

from __future__ import annotations

import torch

import mlx_native as mn
import common
from common import Case, Impl
from peers import (compiled, liger, torch_gelu_mul, torch_sigmoid_mul, torch_silu_mul, torch_softcap,
                   torch_softmax)

GATED_LARGE = [(8192, 8192), (4096, 14336)]  # 128 / 112 MiB per operand
GATED_DECODE = [(1, 8960), (4, 14336), (16, 14336)]
SOFTMAX = [("large", 4096, 32768), ("large", 512, 151936), ("decode", 1, 151936), ("decode", 16, 32000)]


def _pair(rows, cols, dtype):
    def make():
        return (torch.randn(rows, cols, device=common.DEVICE, dtype=dtype), torch.randn(rows, cols, device=common.DEVICE, dtype=dtype))
    return make


def cases(dtype=torch.bfloat16) -> list[Case]:
    lig = liger()
    esize = torch.empty((), dtype=dtype).element_size()
    out = []
    for regime, shapes in (("large", GATED_LARGE), ("decode", GATED_DECODE)):
        for rows, cols in shapes:
            shape = f"{rows}x{cols}"
            nbytes = 3 * rows * cols * esize
            impls = {"mlx-native": Impl(mn.silu_mul), "torch eager": Impl(torch_silu_mul),
                     "torch.compile": Impl(compiled(torch_silu_mul))}
            if lig:
                impls["liger"] = Impl(lig["silu_mul"])
            out.append(Case("activations", "silu_mul", shape, str(dtype), regime, nbytes, _pair(rows, cols, dtype),
                            impls))
            impls = {"mlx-native": Impl(lambda a, b: mn.gelu_mul(a, b, "tanh")), "torch eager": Impl(torch_gelu_mul),
                     "torch.compile": Impl(compiled(torch_gelu_mul))}
            if lig:
                impls["liger"] = Impl(lig["gelu_mul"])
            out.append(Case("activations", "gelu_mul", shape, str(dtype), regime, nbytes, _pair(rows, cols, dtype),
                            impls))
            if regime == "large" and cols == 8192:
                impls = {"mlx-native": Impl(mn.sigmoid_mul), "torch eager": Impl(torch_sigmoid_mul),
                         "torch.compile": Impl(compiled(torch_sigmoid_mul))}
                out.append(Case("activations", "sigmoid_mul", shape, str(dtype), regime, nbytes,
                                _pair(rows, cols, dtype), impls))
                impls = {"mlx-native": Impl(lambda a, b: mn.softcap(a, 30.0)),
                         "torch eager": Impl(lambda a, b: torch_softcap(a, 30.0)),
                         "torch.compile": Impl(compiled(lambda a, b: torch_softcap(a, 30.0)))}
                out.append(Case("activations", "softcap", shape, str(dtype), regime, 2 * rows * cols * esize,
                                _pair(rows, cols, dtype), impls))
    for regime, rows, cols in SOFTMAX:
        impls = {"mlx-native": Impl(lambda x: mn.softmax(x)), "torch eager": Impl(torch_softmax),
                 "torch.compile": Impl(compiled(torch_softmax))}
        if lig:
            impls["liger"] = Impl(lig["softmax"])

        def make(rows=rows, cols=cols):
            return (torch.randn(rows, cols, device=common.DEVICE, dtype=dtype) * 4,)

        out.append(Case("activations", "softmax", f"{rows}x{cols}", str(dtype), regime, 2 * rows * cols * esize, make,
                        impls))
    return out
