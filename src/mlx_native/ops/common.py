"""Helpers shared by the op families (no kernels, no validation)."""

from __future__ import annotations

import torch
import triton


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Math dtype of the reference path: float64 stays float64, all else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


def prev_pow2(n: int) -> int:
    """Largest power of two <= n (n >= 1)."""
    return 1 << (max(int(n), 1).bit_length() - 1)
