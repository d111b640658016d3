"""Plans of the MoE ops. Kernels land in the next commit; until then the plans run the reference."""

from __future__ import annotations

import math

import torch

from . import ref


def _x_rows(x: torch.Tensor, t: int, k: int) -> torch.Tensor:
    if x.dim() == 2:
        return x.unsqueeze(1).expand(t, k, x.shape[-1]).reshape(t * k, x.shape[-1])
    return x.reshape(t * k, x.shape[-1])


def _finish(g, u, has_up, activation, t, k, dtype):
    out = ref.activate(g, u, activation) if has_up else g
    return out.reshape(t, k, -1).to(dtype)


class RoutePlan:
    def __init__(self, logits, top_k, scoring, renormalize, bias):
        self.top_k, self.scoring, self.renormalize = top_k, scoring, renormalize
        self.empty = logits.numel() == 0

    def __call__(self, logits, bias):
        return ref.route(logits, self.top_k, self.scoring, self.renormalize, bias)


class MoeQmmPlan:
    def __init__(self, x, ids, w, scales, biases, has_up, group_size, bits, activation, t, k, n):
        self.has_up, self.group_size, self.bits, self.activation = has_up, group_size, bits, activation
        self.t, self.k, self.n = t, k, n
        self.out_shape = (t, k, n)
        self.empty = t * k * n == 0

    def reference(self, x, ids, w, scales, biases, w_up, scales_up, biases_up):
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        xr = _x_rows(x, self.t, self.k)
        flat = ids.reshape(-1)
        g = ref.affine_rows(xr, flat, w, scales, biases, self.group_size, self.bits, compute)
        u = ref.affine_rows(xr, flat, w_up, scales_up, biases_up, self.group_size, self.bits, compute) \
            if self.has_up else None
        return _finish(g, u, self.has_up, self.activation, self.t, self.k, x.dtype)

    __call__ = reference


class MoeGgmlPlan:
    def __init__(self, x, ids, raw, t, dims, has_up, activation, tt, k):
        self.t, self.has_up, self.activation = t, has_up, activation
        self.n_experts, self.n, self.kf = dims
        self.tokens, self.k = tt, k
        self.out_shape = (tt, k, self.n)
        self.empty = tt * k * self.n == 0

    def reference(self, x, ids, raw, raw_up):
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        xr = _x_rows(x, self.tokens, self.k)
        flat = ids.reshape(-1)
        g = ref.ggml_rows(xr, flat, raw, self.t, self.n, compute)
        u = ref.ggml_rows(xr, flat, raw_up, self.t, self.n, compute) if self.has_up else None
        return _finish(g, u, self.has_up, self.activation, self.tokens, self.k, x.dtype)

    __call__ = reference


class ReducePlan:
    def __init__(self, y, weights):
        self.out_shape = (*y.shape[:-2], y.shape[-1])
        self.empty = math.prod(self.out_shape) == 0

    def __call__(self, y, weights):
        return ref.weighted_reduce(y, weights)
