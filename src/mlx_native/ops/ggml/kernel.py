"""Plans of the GGUF ops (metadata computed once per signature).

Kernels land in the next commit; until then the plans run the reference.
"""

from __future__ import annotations

import math

from . import ref


class DequantPlan:
    def __init__(self, raw, t, shape, dtype):
        self.t, self.shape, self.dtype = t, tuple(shape), dtype
        self.numel = math.prod(self.shape)

    def __call__(self, raw):
        return ref.dequantize(raw, self.t, self.shape, self.dtype)


class MatmulPlan:
    def __init__(self, x, raw, t, n, k):
        self.t, self.n, self.k = t, n, k
        self.out_shape = (*x.shape[:-1], n)
        self.empty = math.prod(self.out_shape) == 0

    def __call__(self, x, raw):
        return ref.matmul(x, raw, self.t, self.n, self.k)


class EmbeddingPlan:
    def __init__(self, ids, raw, t, shape, dtype):
        self.t, self.shape, self.dtype = t, tuple(shape), dtype
        self.out_shape = (*ids.shape, shape[1])
        self.numel = math.prod(self.out_shape)

    def __call__(self, ids, raw):
        return ref.rows(raw, self.t, self.shape[1], ids, self.dtype)
