"""RoPE family benchmark: rope (q and k) and head_norm_rope vs eager, torch.compile, Liger."""

from __future__ import annotations

import torch

import mlx_native as mn
import common
from common import Case, Impl
from peers import compiled, cos_sin, liger, torch_head_norm_rope, torch_rope

BASE = 1e6
EPS = 1e-6


def _rope_case(regime, batch, seq, hq, hkv, dim, dtype, lig):
    esize = torch.empty((), dtype=dtype).element_size()

    def make():
        q = torch.randn(batch, seq, hq, dim, device=common.DEVICE, dtype=dtype).transpose(1, 2)  # HF: physical [B, L, H, D]
        k = torch.randn(batch, seq, hkv, dim, device=common.DEVICE, dtype=dtype).transpose(1, 2)
        pos = torch.arange(seq, device=common.DEVICE) + 1000
        cos, sin = cos_sin(pos, dim, BASE, dtype)
        return q, k, cos, sin, pos

    def ours(q, k, cos, sin, pos):
        qo, ko = mn.rope_qk(q.transpose(1, 2), k.transpose(1, 2), dim, base=BASE, positions=pos[:, None])
        return qo.transpose(1, 2), ko.transpose(1, 2)

    def ours_two_calls(q, k, cos, sin, pos):
        p = pos[:, None]  # rows of [B, L, H] -> positions [L, 1]
        return (mn.rope(q.transpose(1, 2), dim, base=BASE, positions=p).transpose(1, 2),
                mn.rope(k.transpose(1, 2), dim, base=BASE, positions=p).transpose(1, 2))

    impls = {
        "mlx-native": Impl(ours),
        "mlx-native 2x rope": Impl(ours_two_calls),
        "torch eager": Impl(lambda q, k, cos, sin, pos: torch_rope(q, k, cos, sin)),
        "torch.compile": Impl(compiled(lambda q, k, cos, sin, pos: torch_rope(q, k, cos, sin))),
    }
    if lig:
        impls["liger"] = Impl(lambda q, k, cos, sin, pos: lig["rope"](q, k, cos, sin))
    n = batch * seq * (hq + hkv) * dim
    return Case("rope", "rope(q,k)", f"B{batch} L{seq} Hq{hq} Hkv{hkv} D{dim}", str(dtype), regime,
                2 * n * esize, make, impls)


def _head_norm_rope_case(regime, tokens, heads, dim, dtype, lig):
    esize = torch.empty((), dtype=dtype).element_size()

    def make():
        x = torch.randn(tokens, heads, dim, device=common.DEVICE, dtype=dtype)
        w = torch.randn(dim, device=common.DEVICE, dtype=dtype)
        pos = torch.arange(tokens, device=common.DEVICE) + 1000
        cos, sin = cos_sin(pos, dim, BASE, dtype)
        return x, w, pos, cos, sin

    impls = {
        "mlx-native": Impl(lambda x, w, pos, cos, sin: mn.head_norm_rope(x, w, positions=pos, eps=EPS, base=BASE)),
        "mlx-native unfused": Impl(lambda x, w, pos, cos, sin: mn.rope(mn.rms_norm(x, w, EPS), dim, base=BASE,
                                                                      positions=pos[:, None])),
        "torch eager": Impl(lambda x, w, pos, cos, sin: torch_head_norm_rope(x, w, cos, sin, EPS)),
        "torch.compile": Impl(compiled(lambda x, w, pos, cos, sin: torch_head_norm_rope(x, w, cos, sin, EPS))),
    }
    if lig:
        k_dummy = {}

        def liger_pair(x, w, pos, cos, sin):
            y = lig["rms_norm"](x, w, EPS)
            q = y.view(1, tokens, heads, dim).transpose(1, 2)
            k = k_dummy.setdefault("k", torch.zeros(1, 1, tokens, dim, device=common.DEVICE, dtype=dtype))
            return lig["rope"](q, k, cos, sin)[0].transpose(1, 2).reshape(tokens, heads, dim)

        impls["liger (norm + rope)"] = Impl(liger_pair)
    n = tokens * heads * dim
    return Case("rope", "head_norm_rope", f"T{tokens} H{heads} D{dim}", str(dtype), regime, 2 * n * esize, make,
                impls)


def cases(dtype=torch.bfloat16) -> list[Case]:
    lig = liger()
    out = [
        _rope_case("large", 4, 4096, 32, 8, 128, dtype, lig),  # 160 MiB of q + k
        _rope_case("large", 1, 16384, 16, 16, 256, dtype, lig),
        _rope_case("decode", 1, 1, 32, 8, 128, dtype, lig),
        _rope_case("decode", 8, 1, 32, 8, 128, dtype, lig),
        _rope_case("decode", 1, 16, 32, 8, 128, dtype, lig),
        _head_norm_rope_case("large", 32768, 16, 128, dtype, lig),  # 128 MiB
        _head_norm_rope_case("large", 8192, 32, 256, dtype, lig),
        _head_norm_rope_case("decode", 1, 32, 128, dtype, lig),
        _head_norm_rope_case("decode", 16, 32, 128, dtype, lig),
        _head_norm_rope_case("decode", 4, 16, 256, dtype, lig),
        _head_norm_rope_case("decode", 1, 8, 256, dtype, lig),  # Gemma-3-4B-like q heads at one token
    ]
    return out
