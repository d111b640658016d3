"""``t += 1`` on a small int32 tensor, in place, as a programmatic dependent launch.

A decode step ends by advancing its position counters (``models.base.ModelCache.advance``). Done with
``Tensor.add_``, that is a plain launch between the step's last dependent (the argmax) and the next step's
first (the embedding lookup): neither could then be scheduled while the launch before it finishes
(``kernels/dependent.py``). This kernel waits for the launch before and lets the next one be scheduled at once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..runtime.dispatch import use_triton
from ..runtime.plans import PlanCache
from .dependent import dependent_launch, enter

OP = "increment_"


@triton.jit
def _increment_kernel(t_ptr, n, BLOCK: tl.constexpr, PDL: tl.constexpr = 0):
    enter(PDL)  # a programmatic dependent launch: nothing before this (kernels/dependent.py)
    i = tl.arange(0, BLOCK)
    ok = i < n
    tl.store(t_ptr + i, tl.load(t_ptr + i, mask=ok) + 1, mask=ok)


def _launch(n: int, device: torch.device):
    return dependent_launch(_increment_kernel, (1,), dict(BLOCK=triton.next_power_of_2(n)), device, True, num_warps=1)


_LAUNCHES = PlanCache(_launch)


def increment_(t: torch.Tensor) -> torch.Tensor:
    """``t += 1`` for a contiguous int32 tensor of at most 4096 elements (one program); returns ``t``. Other
    tensors, and the reference backend, take ``Tensor.add_``."""
    n = t.numel()
    if t.dtype != torch.int32 or not t.is_contiguous() or n > 4096 or n == 0 or not use_triton(OP, t):
        return t.add_(1)
    _LAUNCHES.get((n, t.device), n, t.device)(t, n)
    return t
