"""An RMS norm handed from one one-row mat-vec launch to the next.

In a decode step each o / down projection is followed by ``add_rms_norm(y, residual, w)`` and then by the
next projection of the normed row. The norm needs the sum of squares of the whole row, which no program of
the first mat-vec has; but the next mat-vec is linear in its input, so ``W (h * w / rms(h)) = (W (h * w)) /
rms(h)``: the 1 / rms can wait until the end of the second launch.

* The producing mat-vec (:func:`handoff_store`): each program adds the residual to its rows (``h``, rounded
  to the output dtype, as the norm kernel does), stores ``h``, ``h * w`` and one fp32 part of ``sum(h^2)``.
* The consuming mat-vec reads ``h * w`` as its x and, while its first weights are in flight, sums the parts
  (:func:`handoff_rstd`, in a fixed order: deterministic); it scales its fp32 results by ``rsqrt(mean + eps)``.

No launch of its own, and no program waits for another. (Measured alternative, removed: the producer's last
program to arrive ran the norm over the whole row after the others were done, 2567.7 against 2640.6 tok/s with
norm launches on the 8B-shaped model; the handoff gave 2729.1 against 2616.4 in one run,
bench/results/2026-11-23-h100-session11/.)
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def handoff_store(h_ptr, res_ptr, w_ptr, scaled_ptr, part_ptr, y, offs, mask, w_offset):
    """``y [BN]`` fp32 rows at int64 ``offs`` -> ``h = round(round(y) + residual)`` at ``h_ptr``,
    ``round(h * (w + w_offset))`` at ``scaled_ptr`` and ``sum(h^2)`` of the rows at ``part_ptr``."""
    dt = h_ptr.dtype.element_ty
    r = tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = (y.to(dt).to(tl.float32) + r).to(dt)
    tl.store(h_ptr + offs, h, mask=mask)
    hf = tl.where(mask, h.to(tl.float32), 0.0)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32) + w_offset
    tl.store(scaled_ptr + offs, (hf * w).to(scaled_ptr.dtype.element_ty), mask=mask)
    tl.store(part_ptr, tl.sum(hf * hf, axis=0))


@triton.jit
def handoff_rstd(part_ptr, K, eps, PARTS: tl.constexpr, NPARTS: tl.constexpr):
    """``rsqrt(sum(parts) / K + eps)`` over the ``NPARTS <= PARTS`` (a power of two) fp32 parts at
    ``part_ptr``."""
    i = tl.arange(0, PARTS)
    p = tl.load(part_ptr + i, mask=i < NPARTS, other=0.0)
    return tl.rsqrt(tl.sum(p, axis=0) / K + eps)
