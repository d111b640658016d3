"""Pure-PyTorch reference of token selection (the CPU path and the oracle).

Same definitions as the kernels (see kernel.py): the same keep-set rules and
the same counter-based random numbers, so for a given seed the reference and
the kernel pick the same token (up to last-ulp differences of exp/log at
near-ties).
"""

from __future__ import annotations

import math

import torch

_M32 = 0xFFFFFFFF


def mix32(x: torch.Tensor) -> torch.Tensor:
    """The kernel's 32-bit hash on int64 tensors holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = (x * 0x21F0AAAD) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & _M32
    x = x ^ (x >> 15)
    return x


def gumbel(seed: torch.Tensor, rows: int, n_cols: int, device) -> torch.Tensor:
    """``[rows, n_cols]`` fp32 Gumbel noise of the kernel for int64 ``seed`` ``[1]`` or ``[rows]``."""
    seed = seed.reshape(-1).to(device=device, dtype=torch.int64).expand(rows)
    lo, hi = seed & _M32, (seed >> 32) & _M32
    row = torch.arange(rows, device=device, dtype=torch.int64)
    key = mix32(lo ^ mix32(hi ^ mix32((row + 0x9E3779B9) & _M32)))[:, None]
    c = torch.arange(n_cols, device=device, dtype=torch.int64)[None, :]
    r = mix32((mix32(c ^ key) + key) & _M32)
    u = ((r >> 8).to(torch.float32) + 0.5) * (1.0 / 16777216.0)
    return -torch.log(-torch.log(u))


def _rows(x: torch.Tensor) -> torch.Tensor:
    x = x.reshape(-1, x.shape[-1]).to(torch.float32)
    return torch.where(torch.isnan(x), torch.full_like(x, float("-inf")), x)


def argmax(x: torch.Tensor) -> torch.Tensor:
    """Index of the largest value of each row (first on ties, NaN ignored); int64 ``x.shape[:-1]``."""
    return torch.argmax(_rows(x), dim=-1).reshape(x.shape[:-1])


def keep_mask(x: torch.Tensor, inv_temp: float, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    """Bool ``[R, V]``: the tokens ``sample`` may pick (x: fp32 rows)."""
    n_cols = x.shape[-1]
    m = x.max(dim=-1, keepdim=True).values
    z = (x - m) * torch.tensor(inv_temp, dtype=torch.float32)
    keep = torch.ones_like(x, dtype=torch.bool)
    if 0 < top_k < n_cols:
        kth = torch.topk(x, top_k, dim=-1).values[..., -1:]
        keep &= x >= kth
    if top_p < 1.0:
        p = torch.where(keep, torch.exp(z), torch.zeros_like(z))
        target = torch.tensor(top_p, dtype=torch.float32) * p.sum(-1, keepdim=True)
        sorted_x, order = torch.sort(torch.where(keep, x, torch.full_like(x, float("-inf"))), dim=-1,
                                     descending=True, stable=True)
        cum = torch.cumsum(p.gather(-1, order), dim=-1)
        # the smallest prefix whose mass reaches the target; its last value is the threshold
        first = torch.searchsorted(cum.contiguous(), target.contiguous()).clamp(max=n_cols - 1)
        thr = sorted_x.gather(-1, first)
        keep &= x >= thr
    if min_p > 0.0:
        keep &= z >= torch.tensor(math.log(min_p), dtype=torch.float32)
    return keep


def sample(x: torch.Tensor, seed: torch.Tensor, temperature: float, top_k: int, top_p: float,
           min_p: float) -> torch.Tensor:
    if temperature == 0.0:
        return argmax(x)
    xs = _rows(x)
    rows, n_cols = xs.shape
    inv_temp = float(torch.tensor(1.0 / temperature, dtype=torch.float32))
    keep = keep_mask(xs, inv_temp, top_k, top_p, min_p)
    m = xs.max(dim=-1, keepdim=True).values
    z = (xs - m) * torch.tensor(inv_temp, dtype=torch.float32)
    score = torch.where(keep, z + gumbel(seed, rows, n_cols, x.device), torch.full_like(z, float("-inf")))
    return torch.argmax(score, dim=-1).reshape(x.shape[:-1])
