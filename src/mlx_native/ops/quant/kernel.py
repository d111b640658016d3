"""Plans of the MLX-affine ops (metadata computed once per signature).

Kernels land in the next commit; until then the plans run the reference.
"""

from __future__ import annotations

import math

import torch

from . import ref


class DequantPlan:
    def __init__(self, w, scales, biases, group_size, bits, width):
        self.group_size, self.bits = group_size, bits
        self.out_shape = (*w.shape[:-1], width)
        self.numel = math.prod(self.out_shape)

    def __call__(self, w, scales, biases):
        return ref.dequantize(w, scales, biases, self.group_size, self.bits)


class QmmPlan:
    def __init__(self, x, w, scales, biases, transpose, group_size, bits, n, k, out_dtype):
        self.transpose, self.group_size, self.bits, self.out_dtype = transpose, group_size, bits, out_dtype
        self.out_shape = (*x.shape[:-1], n)
        self.empty = math.prod(self.out_shape) == 0

    def __call__(self, x, w, scales, biases):
        return ref.quantized_matmul(x, w, scales, biases, self.transpose, self.group_size, self.bits, self.out_dtype)


class GatherQmmPlan:
    def __init__(self, x, w, scales, biases, batch, transpose, group_size, bits, n, k, out_dtype):
        self.transpose, self.group_size, self.bits, self.out_dtype = transpose, group_size, bits, out_dtype
        self.out_shape = (*batch, x.shape[-2], n)
        self.empty = math.prod(self.out_shape) == 0

    def __call__(self, x, w, scales, biases, lhs, rhs):
        return ref.gather_qmm(x, w, scales, biases, lhs, rhs, self.transpose, self.group_size, self.bits,
                              self.out_dtype)
